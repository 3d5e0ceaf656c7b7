/**
 * The driver suite's databases: a fresh migrated one per test on each driver of DRIVERS, the engine's connection on
 * it, and what a test reads back with plain SQL in the same words on every driver: times as ms, flags as 0/1, JSON
 * parsed, whatever the dialect stores. The driver's flush and the engine's own programs (jobEndMany, counting,
 * storeLimits) run here as a worker and its maintenance run them.
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
import { counting, noShift, shift, writeShift } from '../../src/engine/counts.js'
import type { QueueDefinition } from '../../src/engine/definition.js'
import { storeLimits } from '../../src/engine/queue-limits.js'
import { jobEndMany, type RunEndRecord } from '../../src/engine/record.js'
import { freshDb, removeTempDirs } from '../helpers/db.js'
import { freshPgDb, pgConnectionOf, type PostgresJsMajor, type TestPgDb } from '../helpers/pg.js'
import { freshPglite } from '../helpers/pglite.js'
import { freshLibsql } from '../helpers/libsql.js'
import { connectionOf } from '../../src/dialect/open.js'

import { newJob, NOW } from '../pg/jobs.js'

export { claim, done, endOne, flush, newJob, NOW, request, retried, WORKER_HOST_AND_PID, workerLease } from '../pg/jobs.js'

/** A driver the suite runs on: the name its tests carry (`JOB-16 [postgres.js 4] …`), and its opener. */
export interface SuiteDriver {
  readonly name: string
  /** Opens a fresh migrated database on the driver: the test's DriverDb, and its close (or drop). */
  readonly open: () => Promise<OpenedDb>
}

/** A test's database on one driver, open. */
export interface OpenedDb {
  readonly db: DriverDb
  close(): Promise<void>
}

/**
 * Every driver the suite runs on, one line each: the suite runs each test once per line, in a block named by it. A
 * driver added to src/dialect/ adds its line here, with its opener beside the others (or in a file of its own).
 */
export const DRIVERS: readonly SuiteDriver[] = [
  { name: 'sqlite', open: openBetterSqlite3 },
  { name: 'libsql', open: openLibsql },
  { name: 'postgres', open: openNodePostgres },
  { name: 'postgres.js', open: () => openPostgresJs('postgres.js') },
  { name: 'postgres.js 4', open: () => openPostgresJs('postgres.js 4') },
  { name: 'pglite', open: openPglite },
]

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

/** How a test writes a value of the dialect's types in plain SQL. */
interface PlainSql {
  /** A time column as ms since the epoch, in SQL. */
  ms(column: string): string
  /** A parameter of ms since the epoch as the dialect stores a time, in SQL. */
  time(param: string): string
  /** A flag (a column such as `abandoned`) as the dialect stores it, in SQL. */
  flag(value: boolean): string
}

/** One test's database on one driver. */
export interface DriverDb extends PlainSql {
  /** The engine's connection through the driver under test. */
  readonly connection: Connection
  readonly executor: Executor
  /** Reads rows with plain SQL, `$1`, `$2`… in order for parameters on both dialects (on PostgreSQL through node-postgres). */
  rows<T = Record<string, unknown>>(sql: string, ...params: unknown[]): Promise<T[]>
  /** The job `seq` as stored. */
  job(seq: number): Promise<StoredJob>
  /** The workers' rows, by owner. */
  workers(): Promise<StoredWorker[]>
  /** The ids of the jobs that name a worker, with it: `id:owner`, by id. */
  owned(): Promise<string[]>
  /** Another connection to the same database, as another process would hold: its commits are another's. */
  other(): Connection
  /** Where the database notifies (Executor.notifies), the payloads of the notices on drizzle_jobs heard from now on, through a client of its own. */
  listen(): Promise<{ heard: string[]; stop(): void }>
}

/** JSON as stored: text on SQLite, parsed by node-postgres from jsonb. */
export function json(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value
}

/** SQLite's words: times are ms already, flags 0 and 1. */
const SQLITE_SQL: PlainSql = {
  ms: (column) => column,
  time: (param) => param,
  flag: (value) => (value ? '1' : '0'),
}

/** PostgreSQL's: times are timestamptz, flags booleans. */
const PG_SQL: PlainSql = {
  ms: (column) => `(extract(epoch from ${column}) * 1000)::float8`,
  time: (param) => `to_timestamp(${param}::float8 / 1000)`,
  flag: (value) => (value ? 'true' : 'false'),
}

/** SQLite's `listen`: the database notifies no one (Executor.notifies is false). */
const NO_NOTICES = () => Promise.reject(new Error('SQLite tells other processes nothing: they poll its data version'))

