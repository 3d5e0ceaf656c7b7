/**
 * The driver suite's databases: a fresh migrated one per test on each driver (better-sqlite3, node-postgres,
 * postgres.js 3 and 4), the engine's connection on it, and what a test reads back with plain SQL in the same
 * words on every driver: times as ms, flags as 0/1, JSON parsed, whatever the dialect stores. The driver's flush
 * and the engine's own programs (jobEndMany, counting, storeLimits) run here as a worker and its maintenance run them.
 */
import { afterEach, beforeEach } from 'vitest'
import {
  ask,
  type ClaimLimits,
  type ClaimPlan,
  type ClaimPlanner,
  type ClaimTaken,
  type Connection,
  type Executor,
  type JobEnd,
  type NewJob,
} from '../../src/dialect/index.js'
import { connectionOf as sqliteConnectionOf } from '../../src/dialect/better-sqlite3/connection.js'
import { counting, noShift, shift, writeShift } from '../../src/engine/counts.js'
import type { QueueDefinition } from '../../src/engine/definition.js'
import { storeLimits } from '../../src/engine/queue-limits.js'
import { jobEndMany, type RunEndRecord } from '../../src/engine/record.js'
import { freshDb, removeTempDirs, type TestDb } from '../helpers/db.js'
import { freshPgDb, pgConnectionOf, POSTGRES_JS, type TestPgDb } from '../helpers/pg.js'
import { freshPglite, type TestPglite } from '../helpers/pglite.js'
import { freshLibsql, type TestLibsql } from '../helpers/libsql.js'
import { connectionOf } from '../../src/dialect/open.js'

import { NOW } from '../pg/jobs.js'

export { claim, done, endOne, flush, newJob, NOW, request, retried, WORKER_HOST_AND_PID, workerLease } from '../pg/jobs.js'

/** Every driver the suite runs on, by the name its tests carry. */
export const DRIVERS = ['sqlite', 'libsql', 'postgres', ...POSTGRES_JS, 'pglite'] as const
export type DriverName = (typeof DRIVERS)[number]

/** A job's row as plain SQL reads it, in the same terms on every driver. */
export interface StoredJob {
  state: string
  attempts: number
  owner: string | null
  error: string | null
  runAt: number
  finishedAt: number | null
  result: unknown
  abandoned: number
}

/** A worker's row as plain SQL reads it. */
export interface StoredWorker {
  owner: string
  expires: number
  channel: string | null
}

/** One test's database on one driver. */
export interface DriverDb {
  readonly driver: DriverName
  readonly dialect: 'sqlite' | 'postgres'
  /** The engine's connection through the driver under test. */
  readonly connection: Connection
  readonly executor: Executor
  /** Reads rows with plain SQL, `$1`, `$2`… in order for parameters on both dialects (on PostgreSQL through node-postgres). */
  rows<T = Record<string, unknown>>(sql: string, ...params: unknown[]): Promise<T[]>
  /** A time column as ms since the epoch, in SQL. */
  ms(column: string): string
  /** A parameter of ms since the epoch as the dialect stores a time, in SQL. */
  time(param: string): string
  /** The job `seq` as stored. */
  job(seq: number): Promise<StoredJob>
  /** The workers' rows, by owner. */
  workers(): Promise<StoredWorker[]>
  /** The ids of the jobs that name a worker, with it: `id:owner`, by id. */
  owned(): Promise<string[]>
  /** Another connection to the same database, as another process would hold: its commits are another's. */
  other(): Connection
  /** On PostgreSQL, the payloads of the notices on drizzle_jobs heard from now on, through a client of its own. */
  listen(): Promise<{ heard: string[]; stop(): void }>
}

/** JSON as stored: text on SQLite, parsed by node-postgres from jsonb. */
export function json(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value
}

interface Opened {
  db: DriverDb
  close(): Promise<void>
}

