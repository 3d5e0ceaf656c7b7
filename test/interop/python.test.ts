/**
 * A real Python producer and worker (test/interop/jobs.py, Python's own
 * sqlite3 module) on a file that Node workers use at the same time: the
 * README's table layout and protocol are enough for another language.
 */
import { execFileSync } from 'node:child_process'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { context, SpanKind, trace } from '@opentelemetry/api'
import { afterEach, beforeEach, expect, test } from 'vitest'
import { defineQueue, enqueue, work, type Worker } from '../../src/index.js'
import { freshDb, removeTempDirs, type TestDb } from '../helpers/db.js'
import { type RegisteredSdk, registerSdk, remoteSpan } from '../helpers/tracing.js'
import { waitFor } from '../reliability/processes.js'

const SCRIPT = join(import.meta.dirname, 'jobs.py')

/** Runs one command of jobs.py and answers the JSON it printed. */
function python(...args: string[]): unknown {
  const out = execFileSync('python3', [SCRIPT, ...args], { encoding: 'utf8', timeout: 20_000 })
  return JSON.parse(out)
}

let t: TestDb
const workers: Worker[] = []
/** The OpenTelemetry SDK a test registered, unregistered once its workers stop. */
let sdk: RegisteredSdk | null = null
beforeEach(() => {
  t = freshDb()
})
afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: '5s' })))
  sdk?.unregister()
  sdk = null
  t.close()
  removeTempDirs()
})

interface Row {
  seq: number
  id: string
  grp: string | null
  state: string
  attempts: number
  max_attempts: number
  result: string | null
}
const rowsOf = (queue: string): Row[] =>
  t.client
    .prepare(`select seq, id, grp, state, attempts, max_attempts, result from jobs_job where queue = ? order by seq`)
    .all(queue) as Row[]
const rowOf = (queue: string, id: string): Row => rowsOf(queue).find((row) => row.id === id)!

/** The counters the triggers keep, next to a count of the rows: they must agree whoever wrote the rows. */
function countersAgree(queue: string): void {
  const counters = t.client
    .prepare(`select waiting, scheduled, running, done, failed, canceled from jobs_queue where name = ?`)
    .get(queue) as Record<string, number>
  const counted: Record<string, number> = { waiting: 0, scheduled: 0, running: 0, done: 0, failed: 0, canceled: 0 }
  for (const row of rowsOf(queue)) counted[row.state] = (counted[row.state] ?? 0) + 1
  expect(counters).toEqual(counted)
}

test('JOB-03 jobs a Python producer adds with plain SQL are run by a Node worker, in claim order, the counters kept by the triggers', async () => {
  const queue = defineQueue<{ n: number }>('interop')
  const ran: string[] = []
  workers.push(
    work(t.db, queue, (value, run) => (ran.push(run.id), { doubled: value.n * 2, group: run.group, attempt: run.attempt }), { slots: 1 }),
  )

  const items = [
    { id: 'py-1', value: { n: 1 }, group: 'a', priority: 5 },
    { id: 'py-2', value: { n: 2 }, priority: 1 },
    { id: 'py-3', value: { n: 3 }, group: 'b', priority: 9, delay_ms: 300, max_attempts: 3 },
    { id: 'py-1', value: { n: 100 } },
  ]
  expect(python('add', t.file, 'interop', JSON.stringify(items))).toEqual([
    { id: 'py-1', added: true },
    { id: 'py-2', added: true },
    { id: 'py-3', added: true },
    { id: 'py-1', added: false },
  ])

  await waitFor(
    'the Python jobs to be done',
    () => rowsOf('interop').every((row) => row.state === 'done') && rowsOf('interop').length === 3,
    15_000,
  )
  expect(rowsOf('interop').map((row) => [row.id, row.attempts, row.max_attempts, JSON.parse(row.result!)])).toEqual([
    ['py-1', 1, 10, { doubled: 2, group: 'a', attempt: 1 }],
    ['py-2', 1, 10, { doubled: 4, group: null, attempt: 1 }],
    ['py-3', 1, 3, { doubled: 6, group: 'b', attempt: 1 }],
  ])
  expect(ran).toEqual(['py-2', 'py-1', 'py-3'])
  countersAgree('interop')
})

