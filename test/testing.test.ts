import { AssertionError } from 'node:assert'
import { describe, expect, test } from 'vitest'
import { cancel, defineQueue, enqueue, isJobsError, pauseQueue, watch, work, type Handler, type Json, type Queue } from '../src/index.js'
import { assertEnqueued, drain, refuteEnqueued } from '../src/testing/index.js'
import { freshDb } from './helpers/db.js'
import { CONTRACT_DATABASES, CONTRACT_TEST_MS, eachContractDb, type ContractDb, type DialectName } from './helpers/dialects.js'
import { freshPgDb } from './helpers/pg.js'
import { freshLibsql } from './helpers/libsql.js'
import { freshPglite } from './helpers/pglite.js'
import { waitFor } from './helpers/wait.js'

interface Task {
  does: 'return' | 'throw' | 'fail' | 'snooze' | 'retry' | 'bad-result'
  n: number
}

const tasks = defineQueue<Task>('tasks', { attempts: 2, backoff: { initial: '1h', max: '1h' } })

/** One handler for every outcome of the outcome table (docs/api.md). */
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

async function seed(db: ContractDb['db'], queue: Queue<Task>, list: Task[] = ALL): Promise<void> {
  for (const task of list) await enqueue(db, queue, task, { id: `${task.does}-${task.n}` })
}

/** Plain SQL on a database of either dialect, `$1`… for parameters. */
type Query = <T>(sql: string, ...params: unknown[]) => Promise<T[]>

/** What a run leaves in a job's row, without the times: the result as JSON text on either dialect. */
function outcomes(query: Query, dialect: ContractDb['dialect']): Promise<unknown[]> {
  return query(
    `select id, state, attempts, error, ${dialect === 'postgres' ? 'result::text' : 'result'} as result from jobs_job order by seq`,
  )
}

/** How many rows of `table` match `where`. */
async function count(query: Query, table: string, where = 'true'): Promise<number> {
  const [row] = await query<{ n: number | string }>(`select count(*) as n from ${table} where ${where}`)
  return Number(row!.n)
}

/** A second fresh database of the dialect, for a worker to run the same jobs as drain. */
async function anotherDb(dialect: DialectName): Promise<{ db: ContractDb['db']; query: Query; close(): Promise<void> }> {
  if (dialect === 'libsql') {
    const other = await freshLibsql('worker.db')
    return { db: other.db, query: other.query, close: async () => other.close() }
  }
  if (dialect === 'pglite') {
    const other = await freshPglite()
    return { db: other.db, query: other.query, close: other.close }
  }
  if (dialect === 'sqlite') {
    const other = freshDb('worker.db')
    return {
      db: other.db,
      query: async <T>(sql: string, ...params: unknown[]) => other.client.prepare(sql.replace(/\$\d+/g, '?')).all(...params) as T[],
      close: async () => other.close(),
    }
  }
  const other = await freshPgDb()
  return {
    db: other.db,
    query: async <T>(sql: string, ...params: unknown[]) => (await other.pool.query(sql, params)).rows as T[],
    close: () => other.drop(),
  }
}

