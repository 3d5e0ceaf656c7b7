import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import {
  cancel,
  defineQueue,
  enqueue,
  inspectJob,
  isJobsError,
  listJobs,
  pauseQueue,
  prune,
  queueCounts,
  resumeQueue,
  retryJob,
  work,
  type JobState,
  type Worker,
} from '../src/index.js'
import { ADMIN_SQL } from '../src/dialect/sqlite/admin.js'
import { freshDb, removeTempDirs, type TestDb } from './helpers/db.js'
import { killChildren, startFixture } from './helpers/processes.js'
import { count, jobRow } from './helpers/rows.js'
import { waitFor } from './helpers/wait.js'

let t: TestDb
const workers: Worker[] = []
beforeEach(() => {
  t = freshDb()
})
afterEach(async () => {
  killChildren()
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
  t.close()
  removeTempDirs()
})

const q = defineQueue<{ n?: number; hold?: boolean }>('admin', { attempts: 1 })
const other = defineQueue<{ n?: number }>('other')
const state = (id: string) => jobRow(t.client, id)?.state

function expectCode(fn: () => unknown, code: string): void {
  try {
    fn()
  } catch (error) {
    expect(isJobsError(error) && error.code).toBe(code)
    return
  }
  throw new Error(`expected a JobsError ${code}`)
}

/** A worker whose runs wait for their signal, after keeping step 'one'; resolves each abort's reason. */
function holdingWorker(): { worker: Worker; aborted: Map<string, unknown>; finished: Set<string> } {
  const aborted = new Map<string, unknown>()
  const finished = new Set<string>()
  const worker = work(t.db, q, async (_value, run) => {
    await run.step('one', () => 'kept')
    await new Promise<void>((resolve) =>
      run.signal.addEventListener('abort', () => {
        aborted.set(run.id, run.signal.reason)
        resolve()
      }, { once: true }),
    )
    try {
      await run.step('two', () => 'after the cancel')
    } finally {
      finished.add(run.id)
    }
    return 'refused'
  })
  workers.push(worker)
  return { worker, aborted, finished }
}

describe('cancel', () => {
  test('a waiting or scheduled job ends canceled and never runs; an ended job is left as it was', async () => {
    enqueue(t.db, q, { n: 1 }, { id: 'waiting' })
    enqueue(t.db, q, { n: 2 }, { id: 'later', delay: '1h' })
    expect(cancel(t.db, q, 'waiting')).toBe(true)
    expect(cancel(t.db, 'admin', 'later')).toBe(true)
    expect(jobRow(t.client, 'waiting')).toMatchObject({ state: 'canceled', attempts: 0 })
    expect(jobRow(t.client, 'waiting')!.finished_at).toBeGreaterThan(Date.now() - 5_000)
    expect(state('later')).toBe('canceled')
    expect(cancel(t.db, q, 'waiting')).toBe(false)
    expect(queueCounts(t.db, q)).toMatchObject({ waiting: 0, scheduled: 0, canceled: 2 })

    enqueue(t.db, q, { n: 3 }, { id: 'after' })
    const ran: string[] = []
    workers.push(work(t.db, q, (_value, run) => void ran.push(run.id)))
    await waitFor(() => state('after') === 'done', 'the job added after to run')
    expect(ran).toEqual(['after'])
    expect(cancel(t.db, q, 'after')).toBe(false)
    expect(state('after')).toBe('done')
  })

  test('JOB-14 JOB-16 a running job in this process: its signal aborts at once, its steps and lease go, its outcome is refused', async () => {
    const { aborted, finished } = holdingWorker()
    enqueue(t.db, q, {}, { id: 'running' })
    await waitFor(() => count(t.client, 'jobs_step') === 1, 'the run to keep its first step')
    expect(cancel(t.db, q, 'running')).toBe(true)
    // The abort is synchronous with the cancel's commit in this process.
    expect(aborted.get('running')).toMatchObject({ code: 'LEASE_LOST', message: expect.stringContaining("job 'running' was canceled") })
    await waitFor(() => finished.has('running'), 'the handler to finish')
    await new Promise((resolve) => setImmediate(resolve))
    expect(jobRow(t.client, 'running')).toMatchObject({ state: 'canceled', result: null, attempts: 1 })
    expect(count(t.client, 'jobs_step')).toBe(0)
    expect(count(t.client, 'jobs_lease')).toBe(0)
    expect(queueCounts(t.db, q)).toMatchObject({ running: 0, canceled: 1 })
  })

  test('JOB-16 a running job in another process: its signal aborts within the poll interval, and its late result is refused', async () => {
    const child = startFixture('admin-child.ts', [t.file])
    await waitFor(() => child.output().includes('ready'), 'the worker process to start')
    enqueue(t.db, q, { hold: true }, { id: 'elsewhere' })
    await waitFor(() => child.output().includes('running elsewhere'), 'the other process to run the job')
    const canceledAt = Date.now()
    expect(cancel(t.db, q, 'elsewhere')).toBe(true)
    await waitFor(() => child.output().includes('aborted elsewhere LEASE_LOST'), 'the other process to abort the run')
    // Its poll interval is 20 ms; allow a loaded machine plenty of slack while still proving it was not a lease expiry (30 s).
    expect(Date.now() - canceledAt).toBeLessThan(5_000)
    // The child's handler returned 'too late' right after the abort; give its end a chance to try to land.
    enqueue(t.db, q, {}, { id: 'next' })
    await waitFor(() => child.output().includes('ran next'), 'the other process to go on with the next job')
    await waitFor(() => state('next') === 'done', 'the next job to be done')
    expect(jobRow(t.client, 'elsewhere')).toMatchObject({ state: 'canceled', result: null })
    expect(count(t.client, 'jobs_step')).toBe(0)
    expect(count(t.client, 'jobs_lease')).toBe(0)
  })

  test('an unknown id is NOT_FOUND; a bad id or queue name is refused before anything is read', () => {
    expectCode(() => cancel(t.db, q, 'missing'), 'NOT_FOUND')
    expectCode(() => cancel(t.db, q, ''), 'INVALID_OPTION')
    expectCode(() => cancel(t.db, 'x'.repeat(1025), 'a'), 'TOO_LARGE')
    expectCode(() => retryJob(t.db, q, 'missing'), 'NOT_FOUND')
  })
})

