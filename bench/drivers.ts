/**
 * `npm run bench -- --drivers [--reps n]`: what each database driver drizzle-jobs supports costs an app, side by
 * side, with the same code through the public API:
 *
 *   better-sqlite3        a fresh SQLite file, WAL and synchronous = NORMAL (as the README opens it)
 *   libsql                a fresh SQLite file through @libsql/client (file: URL), WAL; synchronous stays FULL, a setting of each connection that the client's pool does not keep
 *   node-postgres (pg)    a fresh database on the benchmark's server (bench/pg/lib.ts), a pg.Pool of 10
 *   postgres.js           a fresh database on the same server, postgres(url, { max: 10 })
 *   PGlite                PostgreSQL in WASM inside the process, in memory (no data directory)
 *
 * Tables come from the project's drizzle-kit migrations (drizzle/ for SQLite, drizzle-pg/ for PostgreSQL, the
 * server's databases migrated with node-postgres's migrator, PGlite's with drizzle-orm/pglite's). Three figures:
 *
 *   enqueue      app transactions, each inserting one app row and adding its job with `enqueue(tx, …)`: tx/s
 *   enqueueMany  jobs added by `enqueueMany` in calls of `batchSize`: jobs/s
 *   drain        waiting jobs (added untimed) run by `work(db, queue, no-op, { slots: 16 })`: jobs/s from the
 *                worker's start until its handler has run every job and `worker.stop()` has written the last
 *                ends (as bench/subjects/drizzle-jobs*.ts time a drain)
 *
 * Each figure runs on a database of its own, after an untimed warm-up of the same calls on another queue of that
 * database. Each driver's figures of one run are measured in a child process of their own (bench/lib/child.ts),
 * the drivers in an order that turns with the run; `--reps` (default 3) runs of each, reported as medians.
 * BENCH_SMALL=1 makes every count small, to check in seconds that the stage runs. Prints a Markdown table and
 * the machine; writes no file.
 */
import { readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { PGlite } from '@electric-sql/pglite'
import { createClient } from '@libsql/client'
import Database from 'better-sqlite3'
import { count } from 'drizzle-orm'
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3'
import { migrate as migrateSqlite } from 'drizzle-orm/better-sqlite3/migrator'
import { drizzle as drizzleLibsql } from 'drizzle-orm/libsql'
import { migrate as migrateLibsql } from 'drizzle-orm/libsql/migrator'
import { drizzle as drizzleNodePg } from 'drizzle-orm/node-postgres'
import { migrate as migrateNodePg } from 'drizzle-orm/node-postgres/migrator'
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator'
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js'
import pg from 'pg'
import postgres from 'postgres'
import { defineQueue, enqueue, enqueueMany, queueCounts, work, type Database as JobsDatabase, type Queue } from '../src/index.js'
import { PG_MIGRATIONS } from '../test/helpers/pg-database.js'
import { appRow, benchMessages as sqliteMessages, CREATE_APP_TABLE as SQLITE_APP_TABLE } from './app.js'
import { ROOT, runTask, type Task } from './lib/child.js'
import { nowMs } from './lib/clock.js'
import { freshPath, runDir } from './lib/files.js'
import { formatValue } from './lib/report.js'
import { median } from './lib/stats.js'
import {
  benchServer,
  counter,
  createDatabase,
  databaseUrl,
  dropAll,
  dropDatabase,
  onServer,
  benchMessages as pgMessages,
  CREATE_APP_TABLE as PG_APP_TABLE,
} from './pg/lib.js'
import { SMALL } from './pg/rows.js'

const MODULE = import.meta.filename
const SQLITE_MIGRATIONS = resolve(ROOT, 'drizzle')

export const DRIVERS = ['better-sqlite3', 'libsql', 'node-postgres', 'postgres.js', 'pglite'] as const
export type Driver = (typeof DRIVERS)[number]
/** The drivers whose databases are on the PostgreSQL server. */
const ON_SERVER: readonly Driver[] = ['node-postgres', 'postgres.js']

export const DRIVER_COUNTS = {
  appTransactions: SMALL ? 100 : 2_000,
  batchTotal: SMALL ? 1_000 : 20_000,
  batchSize: SMALL ? 100 : 1_000,
  drain: SMALL ? 200 : 5_000,
  slots: 16,
  /** The untimed warm-up before each figure, on a queue of its own: app transactions, jobs added and drained. */
  warmTransactions: SMALL ? 20 : 100,
  warmJobs: SMALL ? 100 : 500,
} as const

const FIGURES = ['enqueue', 'enqueueMany', 'drain'] as const
type Figure = (typeof FIGURES)[number]

const n = (value: number): string => value.toLocaleString('en-US')
const FIGURE_LABELS: Record<Figure, string> = {
  enqueue: `\`enqueue\`, one job per app transaction (${n(DRIVER_COUNTS.appTransactions)} transactions)`,
  enqueueMany: `\`enqueueMany\`, ${n(DRIVER_COUNTS.batchTotal)} jobs in calls of ${n(DRIVER_COUNTS.batchSize)}`,
  drain: `drain of ${n(DRIVER_COUNTS.drain)} waiting jobs, \`slots: ${DRIVER_COUNTS.slots}\``,
}
const UNITS: Record<Figure, 'tx/s' | 'jobs/s'> = { enqueue: 'tx/s', enqueueMany: 'jobs/s', drain: 'jobs/s' }

interface Reply {
  messageId: number
}
const queue = defineQueue<Reply>('bench')
const warmQueue = defineQueue<Reply>('warm')

// The child's side: one driver's three figures.

/** A fresh database opened through one driver, with the app's table. */
interface Opened {
  db: JobsDatabase
  /** App transactions `from`…`from + count - 1`: each inserts its app row and adds its job to `q` in the same transaction. */
  appTransactions(q: Queue<Reply>, from: number, count: number): Promise<void>
  appRows(): Promise<number>
  version(): Promise<string>
  close(): Promise<void>
}

interface MeasureArgs {
  driver: Driver
  /** A fresh migrated database per figure (the drivers on the server). */
  urls?: Record<Figure, string>
  /** Where the SQLite files go. */
  dir: string
}

export interface DriverResult {
  version: string
  values: Record<Figure, number>
}

function openSqlite(dir: string): Opened {
  const client = new Database(freshPath(dir, 'drivers'))
  client.pragma('journal_mode = wal')
  client.pragma('synchronous = NORMAL')
  const db = drizzleSqlite({ client })
  migrateSqlite(db, { migrationsFolder: SQLITE_MIGRATIONS })
  client.exec(SQLITE_APP_TABLE)
  return {
    db,
    async appTransactions(q, from, count) {
      for (let i = from; i < from + count; i++) {
        db.transaction((tx) => {
          const { lastInsertRowid } = tx.insert(sqliteMessages).values(appRow(i)).run()
          enqueue(tx, q, { messageId: Number(lastInsertRowid) })
        })
      }
    },
    appRows: async () => (db.select({ n: count() }).from(sqliteMessages).get() as { n: number }).n,
    version: async () => `SQLite ${client.prepare('select sqlite_version()').pluck().get() as string}`,
    close: async () => void client.close(),
  }
}

async function openLibsql(dir: string): Promise<Opened> {
  const file = freshPath(dir, 'drivers')
  const client = createClient({ url: `file:${file}` })
  await client.execute('pragma journal_mode = wal')
  const db = drizzleLibsql({ client })
  await migrateLibsql(db, { migrationsFolder: SQLITE_MIGRATIONS })
  await client.executeMultiple(SQLITE_APP_TABLE)
  return {
    db,
    async appTransactions(q, from, count) {
      for (let i = from; i < from + count; i++) {
        await db.transaction(async (tx) => {
          const [row] = await tx.insert(sqliteMessages).values(appRow(i)).returning({ id: sqliteMessages.id })
          await enqueue(tx, q, { messageId: (row as { id: number }).id })
        })
      }
    },
    appRows: async () => ((await db.select({ n: count() }).from(sqliteMessages))[0] as { n: number }).n,
    version: async () => `SQLite ${(await client.execute('select sqlite_version() as v')).rows[0]?.v as string}`,
    close: async () => client.close(),
  }
}

/** A database on any PostgreSQL driver: the same Drizzle code on each. */
function pgOpened(db: PgDatabase<PgQueryResultHKT>, version: () => Promise<string>, close: () => Promise<void>): Opened {
  return {
    db,
    async appTransactions(q, from, count) {
      for (let i = from; i < from + count; i++) {
        await db.transaction(async (tx) => {
          const [row] = await tx.insert(pgMessages).values(appRow(i)).returning({ id: pgMessages.id })
          await enqueue(tx, q, { messageId: (row as { id: number }).id })
        })
      }
    },
    appRows: async () => ((await db.select({ n: count() }).from(pgMessages))[0] as { n: number }).n,
    version,
    close,
  }
}

async function openPostgres(driver: Driver, url: string | undefined): Promise<Opened> {
  if (driver === 'node-postgres') {
    const pool = new pg.Pool({ connectionString: url, max: 10 })
    pool.on('error', () => {})
    const version = async (): Promise<string> => ((await pool.query('select version() as v')).rows[0] as { v: string }).v
    return pgOpened(drizzleNodePg({ client: pool }), version, () => pool.end())
  }
  if (driver === 'postgres.js') {
    const client = postgres(url as string, { max: 10, onnotice: () => {} })
    const version = async (): Promise<string> => ((await client`select version() as v`)[0] as { v: string }).v
    return pgOpened(drizzlePostgresJs({ client }), version, () => client.end())
  }
  const client = new PGlite()
  const db = drizzlePglite({ client })
  await migratePglite(db, { migrationsFolder: PG_MIGRATIONS })
  await client.exec(PG_APP_TABLE)
  const version = async (): Promise<string> => ((await client.query<{ v: string }>('select version() as v')).rows[0] as { v: string }).v
  return pgOpened(db, version, () => client.close())
}

async function open(args: MeasureArgs, figure: Figure): Promise<Opened> {
  if (args.driver === 'better-sqlite3') return openSqlite(args.dir)
  if (args.driver === 'libsql') return openLibsql(args.dir)
  return openPostgres(args.driver, args.urls?.[figure])
}

async function addJobs(db: JobsDatabase, q: Queue<Reply>, total: number, batch: number): Promise<void> {
  for (let done = 0; done < total; done += batch) {
    const items = Array.from({ length: Math.min(batch, total - done) }, (_, k) => ({ value: { messageId: done + k } }))
    await enqueueMany(db, q, items)
  }
}

/** Runs a worker of `q` until its handler has run `target` times, then stops it; the time includes the stop (the last ends' flush). */
async function drain(db: JobsDatabase, q: Queue<Reply>, target: number): Promise<number> {
  const count = counter(target)
  const errors: unknown[] = []
  const t0 = nowMs()
  const worker = work(db, q, () => count.handle(), { slots: DRIVER_COUNTS.slots, onError: (error) => errors.push(error) })
  await count.reached
  await worker.stop()
  const elapsedMs = nowMs() - t0
  if (errors.length > 0) throw errors[0]
  return elapsedMs
}

async function expectCounts(db: JobsDatabase, q: Queue<Reply>, state: 'waiting' | 'done', expected: number): Promise<void> {
  const counts = await queueCounts(db, q)
  if (counts[state] !== expected) throw new Error(`expected ${expected} jobs ${state} in '${q.name}', found ${counts[state]}`)
}

const measures: Record<Figure, (opened: Opened) => Promise<number>> = {
  async enqueue({ db, appTransactions, appRows }) {
    const { appTransactions: count, warmTransactions: warm } = DRIVER_COUNTS
    await appTransactions(warmQueue, 0, warm)
    const t0 = nowMs()
    await appTransactions(queue, warm, count)
    const ms = nowMs() - t0
    await expectCounts(db, queue, 'waiting', count)
    const rows = await appRows()
    if (rows !== warm + count) throw new Error(`expected ${warm + count} app rows, found ${rows}`)
    return (count / ms) * 1000
  },

  async enqueueMany({ db }) {
    const { batchTotal: total, batchSize: batch, warmJobs } = DRIVER_COUNTS
    await addJobs(db, warmQueue, warmJobs, batch)
    const t0 = nowMs()
    await addJobs(db, queue, total, batch)
    const ms = nowMs() - t0
    await expectCounts(db, queue, 'waiting', total)
    return (total / ms) * 1000
  },

  async drain({ db }) {
    const { drain: total, warmJobs } = DRIVER_COUNTS
    await addJobs(db, warmQueue, warmJobs, 1_000)
    await addJobs(db, queue, total, 1_000)
    await drain(db, warmQueue, warmJobs)
    const ms = await drain(db, queue, total)
    await expectCounts(db, queue, 'done', total)
    return (total / ms) * 1000
  },
}

export const tasks: Record<string, Task> = {
  async measure(args: MeasureArgs): Promise<DriverResult> {
    const values = {} as Record<Figure, number>
    let version = ''
    for (const figure of FIGURES) {
      const opened = await open(args, figure)
      try {
        version ||= await opened.version()
        values[figure] = await measures[figure](opened)
      } finally {
        await opened.close()
      }
    }
    return { version, values }
  },
}

// The parent's side: fresh databases, one child per driver and run, the table.

const HEADINGS: Record<Driver, string> = {
  'better-sqlite3': `better-sqlite3 ${packageVersion('better-sqlite3')} (file, WAL)`,
  libsql: `libsql (@libsql/client ${packageVersion('@libsql/client')}, file, WAL, synchronous FULL)`,
  'node-postgres': `node-postgres (pg ${packageVersion('pg')})`,
  'postgres.js': `postgres.js ${packageVersion('postgres')}`,
  pglite: `PGlite ${packageVersion('@electric-sql/pglite')} (in memory)`,
}

function packageVersion(name: string): string {
  try {
    return (JSON.parse(readFileSync(resolve(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version
  } catch {
    return '(version unknown)'
  }
}

/** A fresh database on the server, migrated with drizzle-kit's migrations through node-postgres, with the app's table; its URL. */
async function freshPgDatabase(server: string): Promise<{ name: string; url: string }> {
  const name = await createDatabase(server, 'drivers')
  const url = databaseUrl(server, name)
  const pool = new pg.Pool({ connectionString: url, max: 1 })
  pool.on('error', () => {})
  try {
    await migrateNodePg(drizzleNodePg({ client: pool }), { migrationsFolder: PG_MIGRATIONS })
    await pool.query(PG_APP_TABLE)
  } finally {
    await pool.end()
  }
  return { name, url }
}

export async function runDrivers(): Promise<void> {
  const { values: flags } = parseArgs({
    options: {
      drivers: { type: 'boolean', default: true },
      reps: { type: 'string', default: '3' },
    },
  })
  const reps = Number(flags.reps)
  if (!Number.isInteger(reps) || reps < 1) throw new Error('--reps: a whole number of at least 1')

  const started = nowMs()
  const startedAt = new Date()
  const log = (line: string): void => console.log(`[${((nowMs() - started) / 1000).toFixed(0).padStart(4)} s] ${line}`)
  const loadBefore = os.loadavg()
  const samples = new Map<string, number[]>()
  const versions = new Map<Driver, string>()
  const errors: string[] = []

  const server = await benchServer()
  const serverVersion = await onServer(server.url, async (client) => {
    const { rows } = await client.query(
      `select version() as version, current_setting('synchronous_commit') as sc, current_setting('fsync') as fsync`,
    )
    const row = rows[0] as { version: string; sc: string; fsync: string }
    return `${row.version} (synchronous_commit = ${row.sc}, fsync = ${row.fsync})`
  })
  log(`server: ${server.source} (${serverVersion})`)
  const dir = runDir()
  try {
    for (let rep = 0; rep < reps; rep++) {
      const shift = rep % DRIVERS.length
      for (const driver of [...DRIVERS.slice(shift), ...DRIVERS.slice(0, shift)]) {
        const made: string[] = []
        try {
          let urls: Record<Figure, string> | undefined
          if (ON_SERVER.includes(driver)) {
            const entries: Array<[Figure, string]> = []
            for (const figure of FIGURES) {
              const { name, url } = await freshPgDatabase(server.url)
              made.push(name)
              entries.push([figure, url])
            }
            urls = Object.fromEntries(entries) as Record<Figure, string>
          }
          const args: MeasureArgs = urls ? { driver, urls, dir } : { driver, dir }
          const result = await runTask<DriverResult>(MODULE, 'measure', args, { timeoutMs: 600_000 })
          versions.set(driver, result.version)
          for (const figure of FIGURES) {
            const key = `${figure}/${driver}`
            samples.set(key, [...(samples.get(key) ?? []), result.values[figure]])
          }
          log(
            `run ${rep + 1}, ${driver}: ${FIGURES.map((figure) => `${figure} ${formatValue(result.values[figure], UNITS[figure])} ${UNITS[figure]}`).join(', ')}`,
          )
        } catch (error) {
          const message = `run ${rep + 1}, ${driver}: ${(error as Error).message.split('\n').slice(0, 6).join(' / ')}`
          errors.push(message)
          log(`ERROR ${message}`)
        } finally {
          for (const name of made) await dropDatabase(server.url, name).catch(() => undefined)
        }
      }
    }
  } finally {
    await dropAll(server.url)
    server.stop()
    rmSync(dir, { recursive: true, force: true })
  }

  const loadAfter = os.loadavg()
  const load = (values: number[]): string => values.map((value) => value.toFixed(2)).join(' / ')
  const cpus = os.cpus()
  const cell = (figure: Figure, driver: Driver): string => {
    const values = samples.get(`${figure}/${driver}`) ?? []
    return values.length === 0 ? 'n/a' : `${formatValue(median(values), UNITS[figure])} ${UNITS[figure]}`
  }
  const lines = [
    `## drizzle-jobs by driver${SMALL ? ' (BENCH_SMALL=1: small counts, not figures to quote)' : ''}`,
    '',
    `Medians of ${reps} run(s) of each driver, each run in a process of its own on fresh databases.`,
    '',
    `| figure | ${DRIVERS.map((driver) => HEADINGS[driver]).join(' | ')} |`,
    `| --- | ${DRIVERS.map(() => '---:').join(' | ')} |`,
    ...FIGURES.map((figure) => `| ${FIGURE_LABELS[figure]} | ${DRIVERS.map((driver) => cell(figure, driver)).join(' | ')} |`),
    '',
    'Every run, in run order:',
    '',
    ...FIGURES.map(
      (figure) =>
        `- ${figure} (${UNITS[figure]}): ${DRIVERS.map((driver) => `${driver} ${(samples.get(`${figure}/${driver}`) ?? []).map((value) => formatValue(value, UNITS[figure])).join(', ') || 'n/a'}`).join('; ')}`,
    ),
    '',
    'Machine:',
    '',
    `- \`npm run bench -- --drivers --reps ${reps}\`${SMALL ? ' (BENCH_SMALL=1)' : ''}, ${startedAt.toISOString()}, ${((nowMs() - started) / 60_000).toFixed(1)} minutes`,
    `- ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${os.type()} ${os.release()}, Node ${process.version}`,
    `- load average (1 / 5 / 15 min) before: ${load(loadBefore)}, after: ${load(loadAfter)}`,
    `- PostgreSQL server (node-postgres, postgres.js): ${serverVersion}, ${server.source}`,
    `- PGlite ${packageVersion('@electric-sql/pglite')}: ${versions.get('pglite') ?? 'not measured'}`,
    `- better-sqlite3 ${packageVersion('better-sqlite3')}: ${versions.get('better-sqlite3') ?? 'not measured'}, WAL, synchronous = NORMAL`,
    `- @libsql/client ${packageVersion('@libsql/client')}: ${versions.get('libsql') ?? 'not measured'}, WAL`,
    `- drizzle-orm ${packageVersion('drizzle-orm')}`,
  ]
  if (errors.length > 0) lines.push('', 'Errors:', '', ...errors.map((error) => `- ${error}`))
  console.log(`\n${lines.join('\n')}`)
  if (errors.length > 0) process.exitCode = 1
}
