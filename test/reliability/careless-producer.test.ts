/**
 * Rows a careless producer in another language wrote with plain SQL: a value
 * that is not JSON, an unknown state, a run_at that is text or out of range,
 * counts that are no counts, a running job with no lease, huge priorities
 * (JOB-13, JOB-18). The worker must fail a job it cannot run with an error
 * that says why, run the ones it can, and go on with the others; nothing the
 * producer wrote may stop the queue or the worker, nor make a reader throw.
 */
import { execFile } from 'node:child_process'
import fc from 'fast-check'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import {
  cancel,
  defineQueue,
  enqueue,
  enqueueMany,
  getJob,
  inspectJob,
  listJobs,
  pauseQueue,
  queueCounts,
  watch,
  work,
  type JobState,
  type Json,
  type Worker,
} from '../../src/index.js'
import { dashboard } from '../../src/dashboard/index.js'
import { list, show, status } from '../../src/cli/commands.js'
import { connectionOf } from '../../src/dialect/better-sqlite3/connection.js'
import { BIN } from '../helpers/dashboard.js'
import { freshDb, removeTempDirs, type TestDb } from '../helpers/db.js'
import { waitFor } from './processes.js'

const queue = defineQueue<{ n: number }>('careless', { attempts: 2, backoff: { initial: '10ms' } })

let t: TestDb
let worker: Worker | undefined
let producer: ReturnType<TestDb['reopen']>['client']
const ran: string[] = []
const surfaced: unknown[] = []

beforeEach(() => {
  t = freshDb()
  producer = t.reopen().client
  ran.length = 0
  surfaced.length = 0
})
afterEach(async () => {
  await worker?.stop({ timeout: '5s' })
  worker = undefined
  t.close()
  removeTempDirs()
})

/** Inserts a row as a producer in another language would: plain SQL, every column it cares about by hand. */
function insertRaw(row: { id: string; value: string; state?: string; runAt?: number | bigint; priority?: number | bigint }): void {
  producer
    .prepare(`insert into jobs_job (queue, id, value, state, priority, max_attempts, run_at, created_at) values (?, ?, ?, ?, ?, 2, ?, ?)`)
    .run(queue.name, row.id, row.value, row.state ?? 'waiting', row.priority ?? 0, row.runAt ?? Date.now(), Date.now())
}

function startWorker(): void {
  worker = work(
    t.db,
    queue,
    (value, run) => {
      ran.push(run.id)
      return { double: value.n * 2 }
    },
    { slots: 1, onError: (error) => surfaced.push(error) },
  )
}

/**
 * A writer of the app runs first, as in an app whose worker started before anyone reads counts: the first
 * write of a connection installs the triggers that count other programs' rows (readers never install them).
 */
async function appHasWritten(db: TestDb['db']): Promise<void> {
  await work(db, defineQueue('app-setup'), () => {}).stop()
}

const jobOf = (id: string) =>
  t.client.prepare(`select state, attempts, error, result from jobs_job where queue = ? and id = ?`).get(queue.name, id) as {
    state: string
    attempts: number
    error: string | null
    result: string | null
  }

test('JOB-13 a value that is not JSON fails its job at once with an error saying so; a negative run_at runs; huge priorities run in their order; the others go on', async () => {
  enqueue(t.db, queue, { n: 1 }, { id: 'good-1' })
  insertRaw({ id: 'not-json', value: "{'n': 1}" })
  insertRaw({ id: 'empty', value: '' })
  insertRaw({ id: 'long-ago', value: '{"n": 3}', runAt: -5 })
  insertRaw({ id: 'last', value: '{"n": 4}', priority: 9223372036854775807n })
  insertRaw({ id: 'first', value: '{"n": 5}', priority: -9223372036854775808n })
  insertRaw({ id: 'float-priority', value: '{"n": 6}', priority: 1e300 })
  enqueue(t.db, queue, { n: 2 }, { id: 'good-2' })
  startWorker()

  const ids = ['good-1', 'not-json', 'empty', 'long-ago', 'last', 'first', 'float-priority', 'good-2']
  await waitFor('every row to end', () => ids.every((id) => ['done', 'failed'].includes(jobOf(id).state)), 20_000)
  for (const id of ['not-json', 'empty']) {
    expect(jobOf(id)).toMatchObject({ state: 'failed', attempts: 1 })
    expect(jobOf(id).error).toMatch(/not JSON/)
  }
  for (const [id, n] of [
    ['good-1', 1],
    ['good-2', 2],
    ['long-ago', 3],
    ['last', 4],
    ['first', 5],
    ['float-priority', 6],
  ] as const) {
    expect(jobOf(id)).toEqual({ state: 'done', attempts: 1, error: null, result: JSON.stringify({ double: n * 2 }) })
  }
  expect(ran).toEqual(['first', 'long-ago', 'good-1', 'good-2', 'last', 'float-priority'])
  expect(surfaced).toEqual([])
  expect(t.client.prepare(`select waiting, scheduled, running, done, failed from jobs_queue where name = ?`).get(queue.name)).toEqual({
    waiting: 0,
    scheduled: 0,
    running: 0,
    done: 6,
    failed: 2,
  })
  expect(t.client.prepare('pragma integrity_check').pluck().get()).toBe('ok')
})