describe('retryJob', () => {
  test('a failed job runs again with fresh attempts and none of its old steps', async () => {
    const flaky = defineQueue<{ n: number }>('flaky', { attempts: 2, backoff: { initial: 1, max: 1 } })
    enqueue(t.db, flaky, { n: 1 }, { id: 'flaky' })
    let broken = true
    const stepRuns: number[] = []
    workers.push(
      work(t.db, flaky, async (_value, run) => {
        await run.step('one', () => stepRuns.push(run.attempt))
        if (broken) throw new Error(`still broken on attempt ${run.attempt}`)
        return { fixed: run.attempt }
      }),
    )
    await waitFor(() => state('flaky') === 'failed', 'the job to fail for good')
    expect(jobRow(t.client, 'flaky')).toMatchObject({ attempts: 2, error: 'still broken on attempt 2' })
    expect(stepRuns).toEqual([1])

    broken = false
    expect(retryJob(t.db, flaky, 'flaky')).toBe(true)
    await waitFor(() => state('flaky') === 'done', 'the retried job to be done')
    // Fresh attempts: it ran as attempt 1 again, and its step ran again since no old step was kept.
    expect(jobRow(t.client, 'flaky')).toMatchObject({ attempts: 1, error: null, result: '{"fixed":1}' })
    expect(stepRuns).toEqual([1, 1])
    expect(queueCounts(t.db, flaky)).toMatchObject({ failed: 0, done: 1, waiting: 0 })
  })

  test('a canceled job runs again; a waiting, running or done job is left as it was', async () => {
    enqueue(t.db, q, { n: 1 }, { id: 'canceled' })
    cancel(t.db, q, 'canceled')
    const row = jobRow(t.client, 'canceled')!
    expect(retryJob(t.db, q, 'canceled')).toBe(true)
    expect(jobRow(t.client, 'canceled')).toMatchObject({ state: 'waiting', attempts: 0, finished_at: null, error: null, result: null })
    expect(jobRow(t.client, 'canceled')!.run_at).toBeGreaterThanOrEqual(row.run_at)
    expect(retryJob(t.db, q, 'canceled')).toBe(false)
    expect(state('canceled')).toBe('waiting')

    const { aborted } = holdingWorker()
    await waitFor(() => state('canceled') === 'running', 'the job to run')
    expect(retryJob(t.db, q, 'canceled')).toBe(false)
    expect(state('canceled')).toBe('running')
    expect(aborted.size).toBe(0)
    cancel(t.db, q, 'canceled')
  })
})