test('JOB-16 a Python worker claims a job by the protocol, keeps a step, completes it under its lease, and Node workers respect its lease meanwhile', async () => {
  const queue = defineQueue<{ n: number }>('pyq', { concurrency: { perGroup: 1 } })
  enqueue(t.db, queue, { n: 1 }, { id: 'first', group: 'g' })
  enqueue(t.db, queue, { n: 2 }, { id: 'second', group: 'g' })
  const owner = `python/${process.pid}`

  const claimed = python('claim', t.file, 'pyq', owner, '30000') as {
    seq: number
    id: string
    group: string
    value: unknown
    attempt: number
  }
  expect(claimed).toMatchObject({ id: 'first', group: 'g', value: { n: 1 }, attempt: 1, max_attempts: 10 })
  expect(python('step', t.file, String(claimed.seq), owner, '1', 'fetch', JSON.stringify({ fetched: true }))).toEqual({ written: true })
  expect(python('step', t.file, String(claimed.seq), owner, '2', 'stale', '1')).toEqual({ written: false })
  countersAgree('pyq')

  const ranInNode: string[] = []
  workers.push(work(t.db, queue, (value, run) => (ranInNode.push(run.id), { byNode: value.n })))
  enqueue(t.db, queue, { n: 3 }, { id: 'other', group: 'h' })
  await waitFor('the Node worker to run the job of another group', () => rowOf('pyq', 'other').state === 'done', 10_000)
  expect(rowOf('pyq', 'first')).toMatchObject({ state: 'running', attempts: 1 })
  expect(rowOf('pyq', 'second')).toMatchObject({ state: 'waiting', attempts: 0 })
  expect(t.client.prepare('select owner, attempts from jobs_job where seq = ?').get(claimed.seq)).toEqual({ owner, attempts: 1 })
  expect(t.client.prepare('select expires_at from jobs_lease where owner = ?').pluck().get(owner)).toBeGreaterThan(Date.now())
  // Each worker's row says where it runs, whatever its language: the Python one's, and the Node one's (its owner's host).
  expect(t.client.prepare('select host, pid from jobs_lease where owner = ?').get(owner)).toEqual({
    host: hostname(),
    pid: expect.any(Number),
  })
  expect(t.client.prepare('select host, pid from jobs_lease where owner <> ?').all(owner)).toEqual([
    { host: expect.stringMatching(new RegExp(`^${hostname()}(@|$)`)), pid: process.pid },
  ])

  expect(python('complete', t.file, String(claimed.seq), owner, '1', JSON.stringify({ byPython: true }))).toEqual({ landed: true })
  expect(rowOf('pyq', 'first')).toMatchObject({ state: 'done', attempts: 1, result: JSON.stringify({ byPython: true }) })
  expect(t.client.prepare('select count(*) from jobs_step where job = ?').pluck().get(claimed.seq)).toBe(0)
  expect(python('complete', t.file, String(claimed.seq), owner, '1', JSON.stringify({ again: true }))).toEqual({ landed: false })

  await waitFor('the Node worker to run the rest of the group', () => rowOf('pyq', 'second').state === 'done', 10_000)
  expect(ranInNode).toEqual(['other', 'second'])
  expect(rowOf('pyq', 'first').result).toBe(JSON.stringify({ byPython: true }))
  expect(t.client.prepare('select count(*) from jobs_job where owner is not null').pluck().get()).toBe(0)
  countersAgree('pyq')
})

