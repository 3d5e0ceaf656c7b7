/**
 * Bad input, property-based (JOB-13): random queue options, ids, groups,
 * values, durations, step names and answers, progress values and outcomes
 * thrown at the API. Every case carries what the docs say should happen; a
 * refusal must be a JobsError with that code, must write nothing, and must
 * leave the caller's transaction usable; an accepted input must be kept
 * exactly as given.
 */
import fc from 'fast-check'
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { defineQueue, enqueue, enqueueMany, JobsError, work, type JobsErrorCode, type Json, type Run, type Worker } from '../src/index.js'
import { freshDb, removeTempDirs, type TestDb } from './helpers/db.js'
import { waitFor } from './reliability/processes.js'

const MAX_NAME_BYTES = 1024
const MAX_VALUE_BYTES = 1024 * 1024
const MAX_PROGRESS_BYTES = 4 * 1024
/** Durations a timer waits on (a timeout, a lease, a poll interval): about 24.8 days. */
const MAX_TIMER_MS = 2 ** 31 - 1
/** Durations only compared with times (a delay, a backoff, a retention): the span of a Date. */
const MAX_DURATION_MS = 8.64e15
const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const
/** Counts stored in an integer column (attempts, limits): at most PostgreSQL's integer, on both databases. */
const MAX_STORED_INT = 2 ** 31 - 1
/** The earliest time PostgreSQL stores, 4714-11-24 BC, in ms since the epoch: the earliest runAt on both databases. */
const MIN_STORED_TIME_MS = -210_866_803_200_000

/**
 * An input, and what the contract says of it: the value it stands for, or the codes a refusal may carry.
 * Values are cast to Json where they are passed: the properties feed values the compiler would refuse, to test the checks at run time.
 */
type Case<T> = { input: T; ok: true; expected?: unknown } | { input: T; ok: false; codes: JobsErrorCode[] }
const ok = <T>(input: T, expected?: unknown): Case<T> => ({ input, ok: true, expected })
const refused = <T>(input: T, ...codes: JobsErrorCode[]): Case<T> => ({ input, ok: false, codes })

/** Calls `call`, answering its result or the JobsError it threw; any other throw fails the test. */
function attempt<T>(call: () => T): { value: T } | { error: JobsError } {
  try {
    return { value: call() }
  } catch (error) {
    if (!(error instanceof JobsError)) throw new Error(`not a JobsError: ${String(error)}`, { cause: error })
    return { error }
  }
}

// Durations: a number of ms or '<number><unit>', from 0 to the longest of their kind; anything else is INVALID_OPTION.
function durationOf(max: number): fc.Arbitrary<Case<unknown>> {
  const measured = (input: unknown, ms: number): Case<unknown> => (ms > max ? refused(input, 'INVALID_OPTION') : ok(input, Math.round(ms)))
  const valid = fc.oneof(
    fc.integer({ min: 0, max: MAX_TIMER_MS }).map((ms) => measured(ms, ms)),
    fc
      .tuple(fc.integer({ min: 0, max: 500 }), fc.constantFrom(...(Object.keys(UNIT_MS) as (keyof typeof UNIT_MS)[])))
      .map(([n, unit]) => measured(`${n}${unit}`, n * UNIT_MS[unit])),
    fc.double({ min: 0, max: 10_000, noNaN: true }).map((ms) => measured(ms, ms)),
  )
  const long = fc.oneof(
    fc.integer({ min: 25, max: 100_000 }).map((days) => measured(`${days}d`, days * UNIT_MS.d)),
    fc.constantFrom(MAX_TIMER_MS + 1, MAX_DURATION_MS, MAX_DURATION_MS + 1).map((ms) => measured(ms, ms)),
    fc.constantFrom(100_000_000, 100_000_001).map((days) => measured(`${days}d`, days * UNIT_MS.d)),
  )
  const invalid = fc
    .constantFrom(
      -1,
      -0.5,
      Number.NaN,
      Infinity,
      -Infinity,
      1e300,
      '',
      'soon',
      '5 years',
      '-5s',
      '5x',
      's',
      'NaN',
      '1h30',
      null,
      true,
      {},
      [],
      10n,
    )
    .map((v) => refused(v, 'INVALID_OPTION'))
  return fc.oneof(valid, long, invalid)
}
const duration = durationOf(MAX_DURATION_MS)
const positiveTimerDuration = durationOf(MAX_TIMER_MS).map((c) => (c.ok && c.expected === 0 ? refused(c.input, 'INVALID_OPTION') : c))