describe('pauseQueue and resumeQueue', () => {
  test('workers in this process and in another stop claiming while paused, and start again on resume', async () => {
    pauseQueue(t.db, q)
    expect(queueCounts(t.db, q).paused).toBe(true)
    const child = startFixture('admin-child.ts', [t.file])
    const ranHere: string[] = []
    workers.push(work(t.db, q, (_value, run) => void ranHere.push(run.id), { pollInterval: '10ms' }))
    await waitFor(() => child.output().includes('ready'), 'the worker process to start')
    for (let n = 0; n < 6; n++) enqueue(t.db, q, { n }, { id: `job-${n}` })
    // Both workers poll every 10-20 ms: ten polls each and still nothing claimed.
    const since = Date.now()
    await waitFor(() => Date.now() - since > 300 && queueCounts(t.db, q).waiting === 6, 'time for ten polls with nothing claimed')
    expect(ranHere).toEqual([])
    expect(child.output()).not.toContain('ran ')
    expect(queueCounts(t.db, q)).toMatchObject({ waiting: 6, running: 0, paused: true })

    resumeQueue(t.db, q)
    expect(queueCounts(t.db, q).paused).toBe(false)
    await waitFor(() => queueCounts(t.db, q).done === 6, 'every job to run after the resume')
  })

  test('a queue that never held a job can be paused; its flag survives a new connection', () => {
    pauseQueue(t.db, 'empty')
    expect(queueCounts(t.reopen().db, 'empty')).toEqual({ queue: 'empty', paused: true, waiting: 0, scheduled: 0, running: 0, done: 0, failed: 0, canceled: 0 })
    resumeQueue(t.db, 'empty')
    expect(queueCounts(t.db, 'empty').paused).toBe(false)
  })
})

describe('queueCounts', () => {
  test('answers each state from the queue table, for one queue or all of them', () => {
    for (let n = 0; n < 5; n++) enqueue(t.db, q, { n }, { id: `w${n}` })
    enqueue(t.db, q, {}, { id: 's', delay: '1h' })
    enqueue(t.db, other, {}, { id: 'o' })
    cancel(t.db, q, 'w0')
    expect(queueCounts(t.db, q)).toEqual({ queue: 'admin', paused: false, waiting: 4, scheduled: 1, running: 0, done: 0, failed: 0, canceled: 1 })
    expect(queueCounts(t.db).map((counts) => [counts.queue, counts.waiting])).toEqual([
      ['admin', 4],
      ['other', 1],
    ])
    // It is read from the counters, not counted: a change to the counter row shows as is.
    t.client.prepare("update jobs_queue set done = 1000000 where name = 'admin'").run()
    expect(queueCounts(t.db, q).done).toBe(1_000_000)
    expect(queueCounts(t.db, 'never')).toMatchObject({ waiting: 0, paused: false })
  })
})