function sqliteDb(t: TestDb): DriverDb {
  const toSqlite = (sql: string) => sql.replace(/\$\d+/g, '?')
  const rows = async <T>(sql: string, ...params: unknown[]) => {
    const statement = t.client.prepare(toSqlite(sql))
    if (statement.reader) return statement.all(...params) as T[]
    statement.run(...params)
    return [] as T[]
  }
  return common('sqlite', 'sqlite', sqliteConnectionOf(t.db), rows, {
    ms: (column) => column,
    time: (param) => param,
    other: () => sqliteConnectionOf(t.reopen().db),
    listen: () => Promise.reject(new Error('SQLite tells other processes nothing: they poll its data version')),
  })
}

function postgresDb(driver: DriverName, t: TestPgDb): DriverDb {
  const handle = driver === 'postgres' ? t.db : t.postgresJs(driver as (typeof POSTGRES_JS)[number]).db
  return common(driver, 'postgres', pgConnectionOf(handle), async (sql, ...params) => (await t.pool.query(sql, params)).rows, {
    ms: (column) => `(extract(epoch from ${column}) * 1000)::float8`,
    time: (param) => `to_timestamp(${param}::float8 / 1000)`,
    other: () => pgConnectionOf(t.postgresJs().db),
    async listen() {
      const heard: string[] = []
      const client = await t.pool.connect()
      client.on('notification', (notice) => heard.push(notice.payload ?? ''))
      await client.query('listen drizzle_jobs')
      return { heard, stop: () => client.release() }
    },
  })
}

function libsqlDb(t: TestLibsql): DriverDb {
  return common('libsql', 'sqlite', connectionOf(t.db), (sql, ...params) => t.query(sql, ...params), {
    ms: (column) => column,
    time: (param) => param,
    other: () => connectionOf(t.reopen().db),
    listen: () => Promise.reject(new Error('SQLite tells other processes nothing: they poll')),
  })
}

function pgliteDb(t: TestPglite): DriverDb {
  return common('pglite', 'postgres', pgConnectionOf(t.db), (sql, ...params) => t.query(sql, ...params), {
    ms: (column) => `(extract(epoch from ${column}) * 1000)::float8`,
    time: (param) => `to_timestamp(${param}::float8 / 1000)`,
    other: () => {
      throw new Error('PGlite serves one process: no other connection holds its database')
    },
    async listen() {
      const heard: string[] = []
      const stop = await t.client.listen('drizzle_jobs', (payload) => heard.push(payload))
      return { heard, stop: () => void stop() }
    },
  })
}

function common(
  driver: DriverName,
  dialect: 'sqlite' | 'postgres',
  connection: Connection,
  rows: DriverDb['rows'],
  parts: Pick<DriverDb, 'ms' | 'time' | 'other' | 'listen'>,
): DriverDb {
  const { ms } = parts
  return {
    driver,
    dialect,
    connection,
    executor: connection.executor,
    rows,
    ...parts,
    async job(seq) {
      const [row] = await rows<StoredJob>(
        `select state, attempts, owner, error, ${ms('run_at')} as "runAt", ${ms('finished_at')} as "finishedAt",
          result, cast(abandoned as integer) as abandoned from jobs_job where seq = $1`,
        seq,
      )
      if (!row) throw new Error(`no job ${seq}`)
      return { ...row, result: json(row.result) }
    },
    workers: () => rows<StoredWorker>(`select owner, ${ms('expires_at')} as expires, channel from jobs_lease order by owner`),
    owned: async () =>
      (await rows<{ id: string; owner: string }>(`select id, owner from jobs_job where owner is not null order by id`)).map(
        (row) => `${row.id}:${row.owner}`,
      ),
  }
}

/**
 * Gives each test of a `describe.each(DRIVERS)` block a fresh migrated database on `driver`, its connection ready
 * for writes (the counting triggers installed, as a worker's start installs them), dropped after the test.
 */