describe.each(CONTRACT_DATABASES)('%s', { timeout: CONTRACT_TEST_MS }, (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`

  /** A job's row as stored: state, error and result (JSON text, or null). */
  async function row(queue: string, id: string): Promise<{ state: string; error: string | null; result: string | null } | undefined> {
    const [found] = await t.query<{ state: string; error: string | null; result: string | null }>(
      `select state, error, ${t.dialect === 'postgres' ? 'result::text' : 'result'} as result from jobs_job where queue = $1 and id = $2`,
      queue,
      id,
    )
    return found
  }

  describe('drain', () => {
    test(`JOB-08 ${on} ends each job exactly as a worker would, for every outcome`, async () => {
      await seed(t.db, tasks)
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

      const other = await anotherDb(dialect)
      try {
        await seed(other.db, tasks)
        const worker = work(other.db, tasks, handler)
        workers.push(worker)
        await waitFor(
          async () => (await count(other.query, 'jobs_job', "state in ('waiting', 'running')")) === 0,
          'the worker to run every job once',
        )
        await waitFor(async () => (await count(other.query, 'jobs_job', 'owner is not null')) === 0, 'the worker to record every end')
        expect(await outcomes(t.query, t.dialect)).toEqual(await outcomes(other.query, t.dialect))
        await worker.stop()
      } finally {
        await other.close()
      }
      expect(await t.held()).toBe(0)
      // drain holds no job once it returns: its worker's row is gone too.
      expect(await t.count('jobs_lease')).toBe(0)
      // Steps of ended jobs are gone (JOB-14); those of jobs that will run again are kept (JOB-06).
      expect(
        (await t.query<{ id: string }>('select j.id from jobs_step s join jobs_job j on j.seq = s.job order by j.seq')).map(
          (row) => row.id,
        ),
      ).toEqual(['throw-2', 'snooze-4', 'retry-5', 'bad-result-6'])
    })

    test(`JOB-06 JOB-17 ${on} runs in claim order, reruns retries that are due at once without rerunning kept steps, and runs jobs the handler adds`, async () => {
      const quick = defineQueue<{ n: number }>('quick', { attempts: 3, backoff: { initial: 0, max: 0 } })
      await enqueue(t.db, quick, { n: 1 }, { id: 'low', priority: 5 })
      await enqueue(t.db, quick, { n: 2 }, { id: 'high', priority: -5 })
      await enqueue(t.db, quick, { n: 3 }, { id: 'later', delay: '1h' })
      const stepCalls: string[] = []
      const result = await drain(t.db, quick, async ({ n }, run) => {
        await run.step('side effect', () => stepCalls.push(run.id))
        if (run.id === 'high' && run.attempt === 1) throw new Error('first attempt fails')
        if (n < 10) await enqueue(t.db, quick, { n: n * 10 }, { id: `follow-up-of-${run.id}` })
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
      expect(await t.job('quick', 'later')).toMatchObject({ state: 'scheduled', attempts: 0 })
      expect(await drain(t.db, quick, () => 'nothing due')).toMatchObject({ ran: 0 })
    })

    test(`JOB-11 ${on} a retry it reruns at once is first seen scheduled, with its error, by a watcher`, async () => {
      // A limit, so that the drain's claim takes the queue's row first (and on PostgreSQL waits for it).
      const quick = defineQueue<number>('quick-watched', { attempts: 2, backoff: { initial: 0, max: 0 }, concurrency: 1 })
      await enqueue(t.db, quick, 1, { id: 'a' })
      const seen: Array<[string, number, string | null]> = []
      const watched = (async () => {
        for await (const s of watch(t.db, quick, 'a')) seen.push([s.state, s.attempt, s.error])
      })()
      const sawRetry = () => seen.some(([state]) => state === 'scheduled')
      // The drain claims only once the watcher has read the job waiting: on a loaded machine its first read may come late.
      await waitFor(() => seen.length > 0, "the watcher's first read")
      let released: Promise<unknown> = Promise.resolve()
      await drain(t.db, quick, async (_value, run) => {
        // Each run waits until the watcher saw it: on PostgreSQL the watcher reads the row after the claim's notice,
        // and a run that ended by then would show only its end.
        await waitFor(
          () => seen.some(([state, attempt]) => state === 'running' && attempt === run.attempt),
          `the watcher to see attempt ${run.attempt}`,
        )
        if (run.attempt === 1) {
          // On PostgreSQL the watcher is refreshed by notice, after the fact: a rerun claimed before it read the retry's
          // end is seen as the next run only. So the rerun's claim waits here, on the queue's row held by a transaction
          // of the test's, until the watcher saw the retry; what is checked is that the retry is yielded scheduled,
          // with its error. SQLite's watcher in this process never needs it; PGlite runs one transaction at a time, so
          // there the rerun waits for the watcher instead.
          if (dialect === 'postgres') {
            let locked = () => {}
            const holding = new Promise<void>((resolve) => {
              locked = resolve
            })
            released = t.inTransaction!(async (_tx, exec) => {
              await exec(`select 1 from jobs_queue where name = 'quick-watched' for update`)
              locked()
              await waitFor(sawRetry, 'the watcher to see the retry')
            })
            await holding
          }
          throw new Error('the first attempt fails')
        }
        if (dialect === 'pglite') await waitFor(sawRetry, 'the watcher to see the retry')
      })
      await released
      await watched
      expect(seen.map(([state, attempt]) => [state, attempt])).toEqual([
        ['waiting', 0],
        ['running', 1],
        ['scheduled', 1],
        ['running', 2],
        ['done', 2],
      ])
      expect(seen[2]![2]).toBe('the first attempt fails')
    })

    test(`JOB-10 ${on} a run past the queue timeout has its signal aborted and counts as a failed attempt`, async () => {
      const slow = defineQueue('slow', { attempts: 1, timeout: 50 })
      await enqueue(t.db, slow, null, { id: 'slow' })
      let reason: unknown
      const result = await drain(
        t.db,
        slow,
        (_value, run) =>
          new Promise((resolve) =>
            run.signal.addEventListener('abort', () => {
              reason = run.signal.reason
              resolve('too late')
            }),
          ),
      )
      expect(isJobsError(reason, 'TIMEOUT')).toBe(true)
      expect(result).toMatchObject({ ran: 1, failed: 1 })
      expect(await row('slow', 'slow')).toMatchObject({
        state: 'failed',
        result: null,
        error: 'the run took longer than its timeout of 50 ms',
      })
    })

    test(`JOB-16 ${on} a job canceled while it runs is aborted, and its outcome is refused`, async () => {
      const q = defineQueue('cancelable')
      await enqueue(t.db, q, null, { id: 'doomed' })
      let reason: unknown
      const result = await drain(t.db, q, async (_value, run) => {
        await run.step('one', () => 1)
        await cancel(t.db, q, run.id)
        // At once on SQLite; on PostgreSQL once the run's lease has been read back, one statement later.
        await waitFor(() => run.signal.aborted, 'the run to be aborted')
        reason = run.signal.reason
        await expect(run.step('two', () => 2)).rejects.toMatchObject({ code: 'LEASE_LOST' })
        return 'refused'
      })
      expect(isJobsError(reason, 'LEASE_LOST')).toBe(true)
      expect(result).toMatchObject({ ran: 1, canceled: 1, done: 0 })
      expect(await row('cancelable', 'doomed')).toMatchObject({ state: 'canceled', result: null })
      expect(await t.count('jobs_step')).toBe(0)
    })

    test(`${on} a paused queue drains nothing; a queue that never empties ends in TIMEOUT after maxRuns`, async () => {
      const q = defineQueue('loops')
      await enqueue(t.db, q, null, { id: 'loop' })
      await pauseQueue(t.db, q)
      expect(await drain(t.db, q, () => 'never')).toMatchObject({ ran: 0 })
      await t.run(`update jobs_queue set paused = ${t.dialect === 'postgres' ? 'false' : '0'} where name = 'loops'`)
      await expect(drain(t.db, q, (_value, run) => run.snooze(0), { maxRuns: 25 })).rejects.toMatchObject({ code: 'TIMEOUT' })
      expect(await t.job('loops', 'loop')).toMatchObject({ state: 'scheduled', attempts: 0 })
      await expect(drain(t.db, q, () => 1, { maxRuns: 0 })).rejects.toMatchObject({ code: 'INVALID_OPTION' })
      await expect(drain(t.db, q, () => 1, { slots: 2 } as never)).rejects.toMatchObject({ code: 'INVALID_OPTION' })
    })
  })

  describe('assertEnqueued and refuteEnqueued', () => {
    const replies = defineQueue<{ messageId: number; meta: { lang: string; tags: string[] } }>('replies')

    test(`${on} match a job by part of its value, its id, group and state, and answer it`, async () => {
      await enqueue(t.db, replies, { messageId: 1, meta: { lang: 'en', tags: ['a'] } }, { id: 'reply:1', group: 'chat:9' })
      await enqueue(t.db, replies, { messageId: 2, meta: { lang: 'fr', tags: [] } }, { id: 'reply:2', delay: '1h' })
      expect(await assertEnqueued(t.db, replies)).toMatchObject({ id: 'reply:1' })
      expect(await assertEnqueued(t.db, replies, { value: { meta: { lang: 'fr' } } })).toMatchObject({ id: 'reply:2', state: 'scheduled' })
      expect(
        await assertEnqueued(t.db, 'replies', {
          value: { messageId: 1, meta: { tags: ['a'] } },
          group: 'chat:9',
          state: ['waiting', 'running'],
        }),
      ).toMatchObject({ id: 'reply:1' })
      expect((await assertEnqueued(t.db, replies, { id: 'reply:2', state: 'scheduled' })).value).toEqual({
        messageId: 2,
        meta: { lang: 'fr', tags: [] },
      })
      await refuteEnqueued(t.db, replies, { value: { messageId: 3 } })
      await refuteEnqueued(t.db, replies, { value: { meta: { tags: [] } }, state: 'waiting' })
      await refuteEnqueued(t.db, 'elsewhere')
    })

    test(`${on} throw an AssertionError that lists what the queue holds`, async () => {
      await enqueue(t.db, replies, { messageId: 1, meta: { lang: 'en', tags: ['a', 'b'] } }, { id: 'reply:1' })
      let thrown: unknown
      try {
        await assertEnqueued(t.db, replies, { value: { meta: { tags: ['a'] } } })
      } catch (error) {
        thrown = error
      }
      expect(thrown).toBeInstanceOf(AssertionError)
      expect((thrown as Error).message).toContain("expected queue 'replies' to hold a job matching")
      // As stored: PostgreSQL's jsonb keeps an object's keys in an order of its own (shorter keys first).
      const stored =
        t.dialect === 'postgres'
          ? '{"meta":{"lang":"en","tags":["a","b"]},"messageId":1}'
          : '{"messageId":1,"meta":{"lang":"en","tags":["a","b"]}}'
      expect((thrown as Error).message).toContain(`reply:1 (waiting): ${stored}`)
      await expect((async () => refuteEnqueued(t.db, replies, { value: { messageId: 1 } }))()).rejects.toThrow(
        /to hold no job matching .*\n\s+reply:1 \(waiting\)/,
      )
      await expect((async () => assertEnqueued(t.db, replies, { valu: {} } as never))()).rejects.toThrow(
        expect.objectContaining({ code: 'INVALID_OPTION' }),
      )
    })
  })
})