describe('listJobs', () => {
  function seed(): void {
    const insert = t.client.prepare(`insert into jobs_job (queue, id, grp, value, state, priority, attempts, max_attempts, run_at, created_at, finished_at, error)
      values (@queue, @id, @grp, @value, @state, @priority, 0, 3, @runAt, 1, @finishedAt, @error)`)
    t.client.transaction(() => {
      for (let i = 0; i < 300; i++) {
        const state = (['waiting', 'scheduled', 'done', 'failed', 'canceled'] as const)[i % 5]
        insert.run({
          queue: i % 2 ? 'admin' : 'other',
          id: `j${i}`,
          grp: i % 3 === 0 ? 'g0' : null,
          value: JSON.stringify({ i }),
          state,
          priority: i % 4,
          runAt: 1_000 + ((i * 7919) % 100),
          finishedAt: state === 'done' || state === 'failed' || state === 'canceled' ? 10_000 + ((i * 104729) % 50) : null,
          error: state === 'failed' ? `failed ${i}` : null,
        })
      }
    })()
  }

  function allPages(options: Parameters<typeof listJobs>[1], limit: number): { ids: string[]; pages: number } {
    const ids: string[] = []
    let cursor: string | undefined
    let pages = 0
    do {
      const page = listJobs(t.db, { ...options, limit, cursor })
      pages++
      expect(page.jobs.length).toBeLessThanOrEqual(limit)
      ids.push(...page.jobs.map((job) => job.id))
      cursor = page.next ?? undefined
    } while (cursor)
    return { ids, pages }
  }

  /** The same listing computed from the rows directly, in the order the listing promises. */
  function expected(queue: string | null, state: JobState | null, group: string | null): string[] {
    const rows = t.client.prepare('select * from jobs_job').all() as Record<string, number | string>[]
    const chosen = rows.filter((row) => (queue === null || row.queue === queue) && (state === null || row.state === state) && (group === null || row.grp === group))
    const by = (...keys: [string, 1 | -1][]) => (a: Record<string, number | string>, b: Record<string, number | string>) => {
      for (const [key, direction] of keys) if (a[key] !== b[key]) return (a[key]! < b[key]! ? -1 : 1) * direction
      return 0
    }
    if (queue !== null && state === 'waiting') chosen.sort(by(['priority', 1], ['run_at', 1], ['seq', 1]))
    else if (queue !== null && state === 'scheduled') chosen.sort(by(['run_at', 1], ['seq', 1]))
    else if (queue !== null && state !== null && state !== 'running') chosen.sort(by(['finished_at', -1], ['seq', -1]))
    else chosen.sort(by(['seq', -1]))
    return chosen.map((row) => String(row.id))
  }

  test('pages by keyset cover every job once, in each listing order, with group filters', () => {
    seed()
    for (const queue of ['admin', null]) {
      for (const state of [null, 'waiting', 'scheduled', 'done', 'failed', 'canceled'] as const) {
        for (const group of [null, 'g0']) {
          const want = expected(queue, state, group)
          const got = allPages({ ...(queue ? { queue } : {}), ...(state ? { state } : {}), ...(group ? { group } : {}) }, 7)
          expect(got.ids, `${queue} ${state} ${group}`).toEqual(want)
          expect(got.pages).toBe(Math.max(1, Math.ceil(want.length / 7)))
        }
      }
    }
  })

  test('a page deep in the listing is still an index search, and adds meanwhile do not shift pages', () => {
    seed()
    const first = listJobs(t.db, { queue: 'admin', state: 'waiting', limit: 5 })
    enqueue(t.db, q, { n: -1 }, { id: 'added-meanwhile', priority: 99 })
    const second = listJobs(t.db, { queue: 'admin', state: 'waiting', limit: 5, cursor: first.next! })
    const straight = listJobs(t.db, { queue: 'admin', state: 'waiting', limit: 10 })
    expect([...first.jobs, ...second.jobs].map((job) => job.id)).toEqual(straight.jobs.map((job) => job.id))
    for (const [state, index] of [['waiting', 'jobs_job_claim'], ['scheduled', 'jobs_job_scheduled'], ['done', 'jobs_job_ended']] as const) {
      const statement = { waiting: 'listWaiting', scheduled: 'listScheduled', done: 'listEnded' }[state]
      const plan = t.client.prepare(`explain query plan ${ADMIN_SQL[statement as keyof typeof ADMIN_SQL].sql}`).all({ queue: 'admin', state, grp: null, k1: 0, k2: 0, k3: 0, limit: 1 }) as { detail: string }[]
      expect(plan.map((row) => row.detail).join('\n')).toContain(`USING INDEX ${index}`)
      expect(plan.map((row) => row.detail).join('\n')).not.toContain('TEMP B-TREE')
    }
  })

  test('running jobs list newest first; records carry the row, parsed', async () => {
    holdingWorker()
    enqueue(t.db, q, { n: 1 }, { id: 'r1', group: 'g' })
    enqueue(t.db, q, { n: 2 }, { id: 'r2' })
    await waitFor(() => queueCounts(t.db, q).running === 2, 'both jobs to run')
    const page = listJobs(t.db, { queue: q, state: 'running' })
    expect(page.jobs.map((job) => job.id)).toEqual(['r2', 'r1'])
    expect(page.jobs[1]).toMatchObject({ queue: 'admin', id: 'r1', group: 'g', value: { n: 1 }, state: 'running', attempt: 1, attempts: 1, error: null, result: null, finishedAt: null })
    expect(page.jobs[1]!.runAt).toBeInstanceOf(Date)
    expect(listJobs(t.db, { queue: q, state: 'running', group: 'g' }).jobs.map((job) => job.id)).toEqual(['r1'])
    for (const id of ['r1', 'r2']) cancel(t.db, q, id)
  })

  test('search by id finds the job in each queue that holds it', () => {
    enqueue(t.db, q, { n: 1 }, { id: 'same' })
    enqueue(t.db, other, { n: 2 }, { id: 'same', group: 'g' })
    expect(listJobs(t.db, { id: 'same' }).jobs.map((job) => [job.queue, job.value])).toEqual([
      ['admin', { n: 1 }],
      ['other', { n: 2 }],
    ])
    expect(listJobs(t.db, { id: 'same', group: 'g' }).jobs.map((job) => job.queue)).toEqual(['other'])
    expect(listJobs(t.db, { id: 'same', queue: q, state: 'done' }).jobs).toEqual([])
  })

  test('bad options are INVALID_OPTION: an unknown state, a limit out of range, a cursor of another listing', () => {
    seed()
    const next = listJobs(t.db, { queue: 'admin', state: 'waiting', limit: 2 }).next!
    expectCode(() => listJobs(t.db, { queue: 'admin', state: 'done', cursor: next }), 'INVALID_OPTION')
    expectCode(() => listJobs(t.db, { cursor: 'not a cursor' }), 'INVALID_OPTION')
    expectCode(() => listJobs(t.db, { state: 'lost' as JobState }), 'INVALID_OPTION')
    expectCode(() => listJobs(t.db, { limit: 0 }), 'INVALID_OPTION')
    expectCode(() => listJobs(t.db, { limit: 1001 }), 'INVALID_OPTION')
    expectCode(() => listJobs(t.db, { sort: 'id' } as never), 'INVALID_OPTION')
  })
})

