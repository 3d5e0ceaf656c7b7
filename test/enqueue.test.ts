import Database from 'better-sqlite3'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { sqliteTable, integer, text } from 'drizzle-orm/sqlite-core'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { defineQueue, enqueue, enqueueMany, JobsError, work, type JobsErrorCode } from '../src/index.js'
import { freshDb, removeTempDirs, tempDir, type TestDb } from './helpers/db.js'
import { count, dump, jobRow } from './helpers/rows.js'
import { waitFor } from './helpers/wait.js'
import { join } from 'node:path'

const notes = sqliteTable('notes', { id: integer('id').primaryKey(), text: text('text').notNull() })
const replies = defineQueue<{ messageId: number }>('replies')

let t: TestDb
beforeEach(() => {
  t = freshDb()
  t.client.exec('create table notes (id integer primary key, text text not null)')
})
afterEach(() => {
  t.close()
  removeTempDirs()
})

function refusal(call: () => unknown): JobsErrorCode {
  try {
    call()
  } catch (error) {
    expect(error).toBeInstanceOf(JobsError)
    return (error as JobsError).code
  }
  throw new Error('the call was not refused')
}

describe('enqueue in the app transaction', () => {
  test('JOB-02 a job added in a transaction commits with it', () => {
    const id = t.db.transaction((tx) => {
      const note = tx.insert(notes).values({ text: 'hello' }).returning().get()
      return enqueue(tx, replies, { messageId: note.id }, { id: `reply:${note.id}` }).id
    })
    expect(id).toBe('reply:1')
    expect(jobRow(t.client, 'reply:1')).toMatchObject({ state: 'waiting', value: '{"messageId":1}', attempts: 0, max_attempts: 10 })
    expect(count(t.client, 'notes')).toBe(1)
  })

  test('JOB-02 a job added in a transaction that rolls back is not there, nor is the app row', () => {
    expect(() =>
      t.db.transaction((tx) => {
        tx.insert(notes).values({ text: 'hello' }).run()
        enqueue(tx, replies, { messageId: 1 }, { id: 'gone' })
        enqueueMany(tx, replies, [{ value: { messageId: 2 } }, { value: { messageId: 3 } }])
        throw new Error('the app changes its mind')
      }),
    ).toThrow('the app changes its mind')
    expect(count(t.client, 'notes')).toBe(0)
    expect(count(t.client, 'jobs_job')).toBe(0)
    expect(t.client.prepare('select waiting from jobs_queue').all()).toEqual([])
  })

  test('JOB-02 tx.rollback() takes the job back too', () => {
    try {
      t.db.transaction((tx) => {
        enqueue(tx, replies, { messageId: 1 })
        tx.rollback()
      })
    } catch {
      // drizzle signals the rollback by throwing
    }
    expect(count(t.client, 'jobs_job')).toBe(0)
  })

  test('JOB-02 the counting triggers that an add installs roll back with its transaction, and the next add installs them again', () => {
    const triggers = () => t.client.prepare(`select count(*) from sqlite_master where type = 'trigger'`).pluck().get()
    expect(triggers()).toBe(0)
    expect(() =>
      t.db.transaction((tx) => {
        enqueue(tx, replies, { messageId: 1 })
        expect(triggers()).toBeGreaterThan(0)
        throw new Error('the app changes its mind')
      }),
    ).toThrow('the app changes its mind')
    expect(triggers()).toBe(0)
    t.db.transaction((tx) => {
      enqueue(tx, replies, { messageId: 2 })
      enqueue(tx, replies, { messageId: 3 })
    })
    expect(triggers()).toBeGreaterThan(0)
    // Another program's row is counted by the triggers.
    t.client.prepare(`insert into jobs_job (queue, value) values ('replies', '{}')`).run()
    expect(t.client.prepare(`select waiting from jobs_queue where name = 'replies'`).pluck().get()).toBe(3)
  })

  test('JOB-03 a second add with an id the queue holds adds nothing and says so, whatever the state', async () => {
    expect(enqueue(t.db, replies, { messageId: 1 }, { id: 'once' })).toEqual({ id: 'once', added: true })
    expect(enqueue(t.db, replies, { messageId: 2 }, { id: 'once' })).toEqual({ id: 'once', added: false, matched: 'id' })
    expect(jobRow(t.client, 'once')!.value).toBe('{"messageId":1}')
    // The same id in another queue is another job.
    expect(enqueue(t.db, defineQueue('other'), { messageId: 3 }, { id: 'once' }).added).toBe(true)
    const worker = work(t.db, replies, () => 'ok')
    await waitFor(() => jobRow(t.client, 'once', 'replies')?.state === 'done', 'the job to be done')
    await worker.stop()
    expect(enqueue(t.db, replies, { messageId: 4 }, { id: 'once' })).toEqual({ id: 'once', added: false, matched: 'id' })
    expect(
      enqueueMany(t.db, replies, [
        { value: { messageId: 5 }, id: 'once' },
        { value: { messageId: 6 }, id: 'fresh' },
      ]),
    ).toEqual([
      { id: 'once', added: false, matched: 'id' },
      { id: 'fresh', added: true },
    ])
    expect(jobRow(t.client, 'once', 'replies')).toMatchObject({ state: 'done', value: '{"messageId":1}' })
  })

  test('JOB-03 a batch across many statements adds each id once: taken ids and repeats answer added: false, in order', () => {
    enqueueMany(t.db, replies, [
      { value: { messageId: 0 }, id: 'taken-5' },
      { value: { messageId: 0 }, id: 'taken-150' },
    ])
    // 233 items: statements of 100, 100, 10, 10, 10 and 1s; a taken id and a repeat in several of them.
    const ids = Array.from({ length: 233 }, (_, i) =>
      i === 5 ? 'taken-5' : i === 150 ? 'taken-150' : i === 120 || i === 231 ? 'item-7' : `item-${i}`,
    )
    const answers = enqueueMany(
      t.db,
      replies,
      ids.map((id, i) => ({ value: { messageId: i }, id })),
    )
    expect(answers).toEqual(
      ids.map((id, i) => ([5, 150, 120, 231].includes(i) ? { id, added: false, matched: 'id' } : { id, added: true })),
    )
    expect(count(t.client, 'jobs_job')).toBe(2 + 229)
    expect(jobRow(t.client, 'item-7')!.value).toBe('{"messageId":7}')
    expect(t.client.prepare(`select waiting from jobs_queue where name = 'replies'`).pluck().get()).toBe(231)
  })

  test('ids are generated when absent, and options land in their columns', () => {
    const before = Date.now()
    const { id } = enqueue(t.db, replies, { messageId: 1 }, { group: 'chat:7', priority: -3, delay: '1h' })
    expect(id).toMatch(/^[0-9a-f-]{36}$/)
    const row = jobRow(t.client, id)!
    expect(row).toMatchObject({ grp: 'chat:7', priority: -3, state: 'scheduled' })
    expect(row.run_at - row.created_at).toBe(3_600_000)
    expect(row.created_at).toBeGreaterThanOrEqual(before)
    const at = new Date(Date.now() + 60_000)
    expect(jobRow(t.client, enqueue(t.db, replies, { messageId: 2 }, { runAt: at }).id)).toMatchObject({
      state: 'scheduled',
      run_at: at.getTime(),
    })
    expect(jobRow(t.client, enqueue(t.db, replies, { messageId: 3 }, { runAt: 0 }).id)).toMatchObject({ state: 'waiting', run_at: 0 })
    expect(t.client.prepare('select waiting, scheduled from jobs_queue where name = ?').get('replies')).toEqual({
      waiting: 1,
      scheduled: 2,
    })
  })
})