// Names (queue names, ids, groups, step names): strings of 1 to 1,024 bytes of UTF-8.
const validName: fc.Arbitrary<Case<unknown>> = fc
  .oneof(
    fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }),
    fc.string({ unit: 'binary', minLength: 240, maxLength: 400 }),
    fc.integer({ min: 1, max: MAX_NAME_BYTES }).map((n) => 'n'.repeat(n)),
  )
  .map((name) =>
    Buffer.byteLength(name) > MAX_NAME_BYTES
      ? refused(name, 'TOO_LARGE')
      : name.includes('\u0000')
        ? refused(name, 'INVALID_OPTION')
        : ok(name, name),
  )
const invalidName: fc.Arbitrary<Case<unknown>> = fc.oneof(
  fc.constantFrom('', 0, 1, null, true, {}, [], ['a'], 10n, Symbol('id')).map((v) => refused(v, 'INVALID_OPTION')),
  fc.integer({ min: MAX_NAME_BYTES + 1, max: 3 * MAX_NAME_BYTES }).map((n) => refused('x'.repeat(n), 'TOO_LARGE')),
  fc.integer({ min: 342, max: 600 }).map((n) => refused('€'.repeat(n), 'TOO_LARGE')),
)
const name = fc.oneof({ arbitrary: validName, weight: 3 }, { arbitrary: invalidName, weight: 1 })

// Values: JSON that round-trips, at most 1 MiB; or a JSON container with one part JSON cannot keep.
const badLeaf: fc.Arbitrary<unknown> = fc.constantFrom(
  10n,
  Number.NaN,
  Infinity,
  -Infinity,
  () => 1,
  Symbol('s'),
  new Date(0),
  new Map(),
  new Set([1]),
  new (class Point {})(),
  /re/,
)
const validValue: fc.Arbitrary<Case<unknown>> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }).map((v) => ok(v, JSON.parse(JSON.stringify(v)))),
  fc.constantFrom('\uD83D\uDE00', { '\uD83D\uDE00': ['é€'] }).map((v) => ok(v, v)),
)
const invalidValue: fc.Arbitrary<Case<unknown>> = fc.oneof(
  badLeaf.map((leaf) => refused(leaf, 'INVALID_VALUE')),
  fc
    .tuple(fc.jsonValue({ maxDepth: 2 }), fc.string(), badLeaf)
    .map(([v, key, leaf]) => refused({ ok: v, [key]: { deep: [1, leaf] } }, 'INVALID_VALUE')),
  fc.jsonValue({ maxDepth: 2 }).map((v) => refused([v, undefined], 'INVALID_VALUE')),
  fc.constant(null).map(() => {
    const cycle: Record<string, unknown> = { a: 1 }
    cycle.self = { back: cycle }
    return refused(cycle, 'INVALID_VALUE')
  }),
  fc.constant(refused(undefined, 'INVALID_VALUE')),
  fc.constant(refused(Object.assign([1], { 2: 3 }), 'INVALID_VALUE')),
  // Text PostgreSQL's jsonb cannot store, refused on SQLite too: U+0000, and lone surrogates (a whole pair is text).
  fc
    .constantFrom('\u0000', 'a\uD800', '\uDC00b', ['\uD83D'], { k: 'x\uDFFFy' }, { '\uD800': 1 }, { 'k\u0000': 1 })
    .map((v) => refused(v, 'INVALID_VALUE')),
)
/** Strings near the 1 MiB limit, ASCII and two-byte: the JSON text's quotes count. */
const limitValue: fc.Arbitrary<Case<unknown>> = fc.noShrink(
  fc.tuple(fc.integer({ min: -2, max: 2 }), fc.boolean()).map(([offset, wide]) => {
    const value = wide ? 'é'.repeat((MAX_VALUE_BYTES - 2) / 2 + offset) : 'x'.repeat(MAX_VALUE_BYTES - 2 + offset)
    return Buffer.byteLength(JSON.stringify(value)) > MAX_VALUE_BYTES ? refused(value, 'TOO_LARGE') : ok(value, value)
  }),
)
const value = fc.oneof({ arbitrary: validValue, weight: 4 }, { arbitrary: invalidValue, weight: 2 }, { arbitrary: limitValue, weight: 1 })

