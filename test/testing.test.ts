import { AssertionError } from 'node:assert'
import { describe, expect, test } from 'vitest'
import { cancel, defineQueue, enqueue, isJobsError, pauseQueue, watch, work, type Handler, type Json, type Queue } from '../src/index.js'
import { assertEnqueued, drain, refuteEnqueued } from '../src/testing/index.js'
import { eachFreshDb, freshDb, type TestDb } from './helpers/db.js'
import { count, jobRow } from './helpers/rows.js'
import { waitFor } from './helpers/wait.js'

const { t, workers } = eachFreshDb()

interface Task {
  does: 'return' | 'throw' | 'fail' | 'snooze' | 'retry' | 'bad-result'
  n: number
}

const tasks = defineQueue<Task>('tasks', { attempts: 2, backoff: { initial: '1h', max: '1h' } })

/** One handler for every outcome of SPEC §5. */
const handler: Handler<Task> = async ({ does, n }, run) => {
  await run.step('double', () => n * 2)
  switch (does) {
    case 'return':
      return { n, attempt: run.attempt }
    case 'throw':
      throw new Error(`task ${n} broke`)
    case 'fail':
      return run.fail(`task ${n} cannot be done`)
    case 'snooze':
      return run.snooze('1h')
    case 'retry':
      return run.retry('1h')
    case 'bad-result':
      // Cast past the compiler, which refuses a Date, to show that the run refuses it too.
      return { when: new Date(0) } as unknown as Json
  }
}

const ALL: Task[] = [
  { does: 'return', n: 1 },
  { does: 'throw', n: 2 },
  { does: 'fail', n: 3 },
  { does: 'snooze', n: 4 },
  { does: 'retry', n: 5 },
  { does: 'bad-result', n: 6 },
]

function seed(db: TestDb['db'], queue: Queue<Task>, list: Task[] = ALL): void {
  for (const task of list) enqueue(db, queue, task, { id: `${task.does}-${task.n}` })
}

/** What a run leaves in a job's row, without the times. */
function outcomes(client: TestDb['client']): unknown[] {
  return client.prepare('select id, state, attempts, error, result from jobs_job order by seq').all()
}

describe('drain', () => {
  test('JOB-08 ends each job exactly as a worker would, for every outcome', async () => {
    seed(t.db, tasks)
    const result = await drain(t.db, tasks, handler)
    expect(result).toMatchObject({ ran: 6, done: 1, failed: 1, scheduled: 4, canceled: 0 })
    expect(result.runs.map((run) => [run.id, run.state])).toEqual([
      ['return-1', 'done'],
      ['throw-2', 'scheduled'],
      ['fail-3', 'failed'],
      ['snooze-4', 'scheduled'],
      ['retry-5', 'scheduled'],
      ['bad-result-6', 'scheduled'],
    ])
    expect(result.runs[1]!.error).toBe('task 2 broke')

    const other = freshDb('worker.db')
    seed(other.db, tasks)
    workers.push(work(other.db, tasks, handler))
    await waitFor(() => count(other.client, 'jobs_job', "state in ('waiting', 'running')") === 0, 'the worker to run every job once')
    await waitFor(() => count(other.client, 'jobs_lease') === 0, 'the worker to record every end')
    expect(outcomes(t.client)).toEqual(outcomes(other.client))
    expect(count(t.client, 'jobs_lease')).toBe(0)
    // Steps of ended jobs are gone (JOB-14); those of jobs that will run again are kept (JOB-06).
    expect(t.client.prepare('select j.id from jobs_step s join jobs_job j on j.seq = s.job order by j.seq').pluck().all()).toEqual(['throw-2', 'snooze-4', 'retry-5', 'bad-result-6'])
  })

  test('JOB-06 JOB-17 runs in claim order, reruns retries that are due at once without rerunning kept steps, and runs jobs the handler adds', async () => {
    const quick = defineQueue<{ n: number }>('quick', { attempts: 3, backoff: { initial: 0, max: 0 } })
    enqueue(t.db, quick, { n: 1 }, { id: 'low', priority: 5 })
    enqueue(t.db, quick, { n: 2 }, { id: 'high', priority: -5 })
    enqueue(t.db, quick, { n: 3 }, { id: 'later', delay: '1h' })
    const stepCalls: string[] = []
    const result = await drain(t.db, quick, async ({ n }, run) => {
      await run.step('side effect', () => stepCalls.push(run.id))
      if (run.id === 'high' && run.attempt === 1) throw new Error('first attempt fails')
      if (n < 10) enqueue(t.db, quick, { n: n * 10 }, { id: `follow-up-of-${run.id}` })
      return run.attempt
    })
    expect(result.runs.map((run) => `${run.id}#${run.attempt}:${run.state}`)).toEqual([
      'high#1:scheduled',
      'high#2:done',
      'follow-up-of-high#1:done',
      'low#1:done',
      'follow-up-of-low#1:done',
    ])
    expect(stepCalls).toEqual(['high', 'follow-up-of-high', 'low', 'follow-up-of-low'])
    expect(jobRow(t.client, 'later')).toMatchObject({ state: 'scheduled', attempts: 0 })
    expect(await drain(t.db, quick, () => 'nothing due')).toMatchObject({ ran: 0 })
  })

  test('JOB-11 a retry it reruns at once is first seen scheduled, with its error, by a watcher', async () => {
    const quick = defineQueue<number>('quick-watched', { attempts: 2, backoff: { initial: 0, max: 0 } })
    enqueue(t.db, quick, 1, { id: 'a' })
    const seen: Array<[string, number, string | null]> = []
    const watched = (async () => {
      for await (const s of watch(t.db, quick, 'a')) seen.push([s.state, s.attempt, s.error])
    })()
    await drain(t.db, quick, (_value, run) => {
      if (run.attempt === 1) throw new Error('the first attempt fails')
    })
    await watched
    expect(seen.map(([state, attempt]) => [state, attempt])).toEqual([['waiting', 0], ['running', 1], ['scheduled', 1], ['running', 2], ['done', 2]])
    expect(seen[2]![2]).toBe('the first attempt fails')
  })

  test('JOB-10 a run past the queue timeout has its signal aborted and counts as a failed attempt', async () => {
    const slow = defineQueue('slow', { attempts: 1, timeout: 50 })
    enqueue(t.db, slow, null, { id: 'slow' })
    let reason: unknown
    const result = await drain(t.db, slow, (_value, run) =>
      new Promise((resolve) =>
        run.signal.addEventListener('abort', () => {
          reason = run.signal.reason
          resolve('too late')
        }),
      ),
    )
    expect(isJobsError(reason, 'TIMEOUT')).toBe(true)
    expect(result).toMatchObject({ ran: 1, failed: 1 })
    expect(jobRow(t.client, 'slow')).toMatchObject({ state: 'failed', result: null, error: 'the run took longer than its timeout of 50 ms' })
  })

  test('JOB-16 a job canceled while it runs is aborted, and its outcome is refused', async () => {
    const q = defineQueue('cancelable')
    enqueue(t.db, q, null, { id: 'doomed' })
    let reason: unknown
    const result = await drain(t.db, q, async (_value, run) => {
      await run.step('one', () => 1)
      cancel(t.db, q, run.id)
      reason = run.signal.reason
      await expect(run.step('two', () => 2)).rejects.toMatchObject({ code: 'LEASE_LOST' })
      return 'refused'
    })
    expect(isJobsError(reason, 'LEASE_LOST')).toBe(true)
    expect(result).toMatchObject({ ran: 1, canceled: 1, done: 0 })
    expect(jobRow(t.client, 'doomed')).toMatchObject({ state: 'canceled', result: null })
    expect(count(t.client, 'jobs_step')).toBe(0)
  })

  test('a paused queue drains nothing; a queue that never empties ends in TIMEOUT after maxRuns', async () => {
    const q = defineQueue('loops')
    enqueue(t.db, q, null, { id: 'loop' })
    pauseQueue(t.db, q)
    expect(await drain(t.db, q, () => 'never')).toMatchObject({ ran: 0 })
    t.client.prepare("update jobs_queue set paused = 0 where name = 'loops'").run()
    await expect(drain(t.db, q, (_value, run) => run.snooze(0), { maxRuns: 25 })).rejects.toMatchObject({ code: 'TIMEOUT' })
    expect(jobRow(t.client, 'loop')).toMatchObject({ state: 'scheduled', attempts: 0 })
    await expect(drain(t.db, q, () => 1, { maxRuns: 0 })).rejects.toMatchObject({ code: 'INVALID_OPTION' })
    await expect(drain(t.db, q, () => 1, { slots: 2 } as never)).rejects.toMatchObject({ code: 'INVALID_OPTION' })
  })
})

