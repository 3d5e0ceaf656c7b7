/**
 * What a worker's schedule pass costs (JOB-21), on SQLite and PostgreSQL:
 *
 *   npx tsx bench/schedule-pass.ts
 *
 * - nothing due: the pass every worker makes on each maintenance tick (once a second) and on its timer,
 *   with 10 schedules on the queue, none due: one read of the earliest next slot.
 * - one slot due: the pass that adds one slot's job: the read, the due schedule's row, one write
 *   transaction (the compare-and-set on next_at, the job's insert, its count), and the read that arms the
 *   timer. Between rounds, untimed, the schedule is made due again and the job it added is deleted.
 *
 * SQLite: a file in a temporary folder, migrated as a user would. PostgreSQL: DATABASE_URL's server
 * (default postgres://postgres@127.0.0.1:5432/postgres), in a database of its own, dropped at the end.
 * Prints the median and the 90th percentile of each, in µs.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import Database from 'better-sqlite3'
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3'
import { migrate as migrateSqlite } from 'drizzle-orm/better-sqlite3/migrator'
import { defineQueue, schedule, type PgDatabase, type SyncDatabase } from '../src/index.js'
import { connectionOf } from '../src/dialect/open.js'
import { runSchedulePass } from '../src/engine/schedules.js'
import { withPgDatabase } from './lib/pg-database.js'
import { median, quantile } from './lib/stats.js'

const ROUNDS = 2_000
const WARM_UP = 200
const queue = defineQueue('digests')

type Results = Record<'nothing due' | 'one slot due', number[]>

async function measure(db: SyncDatabase | PgDatabase, makeDue: () => Promise<void>): Promise<Results> {
  const connection = connectionOf(db)
  for (let i = 0; i < 10; i++) await schedule(db, queue, `daily-${i}`, { cron: `0 ${i} * * *`, value: { i } })
  const results: Results = { 'nothing due': [], 'one slot due': [] }
  for (let round = 0; round < WARM_UP + ROUNDS; round++) {
    const start = process.hrtime.bigint()
    const idle = await runSchedulePass(connection, queue, Date.now())
    const idleUs = Number(process.hrtime.bigint() - start) / 1_000
    if (idle.added.length !== 0) throw new Error('a slot was due where none should be')
    await makeDue()
    const dueStart = process.hrtime.bigint()
    const busy = await runSchedulePass(connection, queue, Date.now())
    const dueUs = Number(process.hrtime.bigint() - dueStart) / 1_000
    if (busy.added.length !== 1) throw new Error(`expected one job added, got ${busy.added.length}`)
    if (round >= WARM_UP) {
      results['nothing due'].push(idleUs)
      results['one slot due'].push(dueUs)
    }
  }
  return results
}

/** Makes the schedule daily-0 due at a slot whose job is not there yet: a minute before now, a new minute each round. */
let slot = Math.floor(Date.now() / 60_000) * 60_000 - 365 * 24 * 3_600_000

async function sqlite(): Promise<Results> {
  const dir = mkdtempSync(join(tmpdir(), 'drizzle-jobs-bench-'))
  const client = new Database(join(dir, 'bench.db'))
  client.pragma('journal_mode = WAL')
  const db = drizzleSqlite(client)
  migrateSqlite(db, { migrationsFolder: resolve(import.meta.dirname, '../drizzle') })
  const makeDue = client.prepare(`update jobs_schedule set next_at = ?, cron = '* * * * *' where queue = 'digests' and name = 'daily-0'`)
  const deleteJobs = client.prepare(`delete from jobs_job where queue = 'digests'`)
  try {
    return await measure(db, async () => {
      deleteJobs.run()
      makeDue.run((slot += 60_000))
    })
  } finally {
    client.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

async function postgres(): Promise<Results> {
  return withPgDatabase(4, (pool, db) =>
    measure(db, async () => {
      await pool.query(`delete from jobs_job where queue = 'digests'`)
      await pool.query(
        `update jobs_schedule set next_at = to_timestamp($1::float8 / 1000), cron = '* * * * *' where queue = 'digests' and name = 'daily-0'`,
        [(slot += 60_000)],
      )
    }),
  )
}

const format = (values: number[]) => `median ${median(values).toFixed(1)} µs, p90 ${quantile(values, 0.9).toFixed(1)} µs`
for (const [dialect, run] of [
  ['SQLite', sqlite],
  ['PostgreSQL', postgres],
] as const) {
  const results = await run()
  for (const [what, values] of Object.entries(results))
    console.log(`${dialect.padEnd(10)} ${what.padEnd(12)} ${format(values)} (${values.length} passes)`)
}