export function eachDriverDb(driver: DriverName): DriverDb {
  let current: Opened | undefined
  beforeEach(async () => {
    if (driver === 'sqlite') {
      const t = freshDb()
      current = { db: sqliteDb(t), close: async () => t.close() }
    } else if (driver === 'libsql') {
      const t = await freshLibsql()
      current = { db: libsqlDb(t), close: async () => t.close() }
    } else if (driver === 'pglite') {
      const t = await freshPglite()
      current = { db: pgliteDb(t), close: () => t.close() }
    } else {
      const t = await freshPgDb()
      current = { db: postgresDb(driver, t), close: () => t.drop() }
    }
    await current.db.connection.prepareWrites()
  })
  afterEach(async () => {
    await current?.close()
    current = undefined
    removeTempDirs()
  })
  const now = (): DriverDb => {
    if (!current) throw new Error('the fresh database exists only inside a test')
    return current.db
  }
  return {
    driver,
    dialect: driver === 'sqlite' || driver === 'libsql' ? 'sqlite' : 'postgres',
    get connection() {
      return now().connection
    },
    get executor() {
      return now().executor
    },
    rows: (sql, ...params) => now().rows(sql, ...params),
    ms: (column) => now().ms(column),
    time: (param) => now().time(param),
    job: (seq) => now().job(seq),
    workers: () => now().workers(),
    owned: () => now().owned(),
    other: () => now().other(),
    listen: () => now().listen(),
  }
}

/** Adds jobs in one transaction as enqueueMany does, counting them; answers their seqs by id. */
export async function addJobs(c: Connection, jobs: NewJob[]): Promise<Map<string, number>> {
  await c.write(function* (db) {
    const moved = new Map<string, ReturnType<typeof noShift>>()
    for (const job of jobs) {
      if (!(yield* ask(db.jobInsert(job)))) continue
      const counts = moved.get(job.queue) ?? noShift()
      moved.set(job.queue, counts)
      shift(counts, null, job.state)
    }
    for (const [queue, counts] of moved) yield* writeShift(db, queue, counts)
  })
  const seqs = new Map<string, number>()
  for (const job of jobs) {
    const found = await c.executor.jobFind(job.queue, job.id)
    if (found) seqs.set(job.id, found.seq)
  }
  return seqs
}

/** What a flush planned by `plan` (not the engine's) took, and the policies it read for the plan. */
export interface PlannedFlush {
  landed: boolean[]
  taken: ClaimTaken
  /** Each policy the plan was asked with. A driver may ask first with a presumed policy it then checks (PostgreSQL). */
  policies: ClaimLimits[]
}

/** A flush of `owner`'s `ends` whose claim is `plan`'s, in a write transaction of its own. */
export async function flushPlanned(
  c: Connection,
  { queue, owner, ends = [], now = NOW }: { queue: string; owner: string; ends?: JobEnd[]; now?: number },
  plan: (policy: ClaimLimits) => ClaimPlan,
): Promise<PlannedFlush> {
  const policies: ClaimLimits[] = []
  let taken: ClaimTaken = { claimed: [], heldBack: [] }
  const planner: ClaimPlanner = {
    plan(policy) {
      policies.push(policy)
      return plan(policy)
    },
    claimed(answer) {
      taken = answer
      return null
    },
  }
  const { landed } = await c.write((db) => ask(db.jobFlush({ queue, owner, now, clock: () => now, ends, claim: planner })))
  return { landed, taken, policies }
}

/** The policy of `queue` a flush at `now` reads for its plan, when the queue has one (a limit, a rate, a job that must run alone). */
export async function policyOf(c: Connection, queue: string, now = NOW): Promise<ClaimLimits> {
  const { policies } = await flushPlanned(c, { queue, owner: 'reader', now }, () => ({ alone: null, holdBack: false, take: null }))
  return policies.at(-1)!
}

/** Records ends as a worker's flush does; answers, per record, whether it landed. */
export async function end(c: Connection, queue: string, records: RunEndRecord[]): Promise<boolean[]> {
  return c.write((db) => counting(db, queue, (moved) => jobEndMany(db, records, moved)))
}

/** Stores the definition's limits as a worker's first flush does; answers the warning it would give. */
export async function store(c: Connection, queue: QueueDefinition, now = NOW): Promise<string | null> {
  return c.write((db) => storeLimits(db, queue, now))
}