test('JOB-19 a Python worker follows the limits the Node worker stored at its start: a group at its cap is skipped, and at the total it claims nothing', async () => {
  const queue = defineQueue<{ n: number }>('pylimits', { concurrency: { total: 2, perGroup: 1 } })
  enqueue(t.db, queue, { n: 1 }, { id: 'g1', group: 'g' })
  enqueue(t.db, queue, { n: 2 }, { id: 'g2', group: 'g' })
  enqueue(t.db, queue, { n: 3 }, { id: 'h1', group: 'h' })
  enqueue(t.db, queue, { n: 4 }, { id: 'k1', group: 'k' })
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  workers.push(work(t.db, queue, () => released, { slots: 1 }))
  await waitFor('the Node worker to run g1', () => rowOf('pylimits', 'g1').state === 'running', 10_000)
  expect(t.client.prepare(`select concurrency, concurrency_per_group as perGroup from jobs_queue where name = 'pylimits'`).get()).toEqual({
    concurrency: 2,
    perGroup: 1,
  })

  const owner = `python/${process.pid}`
  const claimed = python('claim', t.file, 'pylimits', owner, '30000') as { seq: number; id: string }
  expect(claimed).toMatchObject({ id: 'h1' })
  expect(python('claim', t.file, 'pylimits', owner, '30000')).toBeNull()
  expect(rowOf('pylimits', 'k1').state).toBe('waiting')

  expect(python('complete', t.file, String(claimed.seq), owner, '1', 'null')).toEqual({ landed: true })
  release()
  await waitFor('the Node worker to run the rest', () => rowsOf('pylimits').every((row) => row.state === 'done'), 10_000)
  countersAgree('pylimits')
})

test("a Python producer's trace context, stored as propagate.inject writes it, is continued by the job's run: its CONSUMER span is the child of the Python span; a broken one starts a trace of its own", async () => {
  sdk = registerSdk()
  const queue = defineQueue<{ n: number }>('pytraced')
  const producer = remoteSpan()
  const items = [
    { id: 'traced', value: { n: 1 }, trace_context: { traceparent: producer.traceparent, tracestate: 'py=1' } },
    { id: 'bad-traceparent', value: { n: 2 }, trace_context: { traceparent: `00-${producer.traceId}-not-a-span-01` } },
    { id: 'not-an-object', value: { n: 3 }, trace_context: producer.traceparent },
  ]
  python('add', t.file, 'pytraced', JSON.stringify(items))
  expect(t.client.prepare(`select trace_context from jobs_job where id = 'traced'`).pluck().get()).toBe(
    JSON.stringify({ traceparent: producer.traceparent, tracestate: 'py=1' }),
  )

  workers.push(work(t.db, queue, (value) => value.n))
  const runs = await waitFor(
    'the three runs to end their spans',
    () => sdk!.spansNamed('process pytraced').length === 3 && sdk!.spansNamed('process pytraced'),
    15_000,
  )
  const runOf = (id: string) => runs.find((span) => span.attributes['messaging.message.id'] === id)!
  const traced = runOf('traced')
  expect(traced.kind).toBe(SpanKind.CONSUMER)
  expect(traced.spanContext().traceId).toBe(producer.traceId)
  expect(traced.parentSpanContext).toMatchObject({ traceId: producer.traceId, spanId: producer.spanId, isRemote: true })
  expect(traced.spanContext().traceState?.serialize()).toBe('py=1')
  for (const broken of [runOf('bad-traceparent'), runOf('not-an-object')]) {
    expect(broken.parentSpanContext).toBeUndefined()
    expect(broken.spanContext().traceId).not.toBe(producer.traceId)
  }
  // A span ends with its run; the run's end is written by the worker's next flush.
  await waitFor('the three jobs to end done', () => rowsOf('pytraced').every((row) => row.state === 'done'), 10_000)
  expect(rowsOf('pytraced')).toHaveLength(3)
})

test('a job a Node app adds inside a span carries its trace context to a Python worker, which reads it as the carrier propagate.extract takes', async () => {
  sdk = registerSdk()
  const queue = defineQueue<{ n: number }>('totrace')
  const request = trace.getTracer('the app').startSpan('POST /messages')
  context.with(trace.setSpan(context.active(), request), () => enqueue(t.db, queue, { n: 1 }, { id: 'from-node' }))
  request.end()
  const [send] = sdk.spansNamed('send totrace')
  expect(send?.spanContext().traceId).toBe(request.spanContext().traceId)

  const owner = `python/${process.pid}`
  const claimed = python('claim', t.file, 'totrace', owner, '30000') as { seq: number; trace_context: unknown }
  expect(claimed).toMatchObject({ id: 'from-node', attempt: 1 })
  expect(claimed.trace_context).toEqual({ traceparent: `00-${request.spanContext().traceId}-${send!.spanContext().spanId}-01` })
  expect(python('complete', t.file, String(claimed.seq), owner, '1', 'null')).toEqual({ landed: true })
})
