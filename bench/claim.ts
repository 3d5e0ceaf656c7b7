/**
 * What a claim of 16 jobs costs under each of a queue's policies, on both dialects: no limit, a concurrency, a
 * cap per group, and a rate with a cap per group. The limits are set far above what the claims take, so that
 * every claim takes its 16 jobs and what is measured is the policy's work, not its holding back.
 *
 *   npx tsx bench/claim.ts [sqlite|postgres|all]
 *
 * SQLite: a fresh file in the temp folder, WAL and synchronous NORMAL. PostgreSQL: DATABASE_URL's server
 * (default postgres://postgres@127.0.0.1:5432/postgres), in a database of its own, dropped at the end. Each claim
 * runs in a write transaction of its own, as a flush's claim does (Executor.jobFlush with the engine's plan). The jobs are in 64
 * groups, taken in turn; after each claim, outside the timing, its jobs are ended with plain SQL and a rated
 * queue's log is emptied, so every claim meets the same queue. Medians of ROUNDS claims, in µs.
 */
import { defineQueue, enqueueMany, type PgDatabase, type Queue, type QueueOptions, type SyncDatabase } from '../src/index.js'
import { connectionOf } from '../src/dialect/open.js'
import { ask } from '../src/dialect/index.js'
import { claimPlanner } from '../src/engine/claim.js'
import { storeLimits } from '../src/engine/queue-limits.js'
import { withPgDatabase } from './lib/pg-database.js'
import { withSqliteDatabase } from './lib/sqlite-database.js'

const what = process.argv[2] ?? 'all'
const ROUNDS = 300
const BATCH = 16
const GROUPS = 64
const FAR = 1_000_000

/** The policies measured, by name. */
const POLICIES: Record<string, QueueOptions> = {
  'no limit': {},
  concurrency: { concurrency: FAR },
  'cap per group': { concurrency: { total: FAR, perGroup: 1 } },
  'rate with a cap per group': { rate: { limit: FAR, per: '1h', perGroup: FAR } },
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

type Run = (sql: string, ...params: unknown[]) => Promise<void>

/** Medians of ROUNDS claims of BATCH jobs under each policy, in µs. */
async function measure(db: SyncDatabase | PgDatabase, run: Run): Promise<Map<string, number>> {
  const connection = connectionOf(db as SyncDatabase)
  const results = new Map<string, number>()
  for (const [policy, options] of Object.entries(POLICIES)) {
    const name = `bench-${policy.replaceAll(' ', '-')}`
    const queue: Queue = defineQueue(name, options)
    await connection.write((db) => storeLimits(db, queue, Date.now()))
    await enqueueMany(
      db as SyncDatabase,
      queue,
      Array.from({ length: ROUNDS * BATCH }, (_, n) => ({ value: { n }, group: `g${n % GROUPS}` })),
    )
    const times: number[] = []
    for (let round = 0; round < ROUNDS; round++) {
      const request = { limit: BATCH, idle: true, owner: 'bench', now: Date.now(), renewLease: null, clock: Date.now }
      const started = performance.now()
      const planner = claimPlanner(name, request)
      const { claimed } = await connection.write((db) =>
        ask(db.jobFlush({ queue: name, owner: 'bench', now: request.now, clock: Date.now, ends: [], claim: planner })),
      )
      times.push((performance.now() - started) * 1_000)
      if (claimed.length !== BATCH) throw new Error(`a claim under ${policy} took ${claimed.length} jobs, not ${BATCH}`)
      await run(`update jobs_job set state = 'done', owner = null where queue = $1 and state = 'running'`, name)
      await run(`update jobs_queue set rate_starts = null where name = $1`, name)
    }
    results.set(policy, median(times))
  }
  return results
}

async function onSqlite(): Promise<Map<string, number>> {
  return withSqliteDatabase((client, db) =>
    measure(db, async (sql, ...params) => void client.prepare(sql.replace(/\$\d+/g, '?')).run(...params)),
  )
}

async function onPostgres(): Promise<Map<string, number>> {
  return withPgDatabase(4, (pool, db) => measure(db, async (sql, ...params) => void (await pool.query(sql, params))))
}

function report(dialect: string, results: Map<string, number>): void {
  console.log(`${dialect}: claim of ${BATCH} jobs, median of ${ROUNDS}`)
  for (const [policy, us] of results) console.log(`  ${policy.padEnd(28)} ${Math.round(us)} µs`)
}

if (what === 'sqlite' || what === 'all') report('sqlite', await onSqlite())
if (what === 'postgres' || what === 'all') report('postgres', await onPostgres())