test('JOB-13 a row in an unknown state is failed by the worker with an error naming the state, and the others go on', async () => {
  insertRaw({ id: 'pending', value: '{"n": 1}', state: 'pending' })
  insertRaw({ id: 'shouting', value: '{"n": 2}', state: 'WAITING' })
  enqueue(t.db, queue, { n: 3 }, { id: 'good' })
  startWorker()

  await waitFor('the good job to be done', () => jobOf('good').state === 'done', 20_000)
  await waitFor(
    'the rows in unknown states to be failed',
    () => jobOf('pending').state === 'failed' && jobOf('shouting').state === 'failed',
    5_000,
  )
  expect(jobOf('pending').error).toMatch(/pending/)
  expect(jobOf('shouting').error).toMatch(/WAITING/)
  expect(ran).toEqual(['good'])
  expect(surfaced).toEqual([])
})

/** Inserts a row with every column given as is (a column left out takes its default), as a careless producer would. */
function insertStored(row: Record<string, unknown>): void {
  const columns = Object.keys(row)
  producer.prepare(`insert into jobs_job (${columns.join(', ')}) values (${columns.map(() => '?').join(', ')})`).run(...Object.values(row))
}

test('JOB-18 a job that may run but whose columns break the protocol fails at once, its error naming the column and the value', async () => {
  const now = Date.now()
  const good = { queue: queue.name, value: '{"n": 1}', state: 'waiting', run_at: now, created_at: now }
  // Written before any engine connection installed the triggers, then after.
  insertStored({ ...good, id: 'soon-early', run_at: 'soon' })
  expect(jobOf('soon-early').state).toBe('waiting')
  getJob(t.db, queue, 'soon-early')
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    ['soon', { run_at: 'soon' }, /^run_at holds 'soon', not a time/],
    ['far', { state: 'scheduled', run_at: 1e300 }, /^run_at holds 1\.0e\+300, not a time/],
    ['before-dates', { run_at: -8.64e15 - 1 }, /^run_at holds -8640000000000001, not a time/],
    ['iso-created', { created_at: '2026-01-01T00:00:00Z' }, /^created_at holds '2026-01-01T00:00:00Z', not a time/],
    ['half-priority', { priority: 1.5 }, /^priority holds 1\.5, not a whole number/],
    ['text-priority', { priority: 'high' }, /^priority holds 'high', not a whole number/],
    ['negative-attempts', { attempts: -1 }, /^attempts holds -1, not a count of runs/],
    ['text-attempts', { attempts: 'none' }, /^attempts holds 'none', not a count of runs/],
    ['no-attempts', { max_attempts: 0 }, /^max_attempts holds 0, not a number of runs/],
    [
      'above-max',
      { attempts: 5, max_attempts: 2 },
      /^attempts holds 5, not a count of runs within max_attempts \(2\): the row breaks the table protocol$/,
    ],
    ['blob-group', { grp: Buffer.from([0, 255]) }, /^grp holds X'00FF', not text or null/],
    ['running-blob-run-at', { state: 'running', run_at: Buffer.from('x') }, /^run_at holds X'78', not a time/],
  ]
  for (const [id, columns] of cases) insertStored({ ...good, id, ...columns })
  insertStored({ ...good, id: 'fine' })
  producer.prepare(`update jobs_job set run_at = 'later' where id = 'fine'`).run()
  insertStored({ ...good, id: 'good' })
  startWorker()

  await waitFor('the good job to be done', () => jobOf('good').state === 'done', 10_000)
  expect(jobOf('soon-early')).toMatchObject({
    state: 'failed',
    attempts: 0,
    error: expect.stringMatching(/^run_at holds 'soon', not a time/),
  })
  expect(jobOf('fine')).toMatchObject({ state: 'failed', attempts: 0, error: expect.stringMatching(/^run_at holds 'later', not a time/) })
  for (const [id, , error] of cases) expect(jobOf(id), id).toMatchObject({ state: 'failed', error: expect.stringMatching(error) })
  expect(ran).toEqual(['good'])
  expect(surfaced).toEqual([])
  const states = t.client.prepare(`select state, count(*) as n from jobs_job where queue = ? group by state`).all(queue.name) as {
    state: string
    n: number
  }[]
  expect(queueCounts(t.db, queue)).toMatchObject({
    waiting: 0,
    scheduled: 0,
    running: 0,
    done: 1,
    failed: cases.length + 2,
    ...Object.fromEntries(states.map((s) => [s.state, s.n])),
  })
})

