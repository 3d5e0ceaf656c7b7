/**
 * What a queue's rate (JOB-22) costs per claim: the claim a worker's flush makes, of 16 jobs, on a queue
 * with no rate and on rated queues whose log of recent starts holds 60, 1,000 and 10,000 starts, on both
 * dialects.
 *
 *   npx tsx bench/rate.ts [sqlite|postgres|all]
 *
 * SQLite: a fresh file in the temp folder, WAL and synchronous NORMAL. PostgreSQL: DATABASE_URL's server
 * (default postgres://postgres@127.0.0.1:5432/postgres), in a database of its own, dropped at the end.
 * Each claim runs in a write transaction of its own, as a flush's claim does (Executor.jobFlush with the engine's plan);
 * before each claim of a rated queue its log is put back to the size measured (outside the timing), so every
 * claim reads, grows and writes a log of that size. Medians of ROUNDS claims, in µs.
 */
import { defineQueue, enqueueMany, type PgDatabase, type Queue, type SyncDatabase } from '../src/index.js'
import { connectionOf } from '../src/dialect/open.js'
import { ask } from '../src/dialect/index.js'
import { claimPlanner, type ClaimReport } from '../src/engine/claim.js'
import { storeLimits } from '../src/engine/queue-limits.js'
import { withPgDatabase } from './lib/pg-database.js'
import { withSqliteDatabase } from './lib/sqlite-database.js'

const what = process.argv[2] ?? 'all'
const ROUNDS = 300
const BATCH = 16
/** The logs measured: none (no rate), then rated queues whose log holds this many starts. */
const LOGS = [null, 60, 1_000, 10_000] as const

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

type Run = (sql: string, ...params: unknown[]) => Promise<void>

/** Medians of ROUNDS claims of BATCH jobs for each log size, in µs. */
async function measure(db: SyncDatabase | PgDatabase, run: Run): Promise<Map<number | null, number>> {
  const connection = connectionOf(db as SyncDatabase)
  const results = new Map<number | null, number>()
  for (const size of LOGS) {
    const name = `bench-${size ?? 'none'}`
    // A limit far above the log, so that every claim takes its 16 jobs, and a window no claim outlasts.
    const queue: Queue = defineQueue(name, size === null ? {} : { rate: { limit: size + 1_000_000, per: '1h' } })
    await connection.write((db) => storeLimits(db, queue, Date.now()))
    await enqueueMany(
      db as SyncDatabase,
      queue,
      Array.from({ length: ROUNDS * BATCH }, (_, n) => ({ value: { n } })),
    )
    const now = Date.now()
    const log = size === null ? null : JSON.stringify({ starts: Array.from({ length: size }, (_, i) => now - size + i), groups: {} })
    const times: number[] = []
    for (let round = 0; round < ROUNDS; round++) {
      if (log !== null) await run('update jobs_queue set rate_starts = $1 where name = $2', log, name)
      const hold: ClaimReport = { waitMs: null }
      const request = { limit: BATCH, idle: true, owner: 'bench', now: Date.now(), renewLease: null, clock: Date.now }
      const started = performance.now()
      const planner = claimPlanner(name, request, hold)
      const { claimed } = await connection.write((db) =>
        ask(db.jobFlush({ queue: name, owner: 'bench', now: request.now, clock: Date.now, ends: [], claim: planner })),
      )
      times.push((performance.now() - started) * 1_000)
      if (claimed.length !== BATCH) throw new Error(`a claim took ${claimed.length} jobs, not ${BATCH}`)
    }
    results.set(size, median(times))
  }
  return results
}

async function onSqlite(): Promise<Map<number | null, number>> {
  return withSqliteDatabase((client, db) =>
    measure(db, async (sql, ...params) => void client.prepare(sql.replace(/\$\d+/g, '?')).run(...params)),
  )
}

async function onPostgres(): Promise<Map<number | null, number>> {
  return withPgDatabase(4, (pool, db) => measure(db, async (sql, ...params) => void (await pool.query(sql, params))))
}

function report(dialect: string, results: Map<number | null, number>): void {
  const base = results.get(null)!
  console.log(`${dialect}: claim of ${BATCH} jobs, median of ${ROUNDS}`)
  for (const [size, us] of results) {
    const label = size === null ? 'no rate' : `rate, ${size.toLocaleString('en')} starts in the log`
    const extra = size === null ? '' : ` (+${Math.round(us - base)} µs)`
    console.log(`  ${label.padEnd(36)} ${Math.round(us)} µs${extra}`)
  }
}

if (what === 'sqlite' || what === 'all') report('sqlite', await onSqlite())
if (what === 'postgres' || what === 'all') report('postgres', await onPostgres())
