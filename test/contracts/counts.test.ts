/**
 * JOB-18 for counts, once per dialect: every reading surface (queueCounts of one queue and of all, listJobs,
 * getJob, watch) answers what other programs wrote with plain SQL (inserts, updates, deletes, a queue that
 * has no row), before the workers fold the counts kept apart (PostgreSQL's jobs_count) and after.
 */
import { describe, expect, test } from 'vitest'
import { defineQueue, enqueueMany, getJob, listJobs, queueCounts, watch, work, type QueueCounts } from '../../src/index.js'
import { CONTRACT_DATABASES, CONTRACT_TEST_MS, eachContractDb } from '../helpers/dialects.js'
import { waitFor } from '../helpers/wait.js'

const STATES = ['waiting', 'scheduled', 'running', 'done', 'failed', 'canceled'] as const

describe.each(CONTRACT_DATABASES)('%s', { timeout: CONTRACT_TEST_MS }, (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`

  /** Adds a job as another program would, with plain SQL: a job due now, or scheduled an hour from now. */
  const insertPlain = (queue: string, id: string, state: 'waiting' | 'scheduled') => {
    const runAt = state === 'waiting' ? Date.now() - 1_000 : Date.now() + 3_600_000
    const at = t.dialect === 'postgres' ? 'to_timestamp($4::float8 / 1000)' : '$4'
    return t.run(`insert into jobs_job (queue, id, value, state, run_at) values ($1, $2, '{"n": 1}', $3, ${at})`, queue, id, state, runAt)
  }

  /** Ends a job as another program would: its state and when it ended. */
  const endPlain = (queue: string, id: string, state: 'canceled' | 'failed') =>
    t.run(
      `update jobs_job set state = $1, finished_at = ${t.dialect === 'postgres' ? 'now()' : `cast((julianday('now') - 2440587.5) * 86400000 as integer)`} where queue = $2 and id = $3`,
      state,
      queue,
      id,
    )

  /** The queue's jobs counted by state from the jobs themselves. */
  const truth = async (queue: string): Promise<Omit<QueueCounts, 'paused'>> => {
    const rows = await t.query<{ state: string; n: number | string }>(
      'select state, count(*) as n from jobs_job where queue = $1 group by state',
      queue,
    )
    const counts = { queue, waiting: 0, scheduled: 0, running: 0, done: 0, failed: 0, canceled: 0 }
    for (const row of rows) counts[row.state as (typeof STATES)[number]] = Number(row.n)
    return counts
  }

  const firstSnapshot = async (queue: string, id: string) => {
    for await (const snapshot of watch(t.db, queue, id)) return snapshot
    return undefined
  }

  /** Every surface against the jobs as stored. */
  const checkSurfaces = async (expected: Record<string, Partial<Record<(typeof STATES)[number], number>>>) => {
    const all = await queueCounts(t.db)
    for (const [queue, counts] of Object.entries(expected)) {
      const want = { queue, waiting: 0, scheduled: 0, running: 0, done: 0, failed: 0, canceled: 0, ...counts }
      expect(await truth(queue)).toEqual(want)
      expect(await queueCounts(t.db, queue)).toMatchObject(want)
      expect(all.find((row) => row.queue === queue)).toMatchObject(want)
      for (const state of STATES) {
        const page = await listJobs(t.db, { queue, state, limit: 1_000 })
        expect(page.jobs.length, `${queue}: listJobs of ${state}`).toBe(want[state])
        for (const job of page.jobs.slice(0, 3)) {
          expect((await getJob(t.db, queue, job.id))?.state).toBe(state)
          expect((await firstSnapshot(queue, job.id))?.state).toBe(state)
        }
      }
    }
  }

  test(`JOB-18 ${on} counts, listings and snapshots show other programs' plain-SQL inserts, updates and deletes, before and after folding`, async () => {
    const q = defineQueue<{ n: number }>('shared', { backoff: { initial: 0, max: 0 } })
    await enqueueMany(t.db, q, [
      { value: { n: 1 }, id: 'a1' },
      { value: { n: 2 }, id: 'a2' },
      { value: { n: 3 }, id: 'a3' },
    ])
    await insertPlain('shared', 'p1', 'waiting')
    await insertPlain('shared', 'p2', 'scheduled')
    await insertPlain('shared', 'p3', 'waiting')
    await endPlain('shared', 'a2', 'canceled')
    await t.run(`delete from jobs_job where queue = 'shared' and id = 'p3'`)
    await insertPlain('elsewhere', 'e1', 'waiting')
    await insertPlain('elsewhere', 'e2', 'scheduled')
    await endPlain('elsewhere', 'e2', 'failed')

    await checkSurfaces({ shared: { waiting: 3, scheduled: 1, canceled: 1 }, elsewhere: { waiting: 1, failed: 1 } })
    if (t.dialect === 'postgres')
      expect(Number((await t.query<{ n: string }>('select count(*) as n from jobs_count'))[0]!.n)).toBeGreaterThan(0)

    // A worker runs the waiting jobs; its maintenance folds the counts of its queue kept apart.
    workers.push(work(t.db, q, (value) => value.n * 2, { slots: 2 }))
    await waitFor(async () => (await truth('shared')).done === 3, 'the worker to run the three waiting jobs')
    if (t.dialect === 'postgres') {
      await waitFor(
        async () => Number((await t.query<{ n: string }>(`select count(*) as n from jobs_count where queue = 'shared'`))[0]!.n) === 0,
        "the worker's maintenance to fold the queue's counts",
      )
      expect(Number((await t.query<{ n: string }>(`select done as n from jobs_queue where name = 'shared'`))[0]!.n ?? NaN)).not.toBe(0)
    }
    await checkSurfaces({ shared: { scheduled: 1, done: 3, canceled: 1 }, elsewhere: { waiting: 1, failed: 1 } })

    // After the fold, plain SQL again: a deleted done job, a scheduled job canceled, a job added.
    await t.run(`delete from jobs_job where queue = 'shared' and id = 'a1'`)
    await endPlain('shared', 'p2', 'canceled')
    await insertPlain('shared', 'p4', 'scheduled')
    await checkSurfaces({ shared: { scheduled: 1, done: 2, canceled: 2 }, elsewhere: { waiting: 1, failed: 1 } })
  })
})
