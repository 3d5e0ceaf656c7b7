/**
 * The first start on a database that drizzle-kit has just migrated, where no writer has installed the counting
 * triggers yet (src/dialect/pg/counts.ts): workers start, and the app's first adds run inside its own transactions.
 * Whoever installs, no app transaction may fail (JOB-02): the engine cannot try the app's transaction again, so it
 * must take no lock in an order that deadlocks with an add.
 * - All at once, many rounds: before the install let its lock go on finding the triggers there, an app's
 *   transaction that found them installed by a worker kept jobs_job's lock until it ended, and waited for the
 *   worker's uncommitted jobs_queue row while that worker's claim waited for the lock (`deadlock detected` in most
 *   rounds on node-postgres).
 * - The app's transaction holding its queue's row: before the install stopped rewriting the queues' rows, it waited
 *   for that row while holding jobs_job's lock, which the app's add then waited for.
 */
import { sql } from 'drizzle-orm'
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres'
import type { PgDatabase as DrizzlePgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js'
import pg from 'pg'
import { describe, expect, test } from 'vitest'
import { defineQueue, enqueue, work, type Queue, type Worker } from '../../src/index.js'
import { freshPgDb, openPostgresJs, POSTGRES_JS, type TestPgDb } from '../helpers/pg.js'
import { waitFor } from '../helpers/wait.js'

/** Rounds per driver: each a database of its own, just migrated. */
const ROUNDS = 12
/** Queues per round, each with a worker, and as many app transactions, one adding to each queue. */
const QUEUES = 6

const DRIVERS = ['pg', ...POSTGRES_JS] as const
type Driver = (typeof DRIVERS)[number]

/** A handle on the database as a part of the app would open it, with a pool of 10 connections, and its end. */
function openHandle(driver: Driver, url: string): { db: DrizzlePgDatabase<PgQueryResultHKT>; close: () => Promise<void> } {
  if (driver === 'pg') {
    const pool = new pg.Pool({ connectionString: url, max: 10 })
    pool.on('error', () => {})
    return { db: drizzlePg({ client: pool }), close: () => pool.end() }
  }
  const client = openPostgresJs(driver, url, { max: 10 })
  return { db: drizzlePostgresJs(client), close: () => client.end({ timeout: 0 }) }
}

/** The triggers the engine installs: none on a database that only drizzle-kit has touched. */
async function engineTriggers(fresh: TestPgDb): Promise<number> {
  return (await fresh.pool.query(`select count(*)::int as n from pg_trigger where tgname like 'jobs\\_%'`)).rows[0].n
}

/**
 * One round: the app's handle and another process's (a second handle, so a second installer), a worker of each
 * queue on the app's handle and one more of the first queue on the other, and the app's transactions, half of them
 * writing a row of their own before they add, all started in one turn. Answers the app's failures and the workers'
 * errors.
 */
async function firstStart(driver: Driver, fresh: TestPgDb): Promise<{ failed: string[]; workerErrors: string[] }> {
  await fresh.pool.query('create table messages (id serial primary key, text text not null)')
  const app = openHandle(driver, fresh.url)
  const other = openHandle(driver, fresh.url)
  const workerErrors: string[] = []
  const onError = (error: unknown) => void workerErrors.push(String(error))
  // Half the queues limited: their claims lock the queue's row.
  const queues: Queue<{ n: number }>[] = Array.from({ length: QUEUES }, (_, i) =>
    defineQueue<{ n: number }>(`first-${i}`, i % 2 === 1 ? { concurrency: 2 } : {}),
  )
  try {
    const workers = queues.map((queue) => work(app.db, queue, () => 'ran', { onError, pollInterval: '20ms' }))
    workers.push(work(other.db, queues[0]!, () => 'ran', { onError, pollInterval: '20ms' }))
    const adds = await Promise.allSettled(
      queues.map((queue, n) =>
        app.db.transaction(async (tx) => {
          if (n % 2 === 0) await tx.execute(sql`insert into messages (text) values (${`message ${n}`})`)
          await enqueue(tx, queue, { n }, { id: `first:${n}` })
        }),
      ),
    )
    const failed = adds.flatMap((add) => (add.status === 'rejected' ? [String((add.reason as Error)?.cause ?? add.reason)] : []))
    if (failed.length === 0) {
      await waitFor(
        async () => (await fresh.pool.query(`select count(*)::int as n from jobs_job where state = 'done'`)).rows[0].n === QUEUES,
        'every job added to be done',
      )
    }
    await Promise.all(workers.map((worker) => worker.stop({ timeout: 1_000 })))
    return { failed, workerErrors }
  } finally {
    await Promise.all([app.close(), other.close()])
  }
}

describe.each(DRIVERS)('%s', (driver) => {
  test(`JOB-02 [postgres] ${driver}: workers and the app's first adds started together on a freshly migrated database never fail the app's transaction`, {
    timeout: 60_000,
  }, async () => {
    const failures: string[] = []
    for (let round = 0; round < ROUNDS; round++) {
      const fresh = await freshPgDb()
      try {
        expect(await engineTriggers(fresh), 'a database only drizzle-kit has migrated').toBe(0)
        const { failed, workerErrors } = await firstStart(driver, fresh)
        failures.push(...failed.map((failure) => `round ${round}: the app's transaction failed: ${failure}`))
        failures.push(...workerErrors.map((error) => `round ${round}: a worker's onError: ${error}`))
        expect(await engineTriggers(fresh), 'the triggers installed once').toBe(5)
      } finally {
        await fresh.drop()
      }
    }
    expect(failures).toEqual([])
  })

  test(`JOB-02 [postgres] ${driver}: the app's transaction holds its queue's row (\`for update\`) while a worker's first start installs the triggers, then adds: the add is not failed`, async () => {
    const fresh = await freshPgDb()
    const app = openHandle(driver, fresh.url)
    const queue = defineQueue<{ n: number }>('held')
    const workerErrors: string[] = []
    let worker: Worker | undefined
    try {
      // The queue's row, as another program or an operator's plain SQL made it before any writer of the engine.
      await fresh.pool.query(`insert into jobs_queue (name) values ('held')`)
      let rowHeld!: () => void
      const holding = new Promise<void>((resolve) => (rowHeld = resolve))
      let add!: () => void
      const adding = new Promise<void>((resolve) => (add = resolve))
      const transaction = app.db.transaction(async (tx) => {
        await tx.execute(sql`select * from jobs_queue where name = 'held' for update`)
        rowHeld()
        await adding
        await enqueue(tx, queue, { n: 1 }, { id: 'held:1' })
      })
      await holding
      worker = work(app.db, queue, () => 'ran', { onError: (error) => void workerErrors.push(String(error)), pollInterval: '20ms' })
      // The install either committed, or waits for a lock (the row, where it rewrote the queues' rows): the add comes
      // once the server's deadlock check of that wait has passed, as an add later in the app's transaction would.
      await waitFor(
        async () =>
          (await engineTriggers(fresh)) === 5 ||
          (
            await fresh.pool.query(
              `select 1 from pg_locks where not granted and database = (select oid from pg_database where datname = current_database())`,
            )
          ).rowCount,
        "the worker's install to commit or wait",
      )
      const { deadlockMs } = (
        await fresh.pool.query(`select extract(epoch from current_setting('deadlock_timeout')::interval) * 1000 as "deadlockMs"`)
      ).rows[0]
      await new Promise((resolve) => setTimeout(resolve, Number(deadlockMs) + 200))
      add()
      await expect(transaction).resolves.toBeUndefined()
      await waitFor(
        async () => (await fresh.pool.query(`select state from jobs_job where id = 'held:1'`)).rows[0]?.state === 'done',
        'the job to run',
      )
      await worker.stop({ timeout: 1_000 })
      expect(workerErrors).toEqual([])
    } finally {
      await worker?.stop({ timeout: 1_000 })
      await app.close()
      await fresh.drop()
    }
  })
})
