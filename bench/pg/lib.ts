/**
 * What every subject of the PostgreSQL benchmark shares: the server, fresh databases on it, the app's
 * table, the tasks' arguments and answers, and a worker's drain timed from its handler's calls.
 *
 * The server: DATABASE_URL when set; else the server on 127.0.0.1:5432 (trust authentication, database
 * `postgres`) if it answers; else a private cluster started as the tests start theirs
 * (test/helpers/pg-global.ts: initdb and pg_ctl on a free loopback port), stopped at the end of the run.
 */
import { randomBytes } from 'node:crypto'
import { bigint, integer, pgTable, serial, text } from 'drizzle-orm/pg-core'
import pg from 'pg'
import { databaseUrl, onServer } from '../../test/helpers/pg-database.js'
import { startPrivateCluster } from '../../test/helpers/pg-global.js'
import { nowMs, sleep } from '../lib/clock.js'
import type { Observation } from '../lib/procs.js'
import type { TelemetryMode } from '../lib/tasks.js'

export { databaseUrl, onServer }

export const LOCAL_SERVER = 'postgres://postgres@127.0.0.1:5432/postgres'

/** The run's server: its URL, where it comes from, and how to let it go (a private cluster is stopped). */
export interface BenchServer {
  url: string
  source: string
  stop(): void
}

export async function benchServer(): Promise<BenchServer> {
  const given = process.env.DATABASE_URL
  if (given) return { url: given, source: 'DATABASE_URL', stop: () => {} }
  try {
    await onServer(LOCAL_SERVER, (client) => client.query('select 1'))
    return { url: LOCAL_SERVER, source: 'the server on 127.0.0.1:5432', stop: () => {} }
  } catch {
    const cluster = await startPrivateCluster()
    if ('unavailable' in cluster) throw new Error(cluster.unavailable)
    return { url: cluster.url, source: 'a private cluster (initdb + pg_ctl, as the tests start one)', stop: () => cluster.stop() }
  }
}

/** The server's version and the settings that decide durability, for the report. */
export async function serverDescription(server: string): Promise<string> {
  return onServer(server, async (client) => {
    const { rows } = await client.query(
      `select current_setting('server_version') as version, current_setting('synchronous_commit') as sc, current_setting('fsync') as fsync, current_setting('shared_buffers') as sb`,
    )
    const row = rows[0] as { version: string; sc: string; fsync: string; sb: string }
    return `PostgreSQL ${row.version} (synchronous_commit = ${row.sc}, fsync = ${row.fsync}, shared_buffers = ${row.sb})`
  })
}

const created = new Set<string>()

/** A new empty database (or a copy of `template`, which nobody may be connected to) on `server`; its name. */
export async function createDatabase(server: string, prefix: string, template?: string): Promise<string> {
  const name = `dj_bench_${prefix.replace(/[^a-z0-9]/g, '_')}_${randomBytes(4).toString('hex')}`
  await onServer(server, (client) => client.query(`create database "${name}"${template ? ` template "${template}"` : ''}`))
  created.add(name)
  return name
}

/** Drops a database, ending whatever is still connected to it. */
export async function dropDatabase(server: string, name: string): Promise<void> {
  await onServer(server, (client) => client.query(`drop database if exists "${name}" with (force)`))
  created.delete(name)
}

/** Drops every database this process made and has not dropped yet. */
export async function dropAll(server: string): Promise<void> {
  for (const name of [...created]) await dropDatabase(server, name).catch(() => undefined)
}

/**
 * Turns autovacuum off on every table of the database at `url` (`autovacuum_enabled = false`, a storage
 * parameter that every copy made from it keeps), so that no table gains planner statistics but from the
 * run's own `VACUUM ANALYZE`, whatever the server's `autovacuum` setting. Answers how many tables it set.
 */
export async function holdAutovacuum(url: string): Promise<number> {
  return onServer(url, async (client) => {
    const { rows } = await client.query(
      `select format('%I.%I', n.nspname, c.relname) as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where c.relkind in ('r', 'm') and n.nspname not in ('pg_catalog', 'information_schema') and n.nspname not like 'pg_toast%'`,
    )
    for (const row of rows as Array<{ name: string }>) await client.query(`alter table ${row.name} set (autovacuum_enabled = false)`)
    return rows.length
  })
}

/** How many tables of the database at `url` (outside the system's schemas) have planner statistics: rows in pg_statistic. */
export async function tablesWithStatistics(url: string): Promise<number> {
  return onServer(url, async (client) => {
    const { rows } = await client.query(
      `select count(distinct s.starelid)::int as n from pg_statistic s join pg_class c on c.oid = s.starelid
       join pg_namespace n on n.oid = c.relnamespace
       where n.nspname not in ('pg_catalog', 'information_schema') and n.nspname not like 'pg_toast%'`,
    )
    return (rows[0] as { n: number }).n
  })
}