async function openBetterSqlite3(): Promise<OpenedDb> {
  const t = freshDb()
  const rows = async <T>(sql: string, ...params: unknown[]) => {
    const statement = t.client.prepare(sql.replace(/\$\d+/g, '?'))
    if (statement.reader) return statement.all(...params) as T[]
    statement.run(...params)
    return [] as T[]
  }
  const db = common(connectionOf(t.db), rows, {
    ...SQLITE_SQL,
    other: () => connectionOf(t.reopen().db),
    listen: NO_NOTICES,
  })
  return { db, close: async () => t.close() }
}

async function openLibsql(): Promise<OpenedDb> {
  const t = await freshLibsql()
  const db = common(connectionOf(t.db), (sql, ...params) => t.query(sql, ...params), {
    ...SQLITE_SQL,
    other: () => connectionOf(t.reopen().db),
    listen: NO_NOTICES,
  })
  return { db, close: async () => t.close() }
}

async function openNodePostgres(): Promise<OpenedDb> {
  const t = await freshPgDb()
  return { db: postgresDb(t, t.db), close: () => t.drop() }
}

async function openPostgresJs(major: PostgresJsMajor): Promise<OpenedDb> {
  const t = await freshPgDb()
  return { db: postgresDb(t, t.postgresJs(major).db), close: () => t.drop() }
}

/** A database on the run's PostgreSQL server, the engine's connection on `handle`; rows read through node-postgres. */
function postgresDb(t: TestPgDb, handle: unknown): DriverDb {
  return common(pgConnectionOf(handle), async (sql, ...params) => (await t.pool.query(sql, params)).rows, {
    ...PG_SQL,
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

async function openPglite(): Promise<OpenedDb> {
  const t = await freshPglite()
  const db = common(pgConnectionOf(t.db), (sql, ...params) => t.query(sql, ...params), {
    ...PG_SQL,
    other: () => {
      throw new Error('PGlite serves one process: no other connection holds its database')
    },
    async listen() {
      const heard: string[] = []
      const stop = await t.client.listen('drizzle_jobs', (payload) => heard.push(payload))
      return { heard, stop: () => void stop() }
    },
  })
  return { db, close: () => t.close() }
}

/** A test's DriverDb: the engine's connection, plain SQL through `rows`, and the reads every driver words alike. */
function common(connection: Connection, rows: DriverDb['rows'], parts: PlainSql & Pick<DriverDb, 'other' | 'listen'>): DriverDb {
  const { ms } = parts
  return {
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
 * Gives each test of a block of the suite a fresh migrated database on `driver`, its connection ready
 * for writes (the counting triggers installed, as a worker's start installs them), dropped after the test.
 */
export function eachDriverDb(driver: SuiteDriver): DriverDb {
  let current: OpenedDb | undefined
  beforeEach(async () => {
    current = await driver.open()
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
    get connection() {
      return now().connection
    },
    get executor() {
      return now().executor
    },
    rows: (sql, ...params) => now().rows(sql, ...params),
    ms: (column) => now().ms(column),
    time: (param) => now().time(param),
    flag: (value) => now().flag(value),
    job: (seq) => now().job(seq),
    workers: () => now().workers(),
    owned: () => now().owned(),
    other: () => now().other(),
    listen: () => now().listen(),
  }
}

/**
 * The database's own clock, in ms, as the executor states it, or null where the database keeps none: where it keeps
 * one, a flush reads a rate's log by it (ClaimLimits.rateNow) and a waiting job's snapshot in a queue with a rate
 * gives it (SnapshotRate.rateNow), which is how this asks; where it keeps none, the worker's clock serves
 * (FlushRequest.clock). Asked in a transaction rolled back: it leaves nothing.
 */
export async function databaseClock(c: Connection): Promise<number | null> {
  const queue = 'clock-probe'
  const rollback = new Error('rolled back')
  let clock: number | null | undefined
  try {
    await c.write(function* (tx) {
      yield* ask(tx.queueSetLimits({ queue, total: null, perGroup: null, now: NOW, rateLimit: 1, ratePer: 1_000, ratePerGroup: null }))
      yield* ask(tx.jobInsert(newJob(queue, 'probe')))
      clock = (yield* ask(tx.jobGetSnapshot(queue, 'probe')))?.rateNow
      throw rollback
    })
  } catch (error) {
    if (error !== rollback) throw error
  }
  if (clock === undefined) throw new Error('the probe job was not read back')
  return clock
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
