/**
 * The crash soak's database, whatever its dialect: a fresh SQLite file (WAL), or a fresh PostgreSQL database
 * made on a server and migrated as test/helpers/pg.ts makes them. The soak adds its jobs through it, watches
 * how many ended, ends worker connections (PostgreSQL), and reads at the end what soak-check.ts checks.
 */
import { join } from 'node:path'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { defineQueue, enqueueMany, type EnqueueItem } from '../../src/index.js'
import { MIGRATIONS, openDb, tempDir } from '../helpers/db.js'
import { freshPgDb } from '../helpers/pg.js'
import { SOAK_QUEUE, SOAK_WORKER_APP, type SoakDialect, type SoakJob } from './soak-protocol.js'

/** The soak's app table: each handler's final insert. */
const APP_TABLE = 'create table soak_result (job_id text primary key, total integer not null, pid integer not null)'

/** A job of the soak queue as the check reads it. */
export interface SoakJobRow {
  id: string
  grp: string | null
  state: string
  attempts: number
  maxAttempts: number
  result: string | null
  error: string | null
}

/** What the soak's check reads from the database once the workers are stopped. */
export interface SoakSnapshot {
  jobs: SoakJobRow[]
  appRows: { id: string; total: number }[]
  /** The jobs that still name a worker (their owner): a lease no end released. */
  leasesLeft: number
  stepsLeft: number
  /** SQLite's integrity_check ('ok' when sound); null on PostgreSQL, which has no such check. */
  integrity: string | null
  /** The queue's counts by state, as its readers see them; undefined when the queue has no row. */
  counters: Record<string, number> | undefined
}

export interface SoakDatabase {
  readonly dialect: SoakDialect
  /** What a worker process opens: the file's path, or the database's URL. */
  readonly target: string
  /** Where the database is, for a look when something failed. */
  readonly where: string
  /** Adds the jobs in one transaction. */
  addJobs(items: readonly EnqueueItem<SoakJob>[], attempts: number): Promise<void>
  /** Jobs of the soak queue that ended (done, failed or canceled). */
  countEnded(): Promise<number>
  /**
   * PostgreSQL only: ends one connection of the worker processes at random with pg_terminate_backend
   * (never the soak's own); answers whether one was ended.
   */
  terminateWorkerConnection?(): Promise<boolean>
  snapshot(): Promise<SoakSnapshot>
  /** Closes the soak's connections; removes the database unless `keep` (a failed soak keeps it for a look). */
  close(keep: boolean): Promise<void>
}

/** A fresh database for a soak: a SQLite file, or a PostgreSQL database on the server at `server`. */
export async function openSoakDatabase(dialect: SoakDialect, options: { server?: string } = {}): Promise<SoakDatabase> {
  return dialect === 'sqlite' ? openSqlite() : openPostgres(options.server)
}

function queueOf(attempts: number) {
  return defineQueue<SoakJob>(SOAK_QUEUE.name, { attempts })
}

function openSqlite(): SoakDatabase {
  const file = join(tempDir('drizzle-jobs-soak-'), 'soak.db')
  const { client, db } = openDb(file)
  migrate(db, { migrationsFolder: MIGRATIONS })
  client.exec(APP_TABLE)
  const countEnded = client.prepare(`select count(*) from jobs_job where queue = ? and state in ('done', 'failed', 'canceled')`).pluck()
  return {
    dialect: 'sqlite',
    target: file,
    where: file,
    async addJobs(items, attempts) {
      const queue = queueOf(attempts)
      db.transaction((tx) => {
        for (let i = 0; i < items.length; i += 1_000) enqueueMany(tx, queue, items.slice(i, i + 1_000))
      })
    },
    countEnded: async () => countEnded.get(SOAK_QUEUE.name) as number,
    async snapshot() {
      const jobs = client
        .prepare(`select id, grp, state, attempts, max_attempts as maxAttempts, result, error from jobs_job where queue = ?`)
        .all(SOAK_QUEUE.name) as SoakJobRow[]
      return {
        jobs,
        appRows: client.prepare(`select job_id as id, total from soak_result`).all() as { id: string; total: number }[],
        leasesLeft: client.prepare(`select count(*) from jobs_job where owner is not null`).pluck().get() as number,
        stepsLeft: client.prepare(`select count(*) from jobs_step`).pluck().get() as number,
        integrity: (client.prepare(`pragma integrity_check`).pluck().all() as string[]).join('; '),
        counters: client
          .prepare(`select waiting, scheduled, running, done, failed, canceled from jobs_queue where name = ?`)
          .get(SOAK_QUEUE.name) as Record<string, number> | undefined,
      }
    },
    async close() {
      client.close()
    },
  }
}

const STATES = ['waiting', 'scheduled', 'running', 'done', 'failed', 'canceled'] as const

/** The default server of `npm run soak -- --pg`: DATABASE_URL, else the local one. */
export const DEFAULT_PG_SERVER = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres'

async function openPostgres(server: string = DEFAULT_PG_SERVER): Promise<SoakDatabase> {
  const database = await freshPgDb({ server })
  const { pool, db } = database
  await pool.query(APP_TABLE)
  const count = async (sql: string, values: unknown[] = []) => Number((await pool.query<{ n: string }>(sql, values)).rows[0]!.n)
  return {
    dialect: 'postgres',
    target: database.url,
    where: database.url,
    async addJobs(items, attempts) {
      const queue = queueOf(attempts)
      await db.transaction(async (tx) => {
        for (let i = 0; i < items.length; i += 1_000) await enqueueMany(tx, queue, items.slice(i, i + 1_000))
      })
    },
    countEnded: () =>
      count(`select count(*) as n from jobs_job where queue = $1 and state in ('done', 'failed', 'canceled')`, [SOAK_QUEUE.name]),
    async terminateWorkerConnection() {
      const { rows } = await pool.query<{ ended: boolean }>(
        `select pg_terminate_backend(pid) as ended from pg_stat_activity
          where datname = current_database() and application_name = $1 and pid <> pg_backend_pid()
          order by random() limit 1`,
        [SOAK_WORKER_APP],
      )
      return rows[0]?.ended === true
    },
    async snapshot() {
      const jobs = (
        await pool.query<SoakJobRow>(
          `select id, grp, state, attempts, max_attempts as "maxAttempts", result::text as result, error from jobs_job where queue = $1`,
          [SOAK_QUEUE.name],
        )
      ).rows
      // A queue's counts are its row plus the changes the workers have not folded into it yet (src/dialect/pg/counts.ts).
      const counts = await pool.query<Record<string, string | null>>(
        `select ${STATES.map((state) => `(select ${state} from jobs_queue where name = $1) + coalesce((select sum(${state}) from jobs_count where queue = $1), 0) as ${state}`).join(', ')}`,
        [SOAK_QUEUE.name],
      )
      const row = counts.rows[0]
      return {
        jobs,
        appRows: (await pool.query<{ id: string; total: number }>(`select job_id as id, total from soak_result`)).rows,
        leasesLeft: await count(`select count(*) as n from jobs_job where owner is not null`),
        stepsLeft: await count(`select count(*) as n from jobs_step`),
        integrity: null,
        counters: row && row.waiting !== null ? Object.fromEntries(STATES.map((state) => [state, Number(row[state])])) : undefined,
      }
    },
    close: (keep) => (keep ? database.pool.end() : database.drop()),
  }
}