describe('inspectJob', () => {
  test('shows a job with its steps and lease while it runs, its error and stack once it failed', async () => {
    holdingWorker()
    enqueue(t.db, q, { n: 7 }, { id: 'inspected' })
    await waitFor(() => count(t.client, 'jobs_step') === 1, 'the run to keep a step')
    const running = inspectJob(t.db, q, 'inspected')!
    expect(running).toMatchObject({ state: 'running', value: { n: 7 }, steps: [{ name: 'one', answer: 'kept' }], attempt: 1 })
    expect(running.lease).toMatchObject({ attempt: 1, owner: expect.stringContaining(`/${process.pid}/`) })
    expect(running.lease!.expiresAt!.getTime()).toBeGreaterThan(Date.now())
    cancel(t.db, q, 'inspected')

    const failing = defineQueue('failing', { attempts: 1 })
    enqueue(t.db, failing, null, { id: 'broken' })
    workers.push(work(t.db, failing, () => {
      throw new TypeError('the model said no')
    }))
    await waitFor(() => jobRow(t.client, 'broken')?.state === 'failed', 'the job to fail')
    const failed = inspectJob(t.db, failing, 'broken')!
    expect(failed).toMatchObject({ state: 'failed', error: 'the model said no', steps: [], lease: null })
    expect(failed.errorStack).toMatch(/^TypeError: the model said no\n\s+at /)
    expect(inspectJob(t.db, failing, 'missing')).toBeUndefined()
  })
})

describe('prune', () => {
  test('deletes ended jobs that ended before the time given, in batches, and nothing else', () => {
    const insert = t.client.prepare(`insert into jobs_job (queue, id, state, finished_at) values (?, ?, ?, ?)`)
    t.client.transaction(() => {
      for (let i = 0; i < 1_200; i++) insert.run('admin', `old-done-${i}`, 'done', 1_000)
      insert.run('admin', 'old-failed', 'failed', 1_000)
      insert.run('admin', 'new-done', 'done', 5_000)
      insert.run('other', 'old-other', 'canceled', 1_000)
    })()
    enqueue(t.db, q, {}, { id: 'waiting' })
    expect(prune(t.db, { before: 2_000, queue: q, states: ['failed'] })).toBe(1)
    expect(prune(t.db, { before: new Date(2_000), queue: 'admin' })).toBe(1_200)
    expect(state('new-done')).toBe('done')
    expect(state('waiting')).toBe('waiting')
    expect(state('old-other')).toBe('canceled')
    expect(prune(t.db, { before: Date.now() })).toBe(2)
    expect(state('waiting')).toBe('waiting')
    expect(queueCounts(t.db, q)).toMatchObject({ done: 0, failed: 0, waiting: 1 })
    expect(queueCounts(t.db, 'other')).toMatchObject({ canceled: 0 })
  })

  test('refuses a missing before, an unknown state or option', () => {
    expectCode(() => prune(t.db, {} as never), 'INVALID_OPTION')
    expectCode(() => prune(t.db, { before: Number.NaN }), 'INVALID_OPTION')
    expectCode(() => prune(t.db, { before: 1, states: ['waiting' as never] }), 'INVALID_OPTION')
    expectCode(() => prune(t.db, { before: 1, olderThan: '1d' } as never), 'INVALID_OPTION')
  })
})