const priority: fc.Arbitrary<Case<unknown>> = fc.oneof(
  fc.integer({ min: -1_000_000, max: 1_000_000 }).map((p) => ok(p, p)),
  fc.constantFrom(Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER).map((p) => ok(p, p)),
  fc
    .constantFrom(null, 0.5, -1.25, Number.NaN, Infinity, Number.MAX_SAFE_INTEGER + 2, '1', true, 10n)
    .map((p) => refused(p, 'INVALID_OPTION')),
)
const runAt: fc.Arbitrary<Case<unknown>> = fc.oneof(
  fc.integer({ min: 0, max: 4_102_444_800_000 }).map((ms) => ok(ms, ms)),
  fc.integer({ min: 0, max: 4_102_444_800_000 }).map((ms) => ok(new Date(ms), ms)),
  // From the earliest time PostgreSQL stores (4714-11-24 BC), refused on SQLite too, to the latest a Date holds.
  fc.constantFrom(MIN_STORED_TIME_MS, 8.64e15).map((ms) => ok(ms, ms)),
  fc
    .constantFrom(
      Number.NaN,
      Infinity,
      '2030-01-01',
      null,
      {},
      new Date(Number.NaN),
      MIN_STORED_TIME_MS - 1,
      new Date(-8.64e15),
      8.64e15 + 1,
    )
    .map((v) => refused(v, 'INVALID_OPTION')),
)

/**
 * Every row of the queue's tables, as "nothing written" compares them: values by length and head (they may be
 * 1 MiB each), the runs' leases (their owner and attempt) without the worker's row, whose expiry renewals move.
 */
function jobsTables(t: TestDb): unknown {
  return {
    job: t.client
      .prepare(`select seq, queue, id, grp, length(value) as valueLength, substr(value, 1, 64) as valueHead, state, priority, attempts,
                max_attempts, run_at, created_at, finished_at, error, result from jobs_job order by seq`)
      .all(),
    step: t.client.prepare('select * from jobs_step order by job, name').all(),
    queue: t.client.prepare('select * from jobs_queue order by name').all(),
    lease: t.client.prepare('select seq, queue, grp, owner, attempts from jobs_job where owner is not null order by seq').all(),
  }
}

const notes = sqliteTable('notes', { id: integer('id').primaryKey(), text: text('text').notNull() })

let t: TestDb
beforeAll(() => {
  t = freshDb()
  t.client.exec('create table notes (id integer primary key, text text not null)')
})
afterAll(() => {
  t.close()
  removeTempDirs()
})

