/**
 * A lock held on a limited queue's jobs_queue row for longer than the workers' lease (an app's
 * `select … for update`, a long migration): the workers' flushes wait behind it, but their lease renewals must
 * not, so no lease is lost, no run is aborted and no job runs twice (JOB-05, JOB-16). On both drivers.
 */
import { afterEach, describe, expect, test } from 'vitest'
import { defineQueue, enqueueMany, getJob, work, type PgDatabase, type Worker } from '../../src/index.js'
import { eachFreshPgDb } from '../helpers/pg.js'
import { waitFor } from '../helpers/wait.js'

const t = eachFreshPgDb()
const workers: Worker[] = []
afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
})

/** A limited queue: every claim takes its row's lock, so a flush with a claim in it waits while the app holds the row. */
const held = defineQueue<{ ms: number }>('held', { concurrency: 8, attempts: 5, backoff: { initial: '10ms', max: '10ms' } })
const LEASE_MS = 1_000
const LOCK_MS = 4_000
const JOBS = 24

describe.each(['pg', 'postgres.js'] as const)('%s', (driver) => {
  test(`JOB-16 [postgres] ${driver}: the queue's row locked by the app for ${LOCK_MS / 1_000} s, four times the lease: no lease is lost and no job runs twice`, async () => {
    const db: PgDatabase = driver === 'pg' ? t.db : t.postgresJs().db
    const runs = new Map<string, number>()
    const lost: string[] = []
    const errors: unknown[] = []
    let started = 0
    const handler = async ({ ms }: { ms: number }, run: { id: string; signal: AbortSignal }) => {
      started++
      runs.set(run.id, (runs.get(run.id) ?? 0) + 1)
      // Runs longer than the lease, ending at staggered times, some of them while the row is locked.
      await new Promise((resolve) => setTimeout(resolve, ms))
      if (run.signal.aborted) lost.push(`${run.id}: ${String((run.signal.reason as Error)?.message)}`)
    }
    await enqueueMany(
      db,
      held,
      Array.from({ length: JOBS }, (_, i) => ({ id: `job-${i}`, value: { ms: 1_500 + (i % 8) * 150 } })),
    )
    for (let i = 0; i < 2; i++)
      workers.push(work(db, held, handler, { slots: 4, lease: LEASE_MS, pollInterval: '20ms', onError: (error) => errors.push(error) }))
    await waitFor(() => started >= 8, 'runs to be under way in both workers', 10_000)

    const app = await t.pool.connect()
    try {
      await app.query('begin')
      await app.query(`select * from jobs_queue where name = 'held' for update`)
      await new Promise((resolve) => setTimeout(resolve, LOCK_MS))
      await app.query('commit')
    } finally {
      app.release()
    }

    const deadline = performance.now() + 30_000
    for (;;) {
      const jobs = await Promise.all(Array.from({ length: JOBS }, (_, i) => getJob(db, held, `job-${i}`)))
      if (jobs.every((job) => job?.state === 'done')) {
        expect(jobs.map((job) => job!.attempt)).toEqual(Array.from({ length: JOBS }, () => 1))
        break
      }
      if (performance.now() > deadline)
        throw new Error(
          `timed out waiting for every job to be done: ${JSON.stringify(jobs.map((job) => [job?.id, job?.state, job?.attempt]))}`,
        )
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    expect(lost).toEqual([])
    expect([...runs.values()].every((n) => n === 1)).toBe(true)
    expect(runs.size).toBe(JOBS)
    expect(errors).toEqual([])
  }, 60_000)
})