describe('JOB-13 limits and bad input give a JobsError with its code and write nothing', () => {
  const cycle: Record<string, unknown> = {}
  cycle.self = cycle
  const badValues: Array<[string, unknown]> = [
    ['a BigInt', { n: 1n }],
    ['a cycle', cycle],
    ['a function', { f: () => 1 }],
    ['a symbol', { s: Symbol('x') }],
    ['NaN', { n: Number.NaN }],
    ['Infinity', [Number.POSITIVE_INFINITY]],
    ['top-level undefined', undefined],
    ['a Date', { at: new Date() }],
    ['a Map', new Map()],
    ['an array hole', Object.assign([1], { 2: 3 })],
  ]

  test.each(badValues)('JOB-13 a value with %s is INVALID_VALUE', (_, value) => {
    const before = dump(t.client)
    expect(refusal(() => enqueue(t.db, replies, value as never))).toBe('INVALID_VALUE')
    expect(dump(t.client)).toEqual(before)
  })

  test('JOB-13 sizes past the limits are TOO_LARGE; bad options are INVALID_OPTION', () => {
    enqueue(t.db, replies, { messageId: 0 })
    const before = dump(t.client)
    const big = { text: 'x'.repeat(1024 * 1024) }
    expect(refusal(() => enqueue(t.db, replies, big as never))).toBe('TOO_LARGE')
    // 1 MiB of JSON exactly is allowed: the limit is inclusive.
    const exact = 'x'.repeat(1024 * 1024 - 2)
    expect(() => enqueue(t.db, defineQueue<string>('exact'), exact)).not.toThrow()
    t.client.prepare(`delete from jobs_job where queue = 'exact'`).run()
    t.client.prepare(`delete from jobs_queue where name = 'exact'`).run()
    expect(refusal(() => enqueue(t.db, replies, { messageId: 1 }, { id: 'é'.repeat(513) }))).toBe('TOO_LARGE')
    expect(refusal(() => enqueue(t.db, replies, { messageId: 1 }, { group: 'g'.repeat(1025) }))).toBe('TOO_LARGE')
    expect(refusal(() => enqueue(t.db, replies, { messageId: 1 }, { id: '' }))).toBe('INVALID_OPTION')
    expect(refusal(() => enqueue(t.db, replies, { messageId: 1 }, { id: 7 as never }))).toBe('INVALID_OPTION')
    expect(refusal(() => enqueue(t.db, replies, { messageId: 1 }, { priority: 1.5 }))).toBe('INVALID_OPTION')
    expect(refusal(() => enqueue(t.db, replies, { messageId: 1 }, { delay: 'soon' as never }))).toBe('INVALID_OPTION')
    expect(refusal(() => enqueue(t.db, replies, { messageId: 1 }, { delay: -5 }))).toBe('INVALID_OPTION')
    expect(refusal(() => enqueue(t.db, replies, { messageId: 1 }, { delay: 5, runAt: 5 }))).toBe('INVALID_OPTION')
    expect(refusal(() => enqueue(t.db, replies, { messageId: 1 }, { runAt: new Date('nope') }))).toBe('INVALID_OPTION')
    expect(refusal(() => enqueue(t.db, replies, { messageId: 1 }, { colour: 'red' } as never))).toBe('INVALID_OPTION')
    expect(refusal(() => enqueueMany(t.db, replies, [{ value: { messageId: 1 } }, { value: { messageId: 2n } as never }]))).toBe(
      'INVALID_VALUE',
    )
    expect(refusal(() => enqueue({} as never, replies, { messageId: 1 }))).toBe('INVALID_OPTION')
    expect(dump(t.client)).toEqual(before)
  })

  test('JOB-13 QUEUE_FULL past maxWaiting, answered from the counters, not by counting rows', () => {
    const small = defineQueue<number>('small', { maxWaiting: 3 })
    enqueueMany(t.db, small, [{ value: 1 }, { value: 2 }, { value: 3, delay: '1h' }])
    const before = dump(t.client)
    expect(refusal(() => enqueue(t.db, small, 4))).toBe('QUEUE_FULL')
    expect(refusal(() => enqueueMany(t.db, small, [{ value: 5 }]))).toBe('QUEUE_FULL')
    // A duplicate id of a full queue is still just "not added".
    const existing = (t.client.prepare(`select id from jobs_job where queue = 'small' limit 1`).get() as { id: string }).id
    expect(enqueue(t.db, small, 6, { id: existing })).toEqual({ id: existing, added: false, matched: 'id' })
    expect(dump(t.client)).toEqual(before)
    // The counters decide: a queue whose counter says it is full refuses even with no rows.
    const counted = defineQueue<number>('counted', { maxWaiting: 5 })
    t.client.prepare(`insert into jobs_queue (name, waiting) values ('counted', 5)`).run()
    expect(refusal(() => enqueue(t.db, counted, 1))).toBe('QUEUE_FULL')
    expect(count(t.client, 'jobs_job', `queue = 'counted'`)).toBe(0)
  })

  test("JOB-13 a refused call leaves the caller's transaction usable, and its other writes commit", () => {
    const small = defineQueue<number>('small', { maxWaiting: 1 })
    t.db.transaction((tx) => {
      tx.insert(notes).values({ text: 'kept' }).run()
      enqueue(tx, small, 1, { id: 'kept' })
      expect(refusal(() => enqueue(tx, small, 2))).toBe('QUEUE_FULL')
      expect(
        refusal(() =>
          enqueueMany(tx, small, [
            { value: 3, id: 'a' },
            { value: 4, id: 'b' },
          ]),
        ),
      ).toBe('QUEUE_FULL')
      expect(refusal(() => enqueue(tx, replies, { messageId: 1n } as never))).toBe('INVALID_VALUE')
      tx.insert(notes).values({ text: 'after the refusals' }).run()
    })
    expect(count(t.client, 'notes')).toBe(2)
    expect(t.client.prepare('select id from jobs_job').pluck().all()).toEqual(['kept'])
  })

  test('JOB-13 defineQueue refuses bad options, naming the option', () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ attempts: 0 }, /^attempts/],
      [{ attempts: 2.5 }, /^attempts/],
      [{ backoff: { initial: 'later' } }, /^backoff.initial/],
      [{ backoff: { max: -1 } }, /^backoff.max/],
      [{ backoff: { jitter: 1 } }, /^backoff.jitter/],
      [{ concurrency: 0 }, /^concurrency/],
      [{ concurrency: { total: 2, perGroup: -1 } }, /^concurrency.perGroup/],
      [{ timeout: '0ms' }, /^timeout/],
      [{ timeout: '1y' }, /^timeout/],
      [{ maxWaiting: Number.POSITIVE_INFINITY }, /^maxWaiting/],
      [{ retention: { done: 'forever' } }, /^retention.done/],
      [{ retrys: 3 }, /^retrys/],
    ]
    for (const [options, message] of cases) {
      let caught: unknown
      try {
        defineQueue('q', options as never)
      } catch (error) {
        caught = error
      }
      expect(caught, JSON.stringify(options)).toBeInstanceOf(JobsError)
      expect((caught as JobsError).code).toBe('INVALID_OPTION')
      expect((caught as JobsError).message).toMatch(message)
    }
    expect(refusal(() => defineQueue(''))).toBe('INVALID_OPTION')
    expect(refusal(() => defineQueue('q'.repeat(1025)))).toBe('TOO_LARGE')
  })

  test('defaults and durations of defineQueue', () => {
    expect(defineQueue('d')).toMatchObject({
      attempts: 10,
      backoff: { initialMs: 1_000, maxMs: 3_600_000 },
      concurrency: { total: null, perGroup: null },
      timeoutMs: 60_000,
      maxWaiting: 10_000_000,
      retentionMs: { done: 86_400_000, failed: 604_800_000, canceled: 86_400_000 },
    })
    expect(defineQueue('e', { backoff: { initial: '500ms', max: '10m' }, concurrency: 4, timeout: 1500 })).toMatchObject({
      backoff: { initialMs: 500, maxMs: 600_000 },
      concurrency: { total: 4, perGroup: null },
      timeoutMs: 1500,
    })
  })

  test('JOB-13 defineQueue refuses an array of options, and a backoff whose initial wait is above its max', () => {
    expect(refusal(() => defineQueue('x', [] as never))).toBe('INVALID_OPTION')
    for (const backoff of [{ initial: '1h', max: '1s' }, { initial: '2h' }, { max: '500ms' }]) {
      let caught: unknown
      try {
        defineQueue('x', { backoff } as never)
      } catch (error) {
        caught = error
      }
      expect(caught, JSON.stringify(backoff)).toBeInstanceOf(JobsError)
      expect((caught as JobsError).code).toBe('INVALID_OPTION')
      expect((caught as JobsError).message).toMatch(/^backoff.initial: .* is above backoff.max/)
    }
    expect(defineQueue('x', { backoff: { initial: '1s', max: '1s' } }).backoff).toEqual({ initialMs: 1_000, maxMs: 1_000 })
  })

  test('JOB-13 priority: null, a value nested 10,000 deep, a throwing getter or a Proxy are refused, writing nothing, the transaction still usable', () => {
    let deep: unknown = 1
    for (let i = 0; i < 10_000; i++) deep = [deep]
    let deepObject: unknown = null
    for (let i = 0; i < 10_000; i++) deepObject = { next: deepObject }
    const boom = new Error('the getter failed')
    const getter = {
      get n() {
        throw boom
      },
    }
    const trap = new Error('the trap failed')
    const proxy = new Proxy(
      { n: 1 },
      {
        ownKeys: () => {
          throw trap
        },
      },
    )
    const revocable = Proxy.revocable({ n: 1 }, {})
    revocable.revoke()
    const cases: Array<[string, () => unknown, JobsErrorCode, unknown]> = [
      ['priority: null', () => enqueue(t.db, replies, { messageId: 1 }, { priority: null as never }), 'INVALID_OPTION', undefined],
      ['an array 10,000 deep', () => enqueue(t.db, replies, deep as never), 'INVALID_VALUE', undefined],
      ['an object 10,000 deep', () => enqueue(t.db, replies, deepObject as never), 'INVALID_VALUE', undefined],
      ['a throwing getter', () => enqueue(t.db, replies, getter as never), 'INVALID_VALUE', boom],
      ['a Proxy whose trap throws', () => enqueue(t.db, replies, proxy as never), 'INVALID_VALUE', trap],
      ['a revoked Proxy', () => enqueue(t.db, replies, { inner: revocable.proxy } as never), 'INVALID_VALUE', expect.any(TypeError)],
      [
        'a throwing getter in a batch',
        () => enqueueMany(t.db, replies, [{ value: { messageId: 1 } }, { value: getter as never }]),
        'INVALID_VALUE',
        boom,
      ],
    ]
    for (const [what, call, code, cause] of cases) {
      const before = dump(t.client)
      t.db.transaction((tx) => {
        tx.insert(notes)
          .values({ text: `before ${what}` })
          .run()
        let caught: unknown
        try {
          call()
        } catch (error) {
          caught = error
        }
        expect(caught, what).toBeInstanceOf(JobsError)
        expect((caught as JobsError).code, what).toBe(code)
        if (cause !== undefined) expect((caught as JobsError).cause, what).toEqual(cause)
        tx.insert(notes)
          .values({ text: `after ${what}` })
          .run()
      })
      const after = dump(t.client)
      expect(after.jobs_job, what).toEqual(before.jobs_job)
      expect(after.jobs_queue, what).toEqual(before.jobs_queue)
      expect(count(t.client, 'notes', `text in ('before ${what}', 'after ${what}')`), what).toBe(2)
    }
    // 1,000 arrays and objects nested are kept, as deep as SQLite's JSON functions read; one more is refused.
    let kept: unknown = 1
    for (let i = 0; i < 1_000; i++) kept = i % 2 ? [kept] : { kept }
    expect(enqueue(t.db, replies, kept as never, { id: 'deep' }).added).toBe(true)
    expect(refusal(() => enqueue(t.db, replies, [kept] as never))).toBe('INVALID_VALUE')
  })

  test('JOB-13 durations only compared with times may be years; durations a timer waits on are capped at about 24.8 days', () => {
    const day = 86_400_000
    const long = defineQueue<number>('long', {
      backoff: { initial: '1d', max: '400d' },
      retention: { done: '400d', failed: '30d', canceled: '3650d' },
    })
    expect(long).toMatchObject({
      backoff: { initialMs: day, maxMs: 400 * day },
      retentionMs: { done: 400 * day, failed: 30 * day, canceled: 3650 * day },
    })
    const before = Date.now()
    enqueue(t.db, long, 1, { id: 'next-year', delay: '400d' })
    expect(jobRow(t.client, 'next-year')).toMatchObject({ state: 'scheduled' })
    expect(jobRow(t.client, 'next-year')!.run_at).toBeGreaterThanOrEqual(before + 400 * day)
    expect(jobRow(t.client, 'next-year')!.run_at).toBeLessThanOrEqual(Date.now() + 400 * day)

    const rows = dump(t.client)
    for (const options of [{ timeout: '30d' }, { timeout: 2 ** 31 }]) {
      let caught: unknown
      try {
        defineQueue('timer', options as never)
      } catch (error) {
        caught = error
      }
      expect(caught).toBeInstanceOf(JobsError)
      expect((caught as JobsError).code).toBe('INVALID_OPTION')
      expect((caught as JobsError).message).toMatch(/^timeout: .*timer/)
    }
    expect(refusal(() => work(t.db, long, () => {}, { lease: '30d' }))).toBe('INVALID_OPTION')
    expect(refusal(() => work(t.db, long, () => {}, { pollInterval: '25d' }))).toBe('INVALID_OPTION')
    // A time past the range of a Date is no time: such a delay is refused, as such a runAt is.
    expect(refusal(() => enqueue(t.db, long, 2, { delay: '100000000d' }))).toBe('INVALID_OPTION')
    expect(refusal(() => defineQueue('too-long', { retention: { done: '100000001d' } }))).toBe('INVALID_OPTION')
    expect(dump(t.client)).toEqual(rows)
  })

  test('JOB-13 SCHEMA_MISSING says which command to run', () => {
    const client = new Database(join(tempDir(), 'bare.db'))
    const db = drizzle(client)
    let caught: unknown
    try {
      enqueue(db, replies, { messageId: 1 })
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(JobsError)
    expect((caught as JobsError).code).toBe('SCHEMA_MISSING')
    expect((caught as JobsError).message).toMatch(
      /^table jobs_queue, jobs_job, jobs_step, jobs_lease, jobs_schedule are missing: .*drizzle-kit generate.*drizzle-kit migrate/,
    )
    expect(refusal(() => work(db, replies, () => {}))).toBe('SCHEMA_MISSING')
    client.close()
  })

  test('JOB-13 SCHEMA_MISSING on a database in memory says so: the tables of a migrated file are not there, and the file is opened by its path', () => {
    const client = new Database(':memory:')
    const db = drizzle({ client })
    expect(() => enqueue(db, replies, { messageId: 1 })).toThrow(
      expect.objectContaining({
        code: 'SCHEMA_MISSING',
        message: expect.stringMatching(
          /^table jobs_queue, jobs_job, jobs_step, jobs_lease, jobs_schedule are missing: the database is in memory, .*open that file by its path.*`drizzle\(\{ client \}\)`/,
        ),
      }),
    )
    expect(refusal(() => work(db, replies, () => {}))).toBe('SCHEMA_MISSING')
    client.close()
  })

  test('JOB-13 SCHEMA_MISSING names every table that is missing, the schedules table included', () => {
    const partial = freshDb('partial.db')
    partial.client.exec('drop table jobs_schedule; drop table jobs_step')
    const reopened = partial.reopen()
    expect(() => enqueue(reopened.db, replies, { messageId: 1 })).toThrow(
      expect.objectContaining({ code: 'SCHEMA_MISSING', message: expect.stringMatching(/^table jobs_step, jobs_schedule are missing: /) }),
    )
    partial.close()
  })
})