test('JOB-18 a job written as running with no lease runs again, as an abandoned run does, and frees its place under the concurrency', async () => {
  const single = defineQueue<{ n: number }>('careless-single', { attempts: 3, concurrency: 1, backoff: { initial: 1, max: 1 } })
  const now = Date.now()
  producer
    .prepare(
      `insert into jobs_job (queue, id, value, state, attempts, max_attempts, run_at, created_at) values (?, ?, ?, 'running', ?, 3, ?, ?)`,
    )
    .run(single.name, 'orphan', '{"n": 1}', 1, now, now)
  producer
    .prepare(
      `insert into jobs_job (queue, id, value, state, attempts, max_attempts, run_at, created_at) values (?, ?, ?, 'running', ?, 3, ?, ?)`,
    )
    .run(single.name, 'orphan-last', '{"n": 2}', 3, now, now)
  enqueue(t.db, single, { n: 3 }, { id: 'behind' })
  worker = work(t.db, single, (_value, run) => void ran.push(run.id), { onError: (error) => surfaced.push(error) })
  const rowOf = (id: string) =>
    t.client.prepare(`select state, attempts, error from jobs_job where queue = ? and id = ?`).get(single.name, id) as {
      state: string
      attempts: number
      error: string | null
    }
  await waitFor(
    'every job to end',
    () => ['orphan', 'orphan-last', 'behind'].every((id) => ['done', 'failed'].includes(rowOf(id).state)),
    10_000,
  )
  expect(rowOf('orphan')).toMatchObject({ state: 'done', attempts: 2, error: null })
  expect(rowOf('orphan-last')).toMatchObject({
    state: 'failed',
    attempts: 3,
    error: expect.stringMatching(/^attempt 3 of 3 ended without an outcome: it was running with no lease/),
  })
  expect(rowOf('behind')).toMatchObject({ state: 'done', attempts: 1 })
  expect(ran.sort()).toEqual(['behind', 'orphan'])
  expect(surfaced).toEqual([])
  expect(queueCounts(t.db, single)).toMatchObject({ running: 0, done: 2, failed: 1 })
})

test('JOB-18 [sqlite] a jobs_queue row deleted by hand while its queue has jobs comes back counted from them: the counts stay right afterwards', async () => {
  const counted = defineQueue<{ n: number }>('deleted-row')
  worker = work(t.db, counted, () => {}, { onError: (error) => surfaced.push(error) })
  enqueueMany(
    t.db,
    counted,
    Array.from({ length: 7 }, (_, n) => ({ value: { n } })),
  )
  await waitFor('seven jobs to be done', () => queueCounts(t.db, counted).done === 7, 10_000)
  producer.prepare('delete from jobs_queue where name = ?').run(counted.name)
  expect(queueCounts(t.db, counted)).toMatchObject({ waiting: 0, running: 0, done: 7 })
  enqueueMany(t.db, counted, [{ value: { n: 8 } }])
  await waitFor('the eighth job to be counted done', () => queueCounts(t.db, counted).done === 8, 10_000)
  expect(queueCounts(t.db, counted)).toMatchObject({ waiting: 0, scheduled: 0, running: 0, done: 8, failed: 0 })
  // A queue with no jobs left loses its row for good, as asked.
  producer.prepare('delete from jobs_job where queue = ?').run(counted.name)
  producer.prepare('delete from jobs_queue where name = ?').run(counted.name)
  expect(producer.prepare('select count(*) from jobs_queue where name = ?').pluck().get(counted.name)).toBe(0)
  expect(surfaced).toEqual([])
})