describe('JOB-13 defineQueue and work with random options', () => {
  const queueOptions = fc.record(
    {
      attempts: fc.oneof(
        fc.integer({ min: 1, max: 1000 }).map((n) => ok(n, n)),
        fc.constant(MAX_STORED_INT).map((n) => ok(n, n)),
        fc
          .constantFrom(0, -1, 1.5, Number.NaN, '3', null, MAX_STORED_INT + 1, Number.MAX_SAFE_INTEGER)
          .map((v) => refused(v, 'INVALID_OPTION')),
      ),
      backoff: fc.record({ initial: duration, max: duration }, { requiredKeys: [] }),
      concurrency: fc.oneof(
        fc.integer({ min: 1, max: 50 }).map((n) => ok(n, { total: n, perGroup: null })),
        fc.record({ total: fc.integer({ min: 1, max: 50 }), perGroup: fc.integer({ min: 1, max: 5 }) }).map((c) => ok(c, c)),
        fc.constant(MAX_STORED_INT).map((n) => ok(n, { total: n, perGroup: null })),
        fc
          .constantFrom(
            0,
            -2,
            1.5,
            'many',
            { total: 0 },
            { perGroup: -1 },
            { each: 2 },
            [],
            MAX_STORED_INT + 1,
            { total: MAX_STORED_INT + 1 },
            { perGroup: 2 ** 40 },
          )
          .map((v) => refused(v, 'INVALID_OPTION')),
      ),
      timeout: positiveTimerDuration,
      maxWaiting: fc.oneof(
        fc.integer({ min: 1, max: 10_000_000 }).map((n) => ok(n, n)),
        fc.constantFrom(0, -5, 2.5, '10').map((v) => refused(v, 'INVALID_OPTION')),
      ),
      retention: fc.record({ done: duration, failed: duration, canceled: duration }, { requiredKeys: [] }),
      unknown: fc.constantFrom(refused(1, 'INVALID_OPTION')),
    },
    { requiredKeys: [] },
  )

  test('JOB-13 a queue is defined exactly as asked, or refused with INVALID_OPTION (TOO_LARGE for a long name), naming the option', () => {
    fc.assert(
      fc.property(name, queueOptions, (queueName, parts) => {
        const options: Record<string, unknown> = {}
        const codes = new Set<JobsErrorCode>(queueName.ok ? [] : queueName.codes)
        const collect = (_key: string, part: Case<unknown>): unknown => {
          if (!part.ok) for (const code of part.codes) codes.add(code)
          return part.input
        }
        for (const [key, part] of Object.entries(parts)) {
          if (key === 'backoff' || key === 'retention')
            options[key] = Object.fromEntries(
              Object.entries(part as Record<string, Case<unknown>>).map(([k, p]) => [k, collect(`${key}.${k}`, p)]),
            )
          else options[key] = collect(key, part as Case<unknown>)
        }
        // A backoff whose initial wait is above its max (either may be the default) is refused too.
        const initial = parts.backoff?.initial ?? ok(undefined, 1_000)
        const max = parts.backoff?.max ?? ok(undefined, 3_600_000)
        if (initial.ok && max.ok && (initial.expected as number) > (max.expected as number)) codes.add('INVALID_OPTION')
        const outcome = attempt(() => defineQueue(queueName.input as string, options))
        if (codes.size > 0) {
          expect(
            'error' in outcome,
            `expected a refusal for ${String(queueName.input).slice(0, 20)} ${JSON.stringify(options, (_, v) => (typeof v === 'bigint' ? `${v}n` : v))}`,
          ).toBe(true)
          if ('error' in outcome) expect([...codes]).toContain(outcome.error.code)
          return
        }
        if ('error' in outcome) throw outcome.error
        const queue = outcome.value
        const expected = (part: Case<unknown> | undefined, fallback: unknown): unknown =>
          part ? (part.ok ? part.expected : undefined) : fallback
        expect(queue.name).toBe(queueName.input)
        expect(queue.attempts).toBe(expected(parts.attempts, 10))
        expect(queue.timeoutMs).toBe(expected(parts.timeout, 60_000))
        expect(queue.maxWaiting).toBe(expected(parts.maxWaiting, 10_000_000))
        expect(queue.backoff).toEqual({
          initialMs: expected(parts.backoff?.initial, 1_000),
          maxMs: expected(parts.backoff?.max, 3_600_000),
        })
        expect(queue.concurrency).toEqual(expected(parts.concurrency, { total: null, perGroup: null }))
        expect(queue.retentionMs).toEqual({
          done: expected(parts.retention?.done, 86_400_000),
          failed: expected(parts.retention?.failed, 7 * 86_400_000),
          canceled: expected(parts.retention?.canceled, 86_400_000),
        })
      }),
      { numRuns: 300 },
    )
  })

  test('JOB-13 anything at all as a queue name or options gives a queue or a JobsError, never another error', () => {
    fc.assert(
      fc.property(
        fc.anything(),
        fc.oneof(
          fc.anything(),
          fc.dictionary(fc.constantFrom('attempts', 'backoff', 'concurrency', 'timeout', 'maxWaiting', 'retention'), fc.anything()),
        ),
        (queueName, options) => {
          const outcome = attempt(() => defineQueue(queueName as string, options as object))
          if ('error' in outcome) expect(['INVALID_OPTION', 'TOO_LARGE']).toContain(outcome.error.code)
        },
      ),
      { numRuns: 300 },
    )
  })

  test('JOB-13 work starts with good options and refuses bad ones with INVALID_OPTION, before it claims anything', async () => {
    const queue = defineQueue('work-options')
    const slots = fc.oneof(
      fc.integer({ min: 1, max: 100 }).map((n) => ok(n, n)),
      fc.constantFrom(0, -1, 2.5, '4', null).map((v) => refused(v, 'INVALID_OPTION')),
    )
    const workOptions = fc.record(
      { slots, pollInterval: positiveTimerDuration, lease: positiveTimerDuration, surprise: fc.constant(refused(true, 'INVALID_OPTION')) },
      { requiredKeys: [] },
    )
    const handler = fc.oneof(
      fc.constant(ok(() => undefined)),
      fc.constantFrom(null, 'handler', {}).map((v) => refused(v, 'INVALID_OPTION')),
    )
    await fc.assert(
      fc.asyncProperty(workOptions, handler, async (parts, handlerCase) => {
        const options = Object.fromEntries(Object.entries(parts).map(([key, part]) => [key, part.input]))
        const codes = [...Object.values(parts), handlerCase].flatMap((part) => (part.ok ? [] : part.codes))
        const outcome = attempt(() => work(t.db, queue, handlerCase.input as () => undefined, options))
        if (codes.length > 0) {
          expect('error' in outcome).toBe(true)
          if ('error' in outcome) expect(codes).toContain(outcome.error.code)
        } else {
          if ('error' in outcome) throw outcome.error
          await (outcome.value as Worker).stop()
        }
      }),
      { numRuns: 60 },
    )
    expect(attempt(() => work({} as typeof t.db, queue, () => undefined))).toMatchObject({ error: { code: 'INVALID_OPTION' } })
  })
})

