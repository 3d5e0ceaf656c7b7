/**
 * JOB-25, unique windows, once per database (JOB-20): an add whose unique key a job of the queue holds, in one of the
 * states that hold it, adds nothing and answers the holder; exact under racing transactions, through the partial
 * unique index jobs_job_unique: eight transactions started together, on separate connections of a PostgreSQL server
 * and in eight processes on every database that processes share, add one job.
 */
import { describe, expect, test } from 'vitest'
import {
  cancel,
  defineQueue,
  enqueue,
  enqueueMany,
  isJobsError,
  queueCounts,
  retryJob,
  work,
  type Enqueued,
  type JobsErrorCode,
} from '../../src/index.js'
import { CONTRACT_DATABASES, CONTRACT_TEST_MS, eachContractDb, PROCESS_DATABASES } from '../helpers/dialects.js'
import { STARTUP_MS, started, startFixture } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

const HOUR = 3_600_000
const RACERS = 8

/** Whether `call` throws a JobsError with `code`; answers its message. */
async function refusal(call: () => unknown, code: JobsErrorCode): Promise<string> {
  let error: unknown
  try {
    await call()
  } catch (caught) {
    error = caught
  }
  expect(isJobsError(error, code), String(error)).toBe(true)
  return (error as Error).message
}

describe.each(CONTRACT_DATABASES)('%s', { timeout: CONTRACT_TEST_MS }, (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`

  const stored = (queue: string) =>
    t.query<{ id: string; state: string; unique_key: string | null; unique_states: string | null }>(
      'select id, state, unique_key, unique_states from jobs_job where queue = $1 order by seq',
      queue,
    )
  const state = async (queue: string, id: string) => (await t.job(queue, id))?.state

  test(`JOB-25 ${on} an add whose key a job holds adds nothing and answers that job; a key is made from fields or a function, within its window`, async () => {
    const digests = defineQueue<{ userId: number; n: number }>('digests', { unique: { key: ['userId'] } })
    const first = await enqueue(t.db, digests, { userId: 1, n: 1 })
    expect(first).toMatchObject({ added: true })
    expect(await enqueue(t.db, digests, { userId: 1, n: 2 })).toEqual({ id: first.id, added: false, matched: 'unique' })
    expect(await enqueue(t.db, digests, { userId: 2, n: 3 }, { id: 'two' })).toEqual({ id: 'two', added: true })
    // Its id taken, an add says so first; `unique: false` sets the queue's key aside; an add's own replaces it.
    expect(await enqueue(t.db, digests, { userId: 3, n: 4 }, { id: 'two' })).toEqual({ id: 'two', added: false, matched: 'id' })
    expect(await enqueue(t.db, digests, { userId: 1, n: 5 }, { id: 'free', unique: false })).toEqual({ id: 'free', added: true })
    expect(await enqueue(t.db, digests, { userId: 1, n: 6 }, { unique: { key: (value) => `n:${value.n}` } })).toMatchObject({
      added: true,
    })
    expect((await stored('digests')).map((row) => [row.unique_key, row.unique_states])).toEqual([
      ['{"userId":1}', ',waiting,scheduled,running,done,'],
      ['{"userId":2}', ',waiting,scheduled,running,done,'],
      [null, null],
      ['n:6', ',waiting,scheduled,running,done,'],
    ])
    // Nothing added is nothing counted.
    expect(await queueCounts(t.db, digests)).toMatchObject({ waiting: 4, scheduled: 0 })

    // Windows of an hour since the epoch, by when the job is due: the key holds within its window only.
    const hourly = defineQueue<{ userId: number }>('hourly', { unique: { key: (value) => `user:${value.userId}`, for: '1h' } })
    const hour = Math.floor(Date.now() / HOUR) * HOUR
    const now = await enqueue(t.db, hourly, { userId: 1 })
    const next = await enqueue(t.db, hourly, { userId: 1 }, { runAt: hour + HOUR })
    expect(next).toMatchObject({ added: true })
    expect(await enqueue(t.db, hourly, { userId: 1 }, { runAt: hour + HOUR + 30 * 60_000 })).toEqual({
      id: next.id,
      added: false,
      matched: 'unique',
    })
    expect(await enqueue(t.db, hourly, { userId: 1 })).toEqual({ id: now.id, added: false, matched: 'unique' })
    expect((await stored('hourly')).map((row) => row.unique_key)).toEqual([
      `user:1@${new Date(hour).toISOString()}`,
      `user:1@${new Date(hour + HOUR).toISOString()}`,
    ])
  })

  test(`JOB-25 ${on} the states that hold a key: waiting to done by default, failed and canceled when named; a holder that leaves them lets the key go`, async () => {
    const byDefault = defineQueue<{ n: number }>('by-default', { unique: { key: 'singleton' } })
    const kept = defineQueue<{ n: number }>('kept', {
      unique: { key: 'singleton', states: ['waiting', 'scheduled', 'running', 'canceled'] },
    })
    const a = await enqueue(t.db, byDefault, { n: 1 }, { delay: '1h' })
    expect(await enqueue(t.db, byDefault, { n: 2 })).toEqual({ id: a.id, added: false, matched: 'unique' })
    expect(await cancel(t.db, byDefault, a.id)).toBe(true)
    const b = await enqueue(t.db, byDefault, { n: 3 })
    expect(b).toMatchObject({ added: true })
    workers.push(work(t.db, byDefault, () => {}))
    await waitFor(async () => (await state('by-default', b.id)) === 'done', 'the job to be done')
    expect(await enqueue(t.db, byDefault, { n: 4 })).toEqual({ id: b.id, added: false, matched: 'unique' })

    const c = await enqueue(t.db, kept, { n: 1 }, { delay: '1h' })
    expect(await cancel(t.db, kept, c.id)).toBe(true)
    expect(await enqueue(t.db, kept, { n: 2 })).toEqual({ id: c.id, added: false, matched: 'unique' })

    const message = await refusal(
      () => defineQueue('bad', { unique: { key: 'k', states: ['waiting', 'scheduled', 'done'] } }),
      'INVALID_OPTION',
    )
    expect(message).toMatch(/unique\.states: must include running: a job moves between waiting, scheduled and running/)
  })

  test(`JOB-25 ${on} enqueueMany: an item whose key a job or an earlier item holds adds nothing; a full queue still answers a held key`, async () => {
    const q = defineQueue<{ userId: number }>('batched', { unique: { key: ['userId'] }, maxWaiting: 3 })
    const held = await enqueue(t.db, q, { userId: 1 })
    const answers = await enqueueMany(t.db, q, [
      { value: { userId: 1 } },
      { value: { userId: 2 }, id: 'two' },
      { value: { userId: 2 }, id: 'again' },
      { value: { userId: 3 }, id: 'plain', unique: false },
      { value: { userId: 2 }, id: 'plain' },
    ])
    expect(answers).toEqual<Enqueued[]>([
      { id: held.id, added: false, matched: 'unique' },
      { id: 'two', added: true },
      { id: 'two', added: false, matched: 'unique' },
      { id: 'plain', added: true },
      { id: 'plain', added: false, matched: 'id' },
    ])
    expect(await queueCounts(t.db, q)).toMatchObject({ waiting: 3 })
    expect(await enqueue(t.db, q, { userId: 2 })).toEqual({ id: 'two', added: false, matched: 'unique' })
    await refusal(() => enqueue(t.db, q, { userId: 4 }), 'QUEUE_FULL')
    await refusal(() => enqueueMany(t.db, q, [{ value: { userId: 1 } }, { value: { userId: 5 } }]), 'QUEUE_FULL')
    expect(await t.count('jobs_job')).toBe(3)
  })

  test(`JOB-25 ${on} bad unique options give INVALID_OPTION or TOO_LARGE and write nothing`, async () => {
    const q = defineQueue<{ userId: number } | number>('checked')
    await refusal(() => enqueue(t.db, q, 7, { unique: { key: ['userId'] } }), 'INVALID_OPTION')
    await refusal(() => enqueue(t.db, q, 7, { unique: { key: () => '' } }), 'INVALID_OPTION')
    await refusal(() => enqueue(t.db, q, 7, { unique: { key: [] } }), 'INVALID_OPTION')
    await refusal(() => enqueue(t.db, q, 7, { unique: { key: 'k', for: 0 } }), 'INVALID_OPTION')
    await refusal(
      () => enqueue(t.db, q, 7, { unique: { key: 'k', states: ['waiting', 'scheduled', 'running', 'gone' as never] } }),
      'INVALID_OPTION',
    )
    await refusal(() => enqueue(t.db, q, 7, { unique: { key: 'k', by: 1 } as never }), 'INVALID_OPTION')
    await refusal(() => enqueue(t.db, q, 7, { unique: { key: 'x'.repeat(1_025) } }), 'TOO_LARGE')
    await refusal(() => enqueue(t.db, q, { userId: 1 }, { unique: { key: (value) => 'x'.repeat(2_000) + String(value) } }), 'TOO_LARGE')
    expect(await t.count('jobs_job')).toBe(0)
  })

  test(`JOB-25 ${on} retryJob of an ended job whose key another job now holds throws UNIQUE_KEY_HELD naming that job, and changes nothing`, async () => {
    const q = defineQueue<{ n: number }>('retried', { unique: { key: 'singleton' } })
    const first = await enqueue(t.db, q, { n: 1 }, { id: 'first', delay: '1h' })
    expect(await cancel(t.db, q, first.id)).toBe(true)
    await enqueue(t.db, q, { n: 2 }, { id: 'second', delay: '1h' })
    const message = await refusal(() => retryJob(t.db, q, 'first'), 'UNIQUE_KEY_HELD')
    expect(message).toMatch(/job 'second' holds its unique key/)
    expect(await state('retried', 'first')).toBe('canceled')
    expect(await cancel(t.db, q, 'second')).toBe(true)
    expect(await retryJob(t.db, q, 'first')).toBe(true)
    expect(await state('retried', 'first')).toBe('waiting')
  })

  if (dialect === 'postgres') {
    test(`JOB-25 ${on} eight racing transactions with one unique key, on eight connections, started together and committing, add exactly one job`, async () => {
      const q = defineQueue<{ racer: number }>('racing', { unique: { key: 'one' } })
      const inTransaction = t.inTransaction!
      let arrived = 0
      let go!: () => void
      const together = new Promise<void>((resolve) => (go = resolve))
      const answers = await Promise.all(
        Array.from({ length: RACERS }, (_, racer) =>
          inTransaction(async (tx, exec) => {
            await exec('select 1')
            if (++arrived === RACERS) go()
            await together
            const answer = await enqueue(tx, q, { racer })
            // Held open after the add: the other transactions wait for this one on the index, then find its job.
            await new Promise((resolve) => setTimeout(resolve, 100))
            return answer
          }),
        ),
      )
      const jobs = await stored('racing')
      expect(jobs).toHaveLength(1)
      const added = answers.filter((answer) => answer.added)
      expect(added).toEqual([{ id: jobs[0]!.id, added: true }])
      expect(answers.filter((answer) => !answer.added)).toEqual(
        Array.from({ length: RACERS - 1 }, () => ({ id: jobs[0]!.id, added: false, matched: 'unique' })),
      )
      expect(await queueCounts(t.db, q)).toMatchObject({ waiting: 1 })
    })

    test(`JOB-25 ${on} a retry racing an add of its job's key: the add that commits first wins, and the retry throws UNIQUE_KEY_HELD`, async () => {
      const q = defineQueue<{ n: number }>('retry-race', { unique: { key: 'singleton' } })
      await enqueue(t.db, q, { n: 1 }, { id: 'first', delay: '1h' })
      expect(await cancel(t.db, q, 'first')).toBe(true)
      let added!: () => void
      const addedNotCommitted = new Promise<void>((resolve) => (added = resolve))
      let commit!: () => void
      const committing = new Promise<void>((resolve) => (commit = resolve))
      const adding = t.inTransaction!(async (tx) => {
        await enqueue(tx, q, { n: 2 }, { id: 'second' })
        added()
        await committing
      })
      await addedNotCommitted
      const retrying = refusal(() => retryJob(t.db, q, 'first'), 'UNIQUE_KEY_HELD')
      // The retry waits on the index for the add's transaction.
      await new Promise((resolve) => setTimeout(resolve, 200))
      commit()
      await adding
      expect(await retrying).toMatch(/another job, added meanwhile, holds its unique key/)
      expect(await state('retry-race', 'first')).toBe('canceled')
      expect(await state('retry-race', 'second')).toBe('waiting')
    })
  }
})