test('JOB-18 getJob, watch, the admin API, the CLI and the dashboard show a row with times that are no times as stored, without throwing', async () => {
  await appHasWritten(t.db)
  insertStored({
    queue: queue.name,
    id: 'iso',
    value: '{"n": 1}',
    state: 'done',
    run_at: 1e300,
    created_at: '2026-01-01T00:00:00Z',
    finished_at: 'yesterday',
    attempts: 'one',
    max_attempts: 2,
    priority: 'high',
  })
  const expected = {
    run_at: '1e+300',
    created_at: "'2026-01-01T00:00:00Z'",
    finished_at: "'yesterday'",
    attempts: "'one'",
    priority: "'high'",
  }
  const { priority: _, ...snapshotMalformed } = expected

  const snapshot = getJob(t.db, queue, 'iso')!
  expect(snapshot).toMatchObject({
    state: 'done',
    runAt: null,
    createdAt: null,
    finishedAt: null,
    attempts: 2,
    malformed: snapshotMalformed,
  })
  expect(snapshot.attempt).toBeNaN()
  const watched = watch(t.db, queue, 'iso')
  expect((await watched.next()).value).toMatchObject({ state: 'done', runAt: null, malformed: snapshotMalformed })
  await watched.return()
  expect(listJobs(t.db, { queue }).jobs[0]).toMatchObject({ id: 'iso', runAt: null, malformed: expected })
  expect(listJobs(t.db, { queue, state: 'done' }).jobs.map((job) => job.id)).toEqual(['iso'])
  expect(inspectJob(t.db, queue, 'iso')).toMatchObject({ id: 'iso', createdAt: null, malformed: expected })
  expect(queueCounts(t.db, queue)).toMatchObject({ done: 1 })

  const open = { label: t.file, db: t.db, connection: connectionOf(t.db), close: async () => {} }
  const listed = (await list(open, { positionals: [] })).text
  expect(listed).toContain("ended 'yesterday' (not a time)")
  expect(listed).toContain("'one'/2")
  expect(listed).not.toMatch(/NaN/)
  const shown = (await show(open, { positionals: ['iso'] })).text
  expect(shown).toMatch(/^added +'2026-01-01T00:00:00Z' \(not a time\)$/m)
  expect(shown).toMatch(/^run at +1e\+300 \(not a time\)$/m)
  expect(shown).toMatch(/^priority +'high'$/m)
  expect((await status(open, { positionals: [] })).text).toMatch(/careless/)
  // The command itself, as users run it.
  const command = await new Promise<{ code: number; stdout: string; stderr: string }>((done) =>
    execFile(process.execPath, [BIN, 'show', 'iso', '--db', t.file], { timeout: 30_000 }, (error, stdout, stderr) =>
      done({ code: error ? Number(error.code) : 0, stdout, stderr }),
    ),
  )
  expect(command, command.stderr).toMatchObject({ code: 0, stderr: '' })
  expect(command.stdout).toMatch(/^ended +'yesterday' \(not a time\)$/m)

  const mounted = dashboard(t.db)
  try {
    for (const path of ['/', `/queues/${queue.name}`, `/queues/${queue.name}?state=done`, `/queues/${queue.name}/jobs/iso`]) {
      const answer = await mounted.fetch(new Request(`http://127.0.0.1${path}`))
      const body = await answer.text()
      expect(answer.status, `${path}: ${body.slice(0, 300)}`).toBe(200)
      if (path.includes('iso') || path.endsWith('careless')) expect(body).toContain('&#39;yesterday&#39;')
    }
  } finally {
    mounted.close()
  }
})