describe("JOB-13 enqueue and enqueueMany with random input, inside the caller's transaction", () => {
  const enqueueOptions = fc.record(
    { id: name, group: name, priority, delay: duration, runAt, color: fc.constant(refused('red', 'INVALID_OPTION')) },
    { requiredKeys: [] },
  )
  const smallIds = fc.constantFrom('a', 'b', 'c', 'd').map((id) => ok(id, id))
  let added = 0

  /** Adds one job through `call` in a transaction that writes app rows before and after it; checks the refusal, or answers the row. */
  function inTransaction<T>(call: (tx: typeof t.db) => T, codes: JobsErrorCode[] | null): T | undefined {
    let result: T | undefined
    t.db.transaction((tx) => {
      tx.insert(notes)
        .values({ text: `before ${added}` })
        .run()
      const before = jobsTables(t)
      const outcome = attempt(() => call(tx))
      if ('error' in outcome) {
        expect(codes, `refused with ${outcome.error.code}: ${outcome.error.message}`).not.toBeNull()
        expect(codes).toContain(outcome.error.code)
        expect(jobsTables(t)).toEqual(before)
      } else {
        expect(codes, 'accepted input that should have been refused').toBeNull()
        result = outcome.value
      }
      tx.insert(notes)
        .values({ text: `after ${added}` })
        .run()
    })
    added++
    expect(
      t.client
        .prepare('select count(*) from notes where text in (?, ?)')
        .pluck()
        .get(`before ${added - 1}`, `after ${added - 1}`),
    ).toBe(2)
    return result
  }

  test('JOB-13 each add is kept exactly as given, or refused with its code, writing nothing, the transaction still usable', () => {
    const queue = defineQueue('props')
    fc.assert(
      fc.property(value, enqueueOptions, fc.option(smallIds, { nil: undefined }), (valueCase, parts, smallId) => {
        const { id: _, ...rest } = parts
        const partsWithId = smallId ? { ...rest, id: smallId } : parts
        const options = Object.fromEntries(Object.entries(partsWithId).map(([key, part]) => [key, part.input]))
        const codes = [valueCase, ...Object.values(partsWithId)].flatMap((part) => (part.ok ? [] : part.codes))
        if (parts.delay && parts.runAt) codes.push('INVALID_OPTION')
        // A delay that reaches past the range of a Date gives no time to run at.
        if (parts.delay?.ok && (parts.delay.expected as number) + Date.now() > MAX_DURATION_MS) codes.push('INVALID_OPTION')
        const heldBefore =
          typeof options.id === 'string'
            ? (t.client.prepare('select seq from jobs_job where queue = ? and id = ?').get('props', options.id) as
                | { seq: number }
                | undefined)
            : undefined
        const started = Date.now()
        const answer = inTransaction((tx) => enqueue(tx, queue, valueCase.input as Json, options), codes.length > 0 ? codes : null)
        if (!answer) return
        if (heldBefore) {
          expect(answer).toEqual({ id: options.id, added: false, matched: 'id' })
          return
        }
        expect(answer.added).toBe(true)
        if (typeof options.id === 'string') expect(answer.id).toBe(options.id)
        const row = t.client.prepare('select * from jobs_job where queue = ? and id = ?').get('props', answer.id) as Record<string, unknown>
        expect(row.id).toBe(answer.id)
        expect(JSON.parse(row.value as string)).toEqual(valueCase.ok ? valueCase.expected : undefined)
        expect(row.grp).toBe(parts.group?.ok ? parts.group.expected : null)
        expect(row.priority).toBe(parts.priority?.ok ? parts.priority.expected : 0)
        const delayMs = parts.delay?.ok ? (parts.delay.expected as number) : undefined
        const at = parts.runAt?.ok ? (parts.runAt.expected as number) : undefined
        if (at !== undefined) expect(row.run_at).toBe(at)
        else {
          expect(row.run_at).toBeGreaterThanOrEqual(started + (delayMs ?? 0))
          expect(row.run_at).toBeLessThanOrEqual(Date.now() + (delayMs ?? 0))
        }
        const runAtMs = row.run_at as number
        if (Math.abs(runAtMs - started) > 5_000) expect(row.state).toBe(runAtMs > started ? 'scheduled' : 'waiting')
      }),
      { numRuns: 400 },
    )
  })

  test('JOB-13 a batch with one bad item adds nothing and leaves the transaction usable; a good batch adds every item', () => {
    const queue = defineQueue('props-many')
    const item = fc.record({
      value,
      id: fc.option(
        fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }).filter((id) => !id.includes('\u0000')),
        { nil: undefined },
      ),
      group: fc.option(name, { nil: undefined }),
    })
    fc.assert(
      fc.property(fc.array(item, { maxLength: 6 }), (items) => {
        const codes = items.flatMap((i) => [i.value, i.group].flatMap((part) => (part && !part.ok ? part.codes : [])))
        const batch = items.map((i, n) => ({
          value: i.value.input as Json,
          id: `${added}:${n}:${i.id ?? ''}`,
          ...(i.group ? { group: i.group.input as string } : {}),
        }))
        const answer = inTransaction((tx) => enqueueMany(tx, queue, batch), codes.length > 0 ? codes : null)
        if (answer) expect(answer.map((a) => a.id)).toEqual(batch.map((b) => b.id))
      }),
      { numRuns: 150 },
    )
    expect(attempt(() => enqueueMany(t.db, queue, 'not an array' as unknown as []))).toMatchObject({ error: { code: 'INVALID_OPTION' } })
  })

  test('JOB-13 adds past maxWaiting are refused with QUEUE_FULL and write nothing; ids the queue holds still answer added: false', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.constantFrom('p', 'q', 'r', 's', 't', 'u'), { maxLength: 12 }),
        (maxWaiting, ids) => {
          const queueName = `full-${added}`
          const queue = defineQueue(queueName, { maxWaiting })
          const held = new Set<string>()
          for (const id of ids) {
            const full = held.size >= maxWaiting && !held.has(id)
            const answer = inTransaction((tx) => enqueue(tx, queue, { id }, { id }), full ? ['QUEUE_FULL'] : null)
            if (answer) expect(answer.added).toBe(!held.has(id))
            if (!full) held.add(id)
          }
          expect(t.client.prepare('select count(*) from jobs_job where queue = ?').pluck().get(queueName)).toBe(held.size)
        },
      ),
      { numRuns: 60 },
    )
  })
})