/** `VACUUM ANALYZE` of the whole database at `url`: its tables' statistics, which every copy made from it carries. */
export async function vacuumAnalyze(url: string): Promise<void> {
  await onServer(url, (client) => client.query('vacuum analyze'))
}

/** The app's own table in the "one job per app transaction" row, on PostgreSQL, written with Drizzle. */
export const benchMessages = pgTable('bench_message', {
  id: serial('id').primaryKey(),
  chatId: integer('chat_id').notNull(),
  body: text('body').notNull(),
  createdAt: bigint('created_at', { mode: 'number' }).notNull(),
})

export const CREATE_APP_TABLE = `create table if not exists bench_message (
  id serial primary key, chat_id integer not null, body text not null, created_at bigint not null)`

export function appRow(i: number): { chatId: number; body: string; createdAt: number } {
  return { chatId: i % 100, body: `message ${i}`, createdAt: Date.now() }
}

/** The queue (task identifier, queue name) every subject's jobs go to, and the one its warm-up drains. */
export const QUEUE = 'bench'
export const WARM_QUEUE = 'warm'

/** Reads a count pair from a client every `everyMs` at most (the coordinator's observation of the jobs). */
export function observer(client: pg.Client, text: string, params: unknown[], everyMs = 15): () => Promise<Observation> {
  return async () => {
    await sleep(everyMs)
    const { rows } = await client.query(text, params)
    const row = rows[0] as { open: string | number; running: string | number }
    return { open: Number(row.open), running: Number(row.running) }
  }
}

/** A connected client on `url` for the coordinator. */
export async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url })
  client.on('error', () => {})
  await client.connect()
  return client
}

/**
 * A handler that counts its calls and resolves `reached` at the `target`th; with `deadline` (on the shared
 * clock) it resolves then too, so that a subject too slow for the whole drain is measured on part of it.
 */
export function counter(
  target: number,
  deadline?: number,
): { handle: () => void; reached: Promise<void>; handled: () => number; firstAt: () => number | undefined } {
  let handled = 0
  let first: number | undefined
  let done!: () => void
  const reached = new Promise<void>((resolvePromise) => (done = resolvePromise))
  if (deadline !== undefined) {
    const timer = setTimeout(done, Math.max(0, deadline - nowMs()))
    void reached.then(() => clearTimeout(timer))
  }
  return {
    handle: () => {
      first ??= nowMs()
      if (++handled === target) done()
    },
    reached,
    handled: () => handled,
    firstAt: () => first,
  }
}

/**
 * The rates of app transactions with and without the job, measured in alternating rounds of `round`
 * transactions (the first mode given by `withJobFirst`), so that both see the same load on a shared machine.
 */
export async function alternatingRates(
  count: number,
  round: number,
  withJobFirst: boolean,
  transactions: (n: number, withJob: boolean) => Promise<void>,
): Promise<{ txPerSec: number; appOnlyTxPerSec: number }> {
  const ms = new Map<boolean, number>([
    [true, 0],
    [false, 0],
  ])
  for (let done = 0; done < count; done += round) {
    for (const withJob of withJobFirst ? [true, false] : [false, true]) {
      const t0 = nowMs()
      await transactions(Math.min(round, count - done), withJob)
      ms.set(withJob, (ms.get(withJob) as number) + nowMs() - t0)
    }
  }
  return { txPerSec: (count / (ms.get(true) as number)) * 1000, appOnlyTxPerSec: (count / (ms.get(false) as number)) * 1000 }
}

// The tasks' arguments and answers (every `url` is a fresh database of its own).

export interface PgSetupArgs {
  url: string
}
export interface PgFillArgs {
  url: string
  count: number
  warm: number
}
export interface PgFillResult {
  ms: number
  lastId?: string
}
export interface PgEnqueueAppArgs {
  url: string
  count: number
  warmup: number
  appOnlyFirst: boolean
}
export interface PgEnqueueBatchArgs {
  url: string
  count: number
  batch: number
  warmupBatches: number
}
export interface PgProcessArgs {
  url: string
  count: number
  slots: number
  /** Stop the measurement after this long (pg-boss, whose poll interval bounds it). */
  capMs?: number
  /** drizzle-jobs only, the telemetry rows: how OpenTelemetry is set up, each job then carrying a trace context. */
  telemetry?: TelemetryMode
}
export interface PgProcessesArgs extends PgProcessArgs {
  procs: number
}
export interface PgPickupArgs {
  url: string
  samples: number
  warmup: number
  gapMaxMs: number
  otherProcess: boolean
  listen: boolean
}
export interface PgScaleArgs extends PgProcessArgs {
  lastId: string
  aheadSamples: number
}