describe('JOB-18 rows written with plain SQL, with anything SQLite stores in any column', () => {
  const RETENTION_MS = 100_000 * 86_400_000
  const rowsQueue = defineQueue<Json>('careless-rows', {
    attempts: 3,
    backoff: { initial: 1, max: 1 },
    concurrency: { total: 3, perGroup: 1 },
    retention: { done: RETENTION_MS, failed: RETENTION_MS, canceled: RETENTION_MS },
  })
  const MAX_TIME_MS = 8.64e15
  const now = Date.now()

  /** Any value SQLite stores but NULL: small and huge integers, past JavaScript's exact range too, reals, texts that look like numbers or times or not, blobs. */
  const anyValue: fc.Arbitrary<unknown> = fc.oneof(
    fc.integer({ min: -3, max: 12 }),
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
    fc.double({ noNaN: true }),
    fc.constantFrom(-8.64e15 - 1, 8.64e15 + 1, 2 ** 53, 2 ** 53 + 2, 1.5, -0.5, 1e300, Infinity, -Infinity),
    fc.constantFrom('soon', 'NaN', 'Infinity', '', '12', ' 7 ', '1e3', '0x10', '2026-01-01T00:00:00Z', "it's", '{"n":1}', '{n: 1}'),
    fc.string({ maxLength: 6 }),
    fc.uint8Array({ maxLength: 4 }).map((bytes) => Buffer.from(bytes)),
  )
  /** A value a careful producer would write most of the time, anything at all now and then. */
  const mostly = <T>(good: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
    fc.oneof({ arbitrary: good, weight: 3 }, { arbitrary: anyValue, weight: 1 })
  const dueTime = fc.oneof(fc.integer({ min: now - 86_400_000, max: now }), fc.constant(-5))
  const row = fc.record(
    {
      queue: fc.oneof(
        { arbitrary: fc.constant(rowsQueue.name), weight: 8 },
        { arbitrary: fc.constantFrom('elsewhere', Buffer.from('careless-rows')), weight: 1 },
      ),
      blobId: fc.oneof({ arbitrary: fc.constant(false), weight: 9 }, { arbitrary: fc.constant(true), weight: 1 }),
      grp: fc.oneof(fc.constant(null), mostly(fc.constantFrom('g1', 'g2'))),
      value: fc.oneof(
        fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
        anyValue,
      ),
      state: fc.oneof(
        { arbitrary: fc.constantFrom('waiting', 'scheduled', 'running', 'done', 'failed', 'canceled'), weight: 6 },
        { arbitrary: fc.constantFrom('pending', 'WAITING', 'done ', ''), weight: 1 },
        { arbitrary: anyValue, weight: 1 },
      ),
      priority: mostly(fc.integer({ min: -2, max: 2 })),
      attempts: mostly(fc.integer({ min: 0, max: 4 })),
      max_attempts: mostly(fc.integer({ min: 1, max: 4 })),
      run_at: fc.oneof(
        { arbitrary: dueTime, weight: 3 },
        { arbitrary: fc.constant(now + 1e12), weight: 1 },
        { arbitrary: anyValue, weight: 1 },
      ),
      created_at: mostly(dueTime),
      finished_at: fc.oneof(fc.constant(null), mostly(dueTime)),
      error: fc.oneof(fc.constant(null), anyValue),
      result: fc.oneof(fc.constant(null), anyValue),
    },
    // A column left out takes its default (id, value, state, counts and times have one).
    { requiredKeys: ['queue', 'blobId'] },
  )

  /** A column as SQLite holds it: its type and its value, read back with plain SQL. */
  type Stored = { type: string; value: unknown }
  const KNOWN = ['waiting', 'scheduled', 'running', 'done', 'failed', 'canceled']
  const isTime = (s: Stored) => s.type === 'integer' && Math.abs(s.value as number) <= MAX_TIME_MS
  /** The columns that break the protocol, in the order the engine judges them, as this test reads the rules. */
  const RULES: Array<[string, (s: Stored) => boolean]> = [
    ['run_at', isTime],
    ['created_at', isTime],
    ['priority', (s) => s.type === 'integer' || (s.type === 'real' && Number.isInteger(s.value))],
    ['attempts', (s) => s.type === 'integer' && (s.value as number) >= 0 && (s.value as number) <= Number.MAX_SAFE_INTEGER],
    ['max_attempts', (s) => s.type === 'integer' && (s.value as number) >= 1 && (s.value as number) <= Number.MAX_SAFE_INTEGER],
    ['grp', (s) => s.type === 'null' || s.type === 'text'],
    ['queue', (s) => s.type === 'text'],
    ['id', (s) => s.type === 'text'],
  ]
  /** What readers list in `malformed`: those columns, and the ones only shown (finish time, texts, JSON as text). */
  const SHOWN: Array<[string, (s: Stored) => boolean]> = [
    ...RULES,
    ['finished_at', (s) => s.type === 'null' || isTime(s)],
    ['state', (s) => s.type === 'text' && KNOWN.includes(s.value as string)],
    ['value', (s) => s.type === 'text'],
    ['error', (s) => s.type === 'null' || s.type === 'text'],
    ['result', (s) => s.type === 'null' || s.type === 'text'],
  ]
  const COLUMNS = [
    'queue',
    'id',
    'grp',
    'value',
    'state',
    'priority',
    'attempts',
    'max_attempts',
    'run_at',
    'created_at',
    'finished_at',
    'error',
    'result',
  ]

  function readStored(client: typeof producer, seq: number): Record<string, Stored> | undefined {
    const select = COLUMNS.map((c) => `typeof(${c}) as "${c}.type", ${c} as "${c}"`).join(', ')
    const found = client.prepare(`select ${select} from jobs_job where seq = ?`).get(seq) as Record<string, unknown> | undefined
    return found && Object.fromEntries(COLUMNS.map((c) => [c, { type: found[`${c}.type`] as string, value: found[c] }]))
  }

  const isJson = (text: unknown) => {
    try {
      JSON.parse(text as string)
      return typeof text === 'string'
    } catch {
      return false
    }
  }

  /** Every reading surface, on every row: none may throw; each shows what the row stores. */
  async function everySurfaceAnswers(db: TestDb, written: Written[], countersKept: boolean): Promise<void> {
    const open = { label: db.file, db: db.db, connection: connectionOf(db.db), close: async () => {} }
    const mounted = dashboard(db.db)
    try {
      const counts = queueCounts(db.db)
      const queues = counts.map((c) => c.queue)
      expect((await status(open, { positionals: [] })).json).toMatchObject({ queues: expect.any(Array) })
      const tabs = KNOWN.map((state) => `/queues/${rowsQueue.name}?state=${state}`)
      for (const path of ['/', ...queues.map((q) => `/queues/${encodeURIComponent(q)}`), ...tabs]) {
        const answer = await mounted.fetch(new Request(`http://127.0.0.1${path}`))
        expect(answer.status, `${path}: ${(await answer.text()).slice(0, 300)}`).toBe(200)
      }
      for (const queueName of [undefined, ...queues]) {
        for (const state of [undefined, ...KNOWN] as (JobState | undefined)[]) {
          const seen = new Set<number>()
          let cursor: string | undefined
          do {
            const page = listJobs(db.db, {
              ...(queueName === undefined ? {} : { queue: queueName }),
              ...(state ? { state } : {}),
              limit: 2,
              ...(cursor ? { cursor } : {}),
            })
            for (const job of page.jobs) {
              expect(seen.has(job.seq), `job ${job.seq} listed twice`).toBe(false)
              seen.add(job.seq)
            }
            cursor = page.next ?? undefined
          } while (cursor)
          if (state === undefined && queueName === undefined) expect(seen.size).toBe(written.length)
        }
        await list(open, { positionals: [], ...(queueName === undefined ? {} : { queue: queueName }) })
      }
      const records = listJobs(db.db, { limit: 1_000 }).jobs
      for (const job of written) {
        const stored = readStored(db.client, job.seq)!
        const shownMalformed = Object.fromEntries(
          SHOWN.filter(([column, keeps]) => !keeps(stored[column]!)).map(([column]) => [column, expect.any(String)]),
        )
        const record = records.find((listed) => listed.seq === job.seq)!
        expect(record.malformed ?? {}, `${job.seq}: ${JSON.stringify(record)}`).toEqual(shownMalformed)
        if (typeof stored.id!.value !== 'string' || typeof stored.queue!.value !== 'string') continue
        // A snapshot shows no priority nor value, and a result only once its job has ended.
        const { priority: _p, value: _v, result, ...snapshotMalformed } = shownMalformed
        if (result && ['done', 'failed', 'canceled'].includes(stored.state!.value as string)) snapshotMalformed.result = result
        const q = defineQueue(stored.queue!.value)
        const snapshot = getJob(db.db, q, stored.id!.value)!
        expect(snapshot.malformed ?? {}).toEqual(snapshotMalformed)
        for (const [field, column] of [
          ['runAt', 'run_at'],
          ['createdAt', 'created_at'],
          ['finishedAt', 'finished_at'],
        ] as const) {
          if (isTime(stored[column]!)) expect(snapshot[field]!.getTime()).toBe(stored[column]!.value)
          else expect(snapshot[field]).toBeNull()
        }
        const watched = watch(db.db, q, stored.id!.value)
        expect({ ...(await watched.next()).value, ahead: 0 }).toEqual({ ...snapshot, ahead: 0 })
        await watched.return()
        expect(inspectJob(db.db, q, stored.id!.value)).toMatchObject({ seq: job.seq, malformed: record.malformed })
        // Numbers and times show as stored: never NaN, nor a time that is not one.
        // Before any writer set the database up, jobs_queue lists no queue another program added jobs to: name it.
        const facts = (await show(open, { positionals: [stored.id!.value], ...(countersKept ? {} : { queue: stored.queue!.value }) })).text
          .split('\n')
          .filter((line) => /^(priority|attempts|added|run at|ended|lease) /.test(line))
        for (const line of facts) expect(line).not.toMatch(/(^|[^'])NaN|Invalid (time|Date)/)
        const page = await mounted.fetch(
          new Request(`http://127.0.0.1/queues/${encodeURIComponent(stored.queue!.value)}/jobs/${encodeURIComponent(stored.id!.value)}`),
        )
        expect(page.status, (await page.text()).slice(0, 300)).toBe(200)
      }
      // The counters, kept by the engine and the triggers, hold what the rows say, once a writer installed the triggers.
      if (!countersKept) return
      const actual = db.client.prepare(`select queue, state, count(*) as n from jobs_job group by queue, state`).all() as {
        queue: unknown
        state: string
        n: number
      }[]
      for (const c of counts) {
        for (const state of KNOWN) {
          const n = actual
            .filter(
              (a) =>
                (typeof a.queue === 'string' ? a.queue : `X'${(a.queue as Buffer).toString('hex').toUpperCase()}'`) === c.queue &&
                a.state === state,
            )
            .reduce((sum, a) => sum + a.n, 0)
          expect(c[state as JobState], `${c.queue} ${state}`).toBe(n)
        }
      }
    } finally {
      mounted.close()
    }
  }

  interface Written {
    seq: number
    /** The row as first stored, read back with plain SQL. */
    stored: Record<string, Stored>
  }

  test('JOB-18 every reading surface answers and shows each row as stored; a worker brings every row it could claim to an end, its error naming a broken column', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(row, { minLength: 1, maxLength: 8 }), fc.boolean(), async (rows, triggersFirst) => {
        const db = freshDb('rows.db')
        const writer = db.reopen().client
        const errors: unknown[] = []
        let rowsWorker: Worker | undefined
        try {
          // With the triggers in place, or before any writer installed them: a reader never does.
          if (triggersFirst) await appHasWritten(db.db)
          const written: Written[] = rows.map((r, i) => {
            const { blobId, ...columns } = r
            const values: Record<string, unknown> = { ...columns, id: blobId ? Buffer.from(`row-${i}`) : `row-${i}` }
            const names = Object.keys(values)
            const seq = Number(
              writer
                .prepare(`insert into jobs_job (${names.join(', ')}) values (${names.map(() => '?').join(', ')})`)
                .run(...Object.values(values)).lastInsertRowid,
            )
            return { seq, stored: readStored(writer, seq)! }
          })
          await everySurfaceAnswers(db, written, triggersFirst)

          const runs = new Set<number>()
          rowsWorker = work(db.db, rowsQueue, (_value, run) => void runs.add(run.attempt), {
            pollInterval: '5ms',
            onError: (error) => errors.push(error),
          })
          const claimable = written.filter((w) => w.stored.queue!.value === rowsQueue.name && w.stored.id!.type === 'text')
          const current = (w: Written) => readStored(db.client, w.seq)
          const unsettled = () =>
            claimable.filter((w) => {
              const after = current(w)
              if (after === undefined) return false
              const { state, run_at } = after
              if (state!.value === 'running') return true
              if (state!.value !== 'waiting' && state!.value !== 'scheduled') return false
              return !(isTime(run_at!) && (run_at!.value as number) > Date.now() + 60_000)
            })
          const deadline = performance.now() + 10_000
          while (unsettled().length > 0) {
            if (performance.now() > deadline)
              throw new Error(
                `rows still waiting or running: ${JSON.stringify(
                  unsettled().map((w) => ({ first: w.stored, after: current(w) })),
                  (_, v) => (typeof v === 'bigint' ? `${v}n` : v),
                )}`,
              )
            await new Promise((resolve) => setTimeout(resolve, 5))
          }
          await rowsWorker.stop({ timeout: '2s' })
          expect(errors).toEqual([])

          const ended = (stored: Record<string, Stored>) =>
            stored.state!.type === 'text' && ['done', 'failed', 'canceled'].includes(stored.state!.value as string)
          for (const w of written) {
            const first = w.stored
            const after = readStored(db.client, w.seq)
            if (after === undefined) {
              // Pruned: only an ended job of the worker's queue, whose finish time is older than its retention.
              expect(ended(first) && first.queue!.value === rowsQueue.name).toBe(true)
              expect(first.finished_at!.value as number).toBeLessThan(Date.now() - RETENTION_MS)
              continue
            }
            if (!claimable.includes(w)) continue
            const firstState = first.state!.value as string
            const broken = RULES.find(([column, keeps]) => !keeps(first[column]!))?.[0]
            const error = String(after.error!.value)
            if (first.state!.type !== 'text' || !KNOWN.includes(firstState)) {
              expect(after.state!.value).toBe('failed')
              expect(error).toMatch(/^the job was written in the unknown state/)
            } else if (ended(first)) {
              expect(after, 'an ended row is left as it was').toEqual(first)
            } else if (broken) {
              expect(after.state!.value).toBe('failed')
              expect(error.startsWith(`${broken} holds `), `${error} should name ${broken}`).toBe(true)
              expect(error).toMatch(/the row breaks the table protocol$/)
            } else if (after.state!.value === 'failed') {
              // Its value is no JSON, or it counted more attempts than it was given, or it was running with no lease on its last attempt.
              const lastAttempt = firstState === 'running' && (first.attempts!.value as number) >= (first.max_attempts!.value as number)
              const beyondMax = firstState !== 'running' && (first.attempts!.value as number) > (first.max_attempts!.value as number)
              if (lastAttempt) expect(error).toMatch(/^attempt \d+ of \d+ ended without an outcome: it was running with no lease/)
              else if (beyondMax && isJson(first.value!.value))
                expect(error).toMatch(
                  /^attempts holds \d+, not a count of runs within max_attempts \(\d+\): the row breaks the table protocol$/,
                )
              else
                expect(
                  !isJson(first.value!.value) &&
                    /^(value holds .*, not JSON|attempts holds \d+, not a count of runs within max_attempts)/.test(error),
                  error,
                ).toBe(true)
            } else if (after.state!.value !== 'done') {
              // Still to come, and rightly: a valid time later than after.
              expect(['waiting', 'scheduled']).toContain(after.state!.value)
              expect(isTime(after.run_at!) && (after.run_at!.value as number) > Date.now()).toBe(true)
            }
          }
          await everySurfaceAnswers(
            db,
            written.filter((w) => readStored(db.client, w.seq) !== undefined),
            true,
          )
        } finally {
          await rowsWorker?.stop({ timeout: '2s' })
          db.close()
        }
      }),
      // A failing case is reported as found: shrinking it would start a worker per try.
      { numRuns: 80, endOnFailure: true },
    )
    // 80 databases, each with a worker started and stopped: about 25 s on a quiet 2-core machine, more beside other test files.
  }, 180_000)
})

test('JOB-18 a watch of a row holding a blob yields it once, not again at each refresh', async () => {
  insertStored({
    queue: queue.name,
    id: 'blob-error',
    value: '{"n": 1}',
    state: 'waiting',
    run_at: Date.now() + 3_600_000,
    error: Buffer.from([1, 2]),
  })
  const watched = watch(t.db, queue, 'blob-error')
  expect((await watched.next()).value).toMatchObject({ state: 'waiting', error: "X'0102'", malformed: { error: "X'0102'" } })
  // Both are changes made in this process: the watch refreshes at once after each, reading the row again.
  pauseQueue(t.db, queue)
  cancel(t.db, queue, 'blob-error')
  expect((await watched.next()).value).toMatchObject({ state: 'canceled' })
  expect((await watched.next()).done).toBe(true)
})