describe('JOB-13 inside a run: step names and answers, progress, outcome arguments', () => {
  const queue = defineQueue<{ n: number }>('props-run', { attempts: 2, backoff: { initial: '1h' } })
  let worker: Worker
  const checks = new Map<string, (run: Run) => Promise<unknown>>()
  beforeAll(() => {
    worker = work(t.db, queue, async (_value, run) => checks.get(run.id)!(run))
  })
  afterAll(() => worker.stop({ timeout: '5s' }))
  afterEach(() => checks.clear())
  let jobs = 0

  /** Runs `check` as the handler of a new job, which returns or throws what `check` does; answers the same. */
  function insideRun(check: (run: Run) => Promise<unknown>): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const id = `inside-${jobs++}`
      checks.set(id, async (run) => {
        try {
          const returned = await check(run)
          resolve(returned)
          return returned
        } catch (error) {
          reject(error)
          throw error
        }
      })
      enqueue(t.db, queue, { n: jobs }, { id })
    })
  }

  /** A step's answer: JSON that round-trips (undefined is kept as such), or something a step cannot keep. */
  const answer = fc.oneof(
    { arbitrary: validValue, weight: 4 },
    { arbitrary: fc.constant(ok(undefined, undefined)), weight: 1 },
    { arbitrary: invalidValue.filter((c) => c.input !== undefined), weight: 2 },
    { arbitrary: limitValue, weight: 1 },
  )

  test('JOB-13 a step keeps its answer exactly, returns a kept answer without calling its function again (JOB-06), or is refused with its code writing nothing', async () => {
    await insideRun(async (run) => {
      const seq = t.client.prepare('select seq from jobs_job where queue = ? and id = ?').pluck().get(queue.name, run.id) as number
      const kept = t.client.prepare('select answer from jobs_step where job = ? and name = ?')
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            name,
            fc.constantFrom('again', 'twice').map((n) => ok(n, n)),
          ),
          answer,
          async (stepName, stepAnswer) => {
            const before = jobsTables(t)
            const held = stepName.ok ? (kept.get(seq, stepName.input) as { answer: string | null } | undefined) : undefined
            let calls = 0
            const outcome = await run
              .step(stepName.input as string, () => (calls++, stepAnswer.input as Json))
              .then(
                (value) => ({ value }),
                (error: unknown) => ({ error }),
              )
            if (!stepName.ok || (!held && !stepAnswer.ok)) {
              const codes = !stepName.ok ? stepName.codes : stepAnswer.ok ? [] : stepAnswer.codes
              expect(
                'error' in outcome && outcome.error instanceof JobsError,
                `a refusal, got ${String('error' in outcome ? outcome.error : 'a value')}`,
              ).toBe(true)
              expect(codes).toContain((outcome as { error: JobsError }).error.code)
              expect(calls).toBe(stepName.ok ? 1 : 0)
              expect(jobsTables(t)).toEqual(before)
              return
            }
            if ('error' in outcome) throw outcome.error
            if (held) {
              expect(calls).toBe(0)
              expect(outcome.value).toEqual(held.answer === null ? undefined : JSON.parse(held.answer))
              expect(jobsTables(t)).toEqual(before)
              return
            }
            const expectedAnswer = stepAnswer.ok ? stepAnswer.expected : undefined
            expect(calls).toBe(1)
            expect(outcome.value).toEqual(expectedAnswer)
            const row = kept.get(seq, stepName.input) as { answer: string | null }
            expect(row.answer === null ? undefined : JSON.parse(row.answer)).toEqual(expectedAnswer)
          },
        ),
        { numRuns: 120 },
      )
      expect(await run.step('not a function', 'fn' as unknown as () => 1).catch((error: JobsError) => error.code)).toBe('INVALID_OPTION')
      const thrown = new Error('the step failed')
      await expect(run.step('throws', () => Promise.reject(thrown))).rejects.toBe(thrown)
      expect(kept.get(seq, 'throws')).toBeUndefined()
    })
  })

  test('JOB-13 progress is set, or refused with INVALID_VALUE or TOO_LARGE (over 4 KiB), and never written to the database (JOB-12)', async () => {
    const progressValue = fc.oneof(
      { arbitrary: validValue, weight: 4 },
      { arbitrary: invalidValue, weight: 2 },
      { arbitrary: fc.integer({ min: -3, max: 3 }).map((offset) => 'p'.repeat(MAX_PROGRESS_BYTES - 2 + offset)), weight: 1 },
    )
    await insideRun(async (run) => {
      fc.assert(
        fc.property(progressValue, (progress) => {
          const input = typeof progress === 'string' ? progress : progress.input
          const big = typeof progress === 'string' && Buffer.byteLength(JSON.stringify(progress)) > MAX_PROGRESS_BYTES
          const before = jobsTables(t)
          const outcome = attempt(() => run.setProgress(input as Json))
          const codes =
            typeof progress === 'string'
              ? big
                ? ['TOO_LARGE']
                : []
              : progress.ok
                ? Buffer.byteLength(JSON.stringify(input)) > MAX_PROGRESS_BYTES
                  ? ['TOO_LARGE']
                  : []
                : progress.codes
          if (codes.length > 0) {
            expect('error' in outcome).toBe(true)
            if ('error' in outcome) expect(codes).toContain(outcome.error.code)
          } else if ('error' in outcome) throw outcome.error
          expect(jobsTables(t)).toEqual(before)
        }),
        { numRuns: 200 },
      )
    })
  })

  test('JOB-13 fail takes any reason; retry and snooze take a duration or refuse with INVALID_OPTION', async () => {
    await insideRun(async (run) => {
      fc.assert(
        fc.property(fc.anything(), duration, (reason, delay) => {
          expect(attempt(() => run.fail(reason as string))).toHaveProperty('value')
          for (const call of [() => run.retry(delay.input as number), () => run.snooze(delay.input as number)]) {
            const outcome = attempt(call)
            if (delay.ok) expect(outcome).toHaveProperty('value')
            else expect(outcome).toMatchObject({ error: { code: 'INVALID_OPTION' } })
          }
        }),
        { numRuns: 200 },
      )
    })
  })

  test('JOB-08 random handler outcomes lead to the states of the outcome table: returned values, non-JSON results, fail, retry, snooze, throws', async () => {
    const longDelay = fc.oneof(
      fc.integer({ min: 10 * 60_000, max: MAX_TIMER_MS }),
      fc.integer({ min: 25, max: 100_000 }).map((days) => days * UNIT_MS.d),
    )
    type Ending =
      | { kind: 'return'; value: Case<unknown> }
      | { kind: 'fail'; reason: unknown }
      | { kind: 'retry' | 'snooze'; delayMs: number }
      | { kind: 'throw'; error: unknown }
    const ending: fc.Arbitrary<Ending> = fc.oneof(
      answer.map((value) => ({ kind: 'return' as const, value })),
      fc.anything().map((reason) => ({ kind: 'fail' as const, reason })),
      fc.tuple(fc.constantFrom('retry' as const, 'snooze' as const), longDelay).map(([kind, delayMs]) => ({ kind, delayMs })),
      fc
        .oneof(
          fc.string().map((message) => new Error(message)),
          fc.anything(),
        )
        .map((error) => ({ kind: 'throw' as const, error })),
    )
    const row = t.client.prepare('select state, attempts, run_at as runAt, result, error from jobs_job where queue = ? and id = ?')
    await fc.assert(
      fc.asyncProperty(ending, async (end) => {
        const started = Date.now()
        let id = ''
        await insideRun(async (run) => {
          id = run.id
          switch (end.kind) {
            case 'return':
              return end.value.input
            case 'fail':
              return run.fail(end.reason as string)
            case 'retry':
              return run.retry(end.delayMs)
            case 'snooze':
              return run.snooze(end.delayMs)
            case 'throw':
              throw end.error
          }
        }).catch(() => undefined)
        const job = await waitFor(
          'the run to be recorded',
          () => {
            const found = row.get(queue.name, id) as {
              state: string
              attempts: number
              runAt: number
              result: string | null
              error: string | null
            }
            return found.state !== 'running' && found
          },
          10_000,
          5,
        )
        const ended = Date.now()
        const failedRun = (): void => {
          expect(job).toMatchObject({ state: 'scheduled', attempts: 1 })
          expect(job.error).toEqual(expect.any(String))
          expect(job.runAt).toBeGreaterThanOrEqual(started + 0.9 * 3_600_000)
        }
        if (end.kind === 'return') {
          if (end.value.ok)
            expect(job).toEqual({
              state: 'done',
              attempts: 1,
              runAt: job.runAt,
              error: null,
              result: end.value.expected === undefined ? null : JSON.stringify(end.value.expected),
            })
          else failedRun()
        } else if (end.kind === 'fail') {
          expect(job).toMatchObject({ state: 'failed', attempts: 1 })
          if (typeof end.reason === 'string' && end.reason !== '') expect(job.error).toBe(end.reason)
          else expect(job.error).toEqual(expect.stringMatching(/./))
        } else if (end.kind === 'throw') {
          failedRun()
        } else {
          expect(job).toMatchObject({ state: 'scheduled', attempts: end.kind === 'retry' ? 1 : 0 })
          expect(job.runAt).toBeGreaterThanOrEqual(started + end.delayMs)
          expect(job.runAt).toBeLessThanOrEqual(ended + end.delayMs)
        }
      }),
      { numRuns: 60 },
    )
  })
})

