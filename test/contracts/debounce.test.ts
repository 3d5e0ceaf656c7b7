/**
 * JOB-26, debounce, once per database (JOB-20): while the job of a debounce id has not started, a later add gives it
 * its value and moves its run to `delay` after that add; once it has started, a later add queues the next job. A
 * burst of 100 adds runs once, with the last value; on a PostgreSQL server, 100 adds in ten transactions racing on ten
 * connections add one job, through the upsert on the partial unique index jobs_job_debounce.
 */
import { describe, expect, test } from 'vitest'
import { defineQueue, enqueue, enqueueMany, getJob, isJobsError, queueCounts, work, type Enqueued } from '../../src/index.js'
import { CONTRACT_DATABASES, CONTRACT_TEST_MS, eachContractDb } from '../helpers/dialects.js'
import { waitFor } from '../helpers/wait.js'

/** How long after the last add a debounced job runs: longer than any gap between two adds of a burst on a loaded machine. */
const DELAY_MS = 5_000

describe.each(CONTRACT_DATABASES)('%s', { timeout: CONTRACT_TEST_MS }, (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`

  test(`JOB-26 ${on} a burst of 100 debounced adds runs once, with the last value, delay after the last add; a later add queues the next job`, async () => {
    const saves = defineQueue<{ n: number }>('saves')
    const runs: { n: number; at: number }[] = []
    workers.push(work(t.db, saves, (value) => void runs.push({ n: value.n, at: Date.now() }), { pollInterval: '50ms' }))
    const debounce = { id: 'doc:1', delay: DELAY_MS }
    const answers: Enqueued[] = []
    let lastAdd = 0
    for (let n = 1; n <= 100; n++) {
      lastAdd = Date.now()
      answers.push(await enqueue(t.db, saves, { n }, { debounce }))
    }
    const [first, ...rest] = answers
    expect(first).toMatchObject({ added: true })
    expect(rest).toEqual(Array.from({ length: 99 }, () => ({ id: first!.id, added: false, matched: 'debounce' })))
    expect(await t.count('jobs_job')).toBe(1)
    expect(await getJob(t.db, saves, first!.id)).toMatchObject({ state: 'scheduled' })
    await waitFor(() => runs.length > 0, 'the run', DELAY_MS + 20_000)
    await waitFor(async () => (await getJob(t.db, saves, first!.id))?.state === 'done', 'the job to be done')
    expect(runs.map((run) => run.n)).toEqual([100])
    expect(runs[0]!.at).toBeGreaterThanOrEqual(lastAdd + DELAY_MS)
    // Started, the job takes no more adds: the next is a job of its own.
    const next = await enqueue(t.db, saves, { n: 101 }, { debounce: { id: 'doc:1', delay: 0 } })
    expect(next).toMatchObject({ added: true })
    expect(next.id).not.toBe(first!.id)
    await waitFor(async () => (await getJob(t.db, saves, next.id))?.state === 'done', 'the next job to be done')
    expect(runs.map((run) => run.n)).toEqual([100, 101])
    expect(await queueCounts(t.db, saves)).toMatchObject({ waiting: 0, scheduled: 0, done: 2 })
  })

  test(`JOB-26 ${on} an add into a waiting job makes it wait again; enqueueMany merges within the batch; the options it refuses write nothing`, async () => {
    const q = defineQueue<{ n: number }>('merged', { unique: { key: 'unique-queue' } })
    const [a, b, c] = await enqueueMany(t.db, q, [
      { value: { n: 1 }, debounce: { id: 'x', delay: 0 }, unique: false },
      { value: { n: 2 }, debounce: { id: 'x', delay: '1h' }, unique: false },
      { value: { n: 3 }, debounce: { id: 'y', delay: 0 }, unique: false },
    ])
    expect(a).toMatchObject({ added: true })
    expect(b).toEqual({ id: a!.id, added: false, matched: 'debounce' })
    expect(c).toMatchObject({ added: true })
    expect(await getJob(t.db, q, a!.id)).toMatchObject({ state: 'scheduled' })
    expect(await queueCounts(t.db, q)).toMatchObject({ waiting: 1, scheduled: 1 })
    const refused = async (options: object) => {
      let error: unknown
      try {
        await enqueue(t.db, q, { n: 9 }, options)
      } catch (caught) {
        error = caught
      }
      expect(isJobsError(error, 'INVALID_OPTION'), String(error)).toBe(true)
      return (error as Error).message
    }
    expect(await refused({ debounce: { id: 'x', delay: 0 } })).toMatch(/pass unique: false/)
    expect(await refused({ debounce: { id: 'x', delay: 0 }, unique: { key: 'k' } })).toMatch(/debounce and unique/)
    for (const option of [{ id: 'named' }, { delay: '1s' }, { runAt: Date.now() }])
      expect(await refused({ debounce: { id: 'x', delay: 0 }, unique: false, ...option })).toMatch(/^debounce and (id|delay|runAt)/)
    expect(await refused({ debounce: { id: 'x' }, unique: false })).toMatch(/debounce\.delay: required/)
    expect(await refused({ debounce: { id: '', delay: 0 }, unique: false })).toMatch(/debounce\.id/)
    expect(await t.count('jobs_job')).toBe(2)
  })

  if (dialect === 'postgres') {
    test(`JOB-26 ${on} 100 debounced adds in ten transactions racing on ten connections add one job, which runs once`, async () => {
      const saves = defineQueue<{ n: number }>('racing-saves')
      const inTransaction = t.inTransaction!
      let arrived = 0
      let go!: () => void
      const together = new Promise<void>((resolve) => (go = resolve))
      const answers = (
        await Promise.all(
          Array.from({ length: 10 }, (_, racer) =>
            inTransaction(async (tx, exec) => {
              await exec('select 1')
              if (++arrived === 10) go()
              await together
              const mine: Enqueued[] = []
              for (let i = 0; i < 10; i++) mine.push(await enqueue(tx, saves, { n: racer * 10 + i }, { debounce: { id: 'doc', delay: 0 } }))
              return mine
            }),
          ),
        )
      ).flat()
      const jobs = await t.query<{ id: string }>(`select id from jobs_job where queue = 'racing-saves'`)
      expect(jobs).toHaveLength(1)
      expect(answers.filter((answer) => answer.added)).toEqual([{ id: jobs[0]!.id, added: true }])
      expect(answers.filter((answer) => !answer.added)).toEqual(
        Array.from({ length: 99 }, () => ({ id: jobs[0]!.id, added: false, matched: 'debounce' })),
      )
      const runs: number[] = []
      workers.push(work(t.db, saves, (value) => void runs.push(value.n)))
      await waitFor(async () => (await getJob(t.db, saves, jobs[0]!.id))?.state === 'done', 'the job to be done')
      expect(runs).toHaveLength(1)
    })
  }
})