describe('assertEnqueued and refuteEnqueued', () => {
  const replies = defineQueue<{ messageId: number; meta: { lang: string; tags: string[] } }>('replies')

  test('match a job by part of its value, its id, group and state, and answer it', () => {
    enqueue(t.db, replies, { messageId: 1, meta: { lang: 'en', tags: ['a'] } }, { id: 'reply:1', group: 'chat:9' })
    enqueue(t.db, replies, { messageId: 2, meta: { lang: 'fr', tags: [] } }, { id: 'reply:2', delay: '1h' })
    expect(assertEnqueued(t.db, replies)).toMatchObject({ id: 'reply:1' })
    expect(assertEnqueued(t.db, replies, { value: { meta: { lang: 'fr' } } })).toMatchObject({ id: 'reply:2', state: 'scheduled' })
    expect(assertEnqueued(t.db, 'replies', { value: { messageId: 1, meta: { tags: ['a'] } }, group: 'chat:9', state: ['waiting', 'running'] })).toMatchObject({ id: 'reply:1' })
    expect(assertEnqueued(t.db, replies, { id: 'reply:2', state: 'scheduled' }).value).toEqual({ messageId: 2, meta: { lang: 'fr', tags: [] } })
    refuteEnqueued(t.db, replies, { value: { messageId: 3 } })
    refuteEnqueued(t.db, replies, { value: { meta: { tags: [] } }, state: 'waiting' })
    refuteEnqueued(t.db, 'elsewhere')
  })

  test('throw an AssertionError that lists what the queue holds', () => {
    enqueue(t.db, replies, { messageId: 1, meta: { lang: 'en', tags: ['a', 'b'] } }, { id: 'reply:1' })
    let thrown: unknown
    try {
      assertEnqueued(t.db, replies, { value: { meta: { tags: ['a'] } } })
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(AssertionError)
    expect((thrown as Error).message).toContain("expected queue 'replies' to hold a job matching")
    expect((thrown as Error).message).toContain('reply:1 (waiting): {"messageId":1,"meta":{"lang":"en","tags":["a","b"]}}')
    expect(() => refuteEnqueued(t.db, replies, { value: { messageId: 1 } })).toThrow(/to hold no job matching .*\n\s+reply:1 \(waiting\)/)
    expect(() => assertEnqueued(t.db, replies, { valu: {} } as never)).toThrow(expect.objectContaining({ code: 'INVALID_OPTION' }))
  })
})