describe.each(PROCESS_DATABASES)('%s', (dialect) => {
  const { t } = eachContractDb(dialect)

  test(
    `JOB-25 [${dialect}] eight racing transactions with one unique key, in eight processes started together, add exactly one job`,
    async () => {
      const children = Array.from({ length: RACERS }, () => startFixture('racing-add.ts', [t.address]))
      await started(children, 'ready', 'the eight producer processes to start')
      for (const child of children) child.process.kill('SIGUSR2')
      const exits = await Promise.all(children.map((child) => child.exited))
      expect(exits).toEqual(Array.from({ length: RACERS }, () => 0))
      const answers = children.map((child) => JSON.parse(child.output().trim().split('\n').at(-1)!) as Enqueued)
      const jobs = await t.query<{ id: string; unique_key: string; value: unknown }>(
        `select id, unique_key, value from jobs_job where queue = 'digests'`,
      )
      expect(jobs).toHaveLength(1)
      expect(jobs[0]!.unique_key).toBe('user:1')
      expect(answers.filter((answer) => answer.added)).toEqual([{ id: jobs[0]!.id, added: true }])
      expect(answers.filter((answer) => !answer.added)).toEqual(
        Array.from({ length: RACERS - 1 }, () => ({ id: jobs[0]!.id, added: false, matched: 'unique' })),
      )
    },
    STARTUP_MS + 60_000,
  )
})