describe('JOB-13 inputs at the edge of what the tables can hold', () => {
  /** Strings with a lone surrogate: no UTF-8 encodes them, so SQLite cannot keep them as given. */
  const notWellFormed = fc
    .tuple(fc.string({ maxLength: 8 }), fc.integer({ min: 0xd800, max: 0xdfff }), fc.string({ maxLength: 8 }))
    .map(([head, unit, tail]) => `${head}${String.fromCharCode(unit)}${tail}`)
    .filter((text) => /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text))

  test('JOB-13 an id, a group or a queue name with a lone surrogate is refused with INVALID_OPTION, or kept so that it reads back the same', () => {
    let n = 0
    fc.assert(
      fc.property(notWellFormed, fc.constantFrom('id', 'group', 'queue'), (text, where) => {
        const queueName = where === 'queue' ? text : `edge-${n++}`
        const defined = attempt(() => defineQueue(queueName))
        if ('error' in defined) return void expect(defined.error.code).toBe('INVALID_OPTION')
        const before = jobsTables(t)
        const added = attempt(() =>
          enqueue(t.db, defined.value, 1, where === 'id' ? { id: text } : where === 'group' ? { group: text } : {}),
        )
        if ('error' in added) {
          expect(added.error.code).toBe('INVALID_OPTION')
          expect(jobsTables(t)).toEqual(before)
          return
        }
        const row = t.client.prepare('select queue, id, grp from jobs_job where queue = ? and id = ?').get(queueName, added.value.id) as {
          queue: string
          id: string
          grp: string | null
        }
        expect(row[where === 'group' ? 'grp' : where]).toBe(text)
      }),
      { numRuns: 60 },
    )
  })

  test('JOB-13 a runAt beyond the range of a Date is refused with INVALID_OPTION, writing nothing', () => {
    const queue = defineQueue('edge-run-at')
    fc.assert(
      fc.property(
        fc.oneof(fc.double({ min: 8.64e15 + 1, max: 1e300, noNaN: true }), fc.double({ min: -1e300, max: -8.64e15 - 1, noNaN: true })),
        (ms) => {
          const before = jobsTables(t)
          expect(attempt(() => enqueue(t.db, queue, 1, { runAt: ms }))).toMatchObject({ error: { code: 'INVALID_OPTION' } })
          expect(jobsTables(t)).toEqual(before)
        },
      ),
      { numRuns: 40 },
    )
  })
})
