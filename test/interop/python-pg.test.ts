/**
 * A real Python producer and worker on PostgreSQL (test/interop/jobs_pg.py: psycopg 3 and plain SQL) on a
 * database that Node workers use at the same time: docs/postgres.md's tables and protocol are enough for
 * another language. psycopg comes from Debian's python3-psycopg (or pip); without it these tests fail, saying
 * how to install it.
 */
import { execFile, spawnSync } from 'node:child_process'
import { promisify } from 'node:util'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { context, SpanKind, trace } from '@opentelemetry/api'
import pg from 'pg'
import { afterEach, beforeEach, expect, test } from 'vitest'
import { defineQueue, enqueue, watch, work, type JobState, type Worker } from '../../src/index.js'
import { eachFreshPgDb } from '../helpers/pg.js'
import { type RegisteredSdk, registerSdk, remoteSpan } from '../helpers/tracing.js'
import { waitFor } from '../helpers/wait.js'

const SCRIPT = join(import.meta.dirname, 'jobs_pg.py')
/** The Pythons to try, in order: the one on PATH, then Debian's own, where apt's python3-psycopg installs. */
const PYTHONS = ['python3', '/usr/bin/python3']
const NO_PSYCOPG = `no Python here imports psycopg (tried ${PYTHONS.join(', ')}): install Debian's python3-psycopg (apt-get install python3-psycopg), or psycopg 3 with pip`

/** The first Python that imports psycopg, looked for once; each test fails (none is skipped) without one. */
let python: string | null | undefined
beforeEach(() => {
  python ??=
    PYTHONS.find((candidate) => spawnSync(candidate, ['-c', 'import psycopg'], { stdio: 'ignore', timeout: 20_000 }).status === 0) ?? null
  if (python === null) throw new Error(NO_PSYCOPG)
})

/**
 * Runs one command of jobs_pg.py and answers the JSON it printed. Asynchronously: while Python waits on a lock
 * that a transaction of this process holds (a worker's first write installs the counting triggers), this
 * process's event loop must go on, or neither would move.
 */
async function py(...args: string[]): Promise<unknown> {
  const { stdout } = await promisify(execFile)(python!, [SCRIPT, ...args], { encoding: 'utf8', timeout: 20_000 })
  return JSON.parse(stdout)
}

const t = eachFreshPgDb()
const workers: Worker[] = []
const listeners: pg.Client[] = []
const watches: AbortController[] = []
/** The OpenTelemetry SDK a test registered, unregistered once its workers stop. */
let sdk: RegisteredSdk | null = null
afterEach(async () => {
  for (const watching of watches.splice(0)) watching.abort()
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: '5s' })))
  await Promise.all(listeners.splice(0).map((client) => client.end()))
  sdk?.unregister()
  sdk = null
})

interface Row {
  seq: string
  id: string
  grp: string | null
  state: string
  attempts: number
  max_attempts: number
  result: unknown
}
const rowsOf = async (queue: string): Promise<Row[]> =>
  (
    await t.pool.query<Row>('select seq, id, grp, state, attempts, max_attempts, result from jobs_job where queue = $1 order by seq', [
      queue,
    ])
  ).rows
const rowOf = async (queue: string, id: string): Promise<Row> => (await rowsOf(queue)).find((row) => row.id === id)!
const count = async (sql: string, ...params: unknown[]): Promise<number> => Number((await t.pool.query(sql, params)).rows[0].count)

/** The notices on the engine's channel from now on, as a client of its own hears them. */
async function hearNotices(): Promise<string[]> {
  const client = new pg.Client({ connectionString: t.url })
  client.on('error', () => {})
  listeners.push(client)
  await client.connect()
  const heard: string[] = []
  client.on('notification', (message) => heard.push(message.payload ?? ''))
  await client.query('listen drizzle_jobs')
  return heard
}

test('JOB-03 [postgres] jobs a Python producer adds with plain SQL, telling the workers with one pg_notify, are run by a Node worker in claim order', async () => {
  const queue = defineQueue<{ n: number }>('interop')
  const ran: string[] = []
  workers.push(
    work(t.db, queue, (value, run) => (ran.push(run.id), { doubled: value.n * 2, group: run.group, attempt: run.attempt }), { slots: 1 }),
  )
  const notices = await hearNotices()

  const items = [
    { id: 'py-1', value: { n: 1 }, group: 'a', priority: 5 },
    { id: 'py-2', value: { n: 2 }, priority: 1 },
    { id: 'py-3', value: { n: 3 }, group: 'b', priority: 9, delay_ms: 300, max_attempts: 3 },
    { id: 'py-1', value: { n: 100 } },
  ]
  expect(await py('add', t.url, 'interop', JSON.stringify(items))).toEqual([
    { id: 'py-1', added: true },
    { id: 'py-2', added: true },
    { id: 'py-3', added: true },
    { id: 'py-1', added: false },
  ])
  // One notice for the producer's transaction, however many jobs it added.
  await waitFor(() => notices.includes('added:interop'), "the producer's notice")
  expect(notices.filter((payload) => payload === 'added:interop')).toEqual(['added:interop'])

  await waitFor(
    async () => (await rowsOf('interop')).filter((row) => row.state === 'done').length === 3,
    'the Python jobs to be done',
    15_000,
  )
  expect((await rowsOf('interop')).map((row) => [row.id, row.attempts, row.max_attempts, row.result])).toEqual([
    ['py-1', 1, 10, { doubled: 2, group: 'a', attempt: 1 }],
    ['py-2', 1, 10, { doubled: 4, group: null, attempt: 1 }],
    ['py-3', 1, 3, { doubled: 6, group: 'b', attempt: 1 }],
  ])
  expect(ran).toEqual(['py-2', 'py-1', 'py-3'])
})

test('JOB-16 [postgres] a Python worker claims a job with FOR UPDATE SKIP LOCKED under a lease, keeps a step, completes it with the fence; Node workers respect its lease meanwhile', async () => {
  const queue = defineQueue<{ n: number }>('pyq', { concurrency: { perGroup: 1 } })
  await enqueue(t.db, queue, { n: 1 }, { id: 'first', group: 'g' })
  await enqueue(t.db, queue, { n: 2 }, { id: 'second', group: 'g' })
  const owner = `python/${process.pid}`
  // A Node watch of the job that Python runs: Python's notices tell it of the claim and the end.
  const notices = await hearNotices()
  const states: JobState[] = []
  const stopWatching = new AbortController()
  watches.push(stopWatching)
  const watching = (async () => {
    for await (const snapshot of watch(t.db, queue, 'first', { signal: stopWatching.signal }))
      if (states.at(-1) !== snapshot.state) states.push(snapshot.state)
  })()
  await waitFor(() => states.length > 0, 'the watch to start')

  const claimed = (await py('claim', t.url, 'pyq', owner, '30000')) as {
    seq: number
    id: string
    group: string
    value: unknown
    attempt: number
  }
  expect(claimed).toMatchObject({ id: 'first', group: 'g', value: { n: 1 }, attempt: 1, max_attempts: 10 })
  const seq = String(claimed.seq)
  await waitFor(() => notices.includes('claimed:pyq'), "the claim's notice")
  expect(await py('step', t.url, seq, owner, '1', 'fetch', JSON.stringify({ fetched: true }))).toEqual({ written: true })
  expect(await py('step', t.url, seq, owner, '2', 'stale', '1')).toEqual({ written: false })
  expect((await t.pool.query('select name, answer from jobs_step where job = $1', [seq])).rows).toEqual([
    { name: 'fetch', answer: { fetched: true } },
  ])

  const ranInNode: string[] = []
  workers.push(work(t.db, queue, (value, run) => (ranInNode.push(run.id), { byNode: value.n })))
  await enqueue(t.db, queue, { n: 3 }, { id: 'other', group: 'h' })
  await waitFor(async () => (await rowOf('pyq', 'other')).state === 'done', 'the Node worker to run the job of another group', 10_000)
  // Its group is at its cap of one run: the Python run counts, so 'second' waits.
  expect(await rowOf('pyq', 'first')).toMatchObject({ state: 'running', attempts: 1 })
  expect(await rowOf('pyq', 'second')).toMatchObject({ state: 'waiting', attempts: 0 })
  expect((await t.pool.query('select owner, attempts from jobs_job where seq = $1', [seq])).rows).toEqual([{ owner, attempts: 1 }])
  expect(await count('select count(*) from jobs_lease where owner = $1 and expires_at > now()', owner)).toBe(1)
  // Each worker's row says where it runs, whatever its language: the Python one's, and the Node one's (its owner's host).
  expect((await t.pool.query('select host, pid from jobs_lease where owner = $1', [owner])).rows).toEqual([
    { host: hostname(), pid: expect.any(Number) },
  ])
  expect((await t.pool.query('select host, pid from jobs_lease where owner <> $1', [owner])).rows).toEqual([
    { host: expect.stringMatching(new RegExp(`^${hostname()}(@|$)`)), pid: process.pid },
  ])

  expect(states).toEqual(['waiting', 'running'])
  expect(await py('complete', t.url, seq, owner, '1', JSON.stringify({ byPython: true }))).toEqual({ landed: true })
  expect(await rowOf('pyq', 'first')).toMatchObject({ state: 'done', attempts: 1, result: { byPython: true } })
  await waitFor(() => notices.includes('ended:pyq'), "the end's notice")
  await watching
  expect(states).toEqual(['waiting', 'running', 'done'])
  expect(await count('select count(*) from jobs_step where job = $1', seq)).toBe(0)
  // The fence: the job no longer runs for that owner, so a second completion (a stale run, say) changes nothing.
  expect(await py('complete', t.url, seq, owner, '1', JSON.stringify({ again: true }))).toEqual({ landed: false })

  await waitFor(async () => (await rowOf('pyq', 'second')).state === 'done', 'the Node worker to run the rest of the group', 10_000)
  expect(ranInNode).toEqual(['other', 'second'])
  expect((await rowOf('pyq', 'first')).result).toEqual({ byPython: true })
  expect(await count('select count(*) from jobs_job where owner is not null')).toBe(0)
})

test("JOB-16 [postgres] the fence refuses a stale Python completion: a Node worker takes back the expired lease and runs the job, then the old run's step and end change nothing", async () => {
  const queue = defineQueue<{ n: number }>('stale', { backoff: { initial: 0, max: 0 } })
  await enqueue(t.db, queue, { n: 1 }, { id: 'taken' })
  const owner = `python/${process.pid}`
  // A lease of 1 ms: the Python run stalls past it at once.
  const claimed = (await py('claim', t.url, 'stale', owner, '1')) as { seq: number; attempt: number }
  expect(claimed).toMatchObject({ id: 'taken', attempt: 1 })
  const seq = String(claimed.seq)

  workers.push(work(t.db, queue, (value, run) => ({ byNode: value.n, attempt: run.attempt })))
  await waitFor(async () => (await rowOf('stale', 'taken')).state === 'done', 'the Node worker to take the job back and run it', 15_000)
  expect(await rowOf('stale', 'taken')).toMatchObject({ attempts: 2, result: { byNode: 1, attempt: 2 } })

  expect(await py('step', t.url, seq, owner, '1', 'late', '1')).toEqual({ written: false })
  expect(await py('complete', t.url, seq, owner, '1', JSON.stringify({ stale: true }))).toEqual({ landed: false })
  expect(await rowOf('stale', 'taken')).toMatchObject({ state: 'done', attempts: 2, result: { byNode: 1, attempt: 2 } })
  expect(await count('select count(*) from jobs_step')).toBe(0)
})

test('JOB-20 [postgres] a Python claim passes over a job that another transaction holds locked (SKIP LOCKED), without waiting for it', async () => {
  const queue = defineQueue<{ n: number }>('skip')
  await enqueue(t.db, queue, { n: 1 }, { id: 'held' })
  await enqueue(t.db, queue, { n: 2 }, { id: 'free' })
  const holder = new pg.Client({ connectionString: t.url })
  holder.on('error', () => {})
  await holder.connect()
  try {
    await holder.query('begin')
    await holder.query(`select seq from jobs_job where id = 'held' for update`)
    // A claim that waited for the held row would wait until the holder lets go, after the claim has answered: the
    // server would show its connection waiting for a row's lock (a tuple's, or the holder's transaction's). That is
    // looked for every 10 ms while the claim runs, where the call's time was bounded, which Python's start (seconds
    // on a loaded machine) took most of. Other locks are not the row's: a commit that notifies waits its turn on the
    // server's notification queue, which every database of the server shares.
    let answered = false
    let waitingForLocks = 0
    const claim = py('claim', t.url, 'skip', `python/${process.pid}`, '30000')
    void claim.then(
      () => (answered = true),
      () => (answered = true),
    )
    while (!answered) {
      const { rows } = await t.pool.query(
        `select count(*)::int as n from pg_locks l join pg_stat_activity a on a.pid = l.pid
         where a.datname = current_database() and not l.granted and l.locktype in ('tuple', 'transactionid')`,
      )
      waitingForLocks = Math.max(waitingForLocks, rows[0].n)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    expect(await claim).toMatchObject({ id: 'free', attempt: 1 })
    expect(waitingForLocks).toBe(0)
    await holder.query('rollback')
  } finally {
    await holder.end()
  }
  expect(await rowOf('skip', 'held')).toMatchObject({ state: 'waiting', attempts: 0 })
})

test('JOB-19 [postgres] a Python worker follows the limits the Node worker stored at its start: a group at its cap is skipped, and at the total it claims nothing', async () => {
  const queue = defineQueue<{ n: number }>('pylimits', { concurrency: { total: 2, perGroup: 1 } })
  await enqueue(t.db, queue, { n: 1 }, { id: 'g1', group: 'g' })
  await enqueue(t.db, queue, { n: 2 }, { id: 'g2', group: 'g' })
  await enqueue(t.db, queue, { n: 3 }, { id: 'h1', group: 'h' })
  await enqueue(t.db, queue, { n: 4 }, { id: 'k1', group: 'k' })
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  workers.push(work(t.db, queue, () => released, { slots: 1 }))
  await waitFor(async () => (await rowOf('pylimits', 'g1')).state === 'running', 'the Node worker to run g1', 10_000)
  expect(
    (await t.pool.query(`select concurrency, concurrency_per_group as "perGroup" from jobs_queue where name = 'pylimits'`)).rows,
  ).toEqual([{ concurrency: 2, perGroup: 1 }])

  const owner = `python/${process.pid}`
  const claimed = (await py('claim', t.url, 'pylimits', owner, '30000')) as { seq: number; id: string }
  expect(claimed).toMatchObject({ id: 'h1' })
  expect(await py('claim', t.url, 'pylimits', owner, '30000')).toBeNull()
  expect((await rowOf('pylimits', 'k1')).state).toBe('waiting')

  expect(await py('complete', t.url, String(claimed.seq), owner, '1', 'null')).toEqual({ landed: true })
  release()
  await waitFor(async () => (await rowsOf('pylimits')).every((row) => row.state === 'done'), 'the Node worker to run the rest', 10_000)
})

test("[postgres] a Python producer's trace context, stored as propagate.inject writes it, is continued by the job's run: its CONSUMER span is the child of the Python span; a broken one starts a trace of its own", async () => {
  sdk = registerSdk()
  const queue = defineQueue<{ n: number }>('pytraced')
  const producer = remoteSpan()
  const items = [
    { id: 'traced', value: { n: 1 }, trace_context: { traceparent: producer.traceparent, tracestate: 'py=1' } },
    { id: 'bad-traceparent', value: { n: 2 }, trace_context: { traceparent: `00-${producer.traceId}-not-a-span-01` } },
    { id: 'not-an-object', value: { n: 3 }, trace_context: producer.traceparent },
  ]
  await py('add', t.url, 'pytraced', JSON.stringify(items))
  const { rows } = await t.pool.query(`select trace_context from jobs_job where id = 'traced'`)
  expect(rows).toEqual([{ trace_context: JSON.stringify({ traceparent: producer.traceparent, tracestate: 'py=1' }) }])

  workers.push(work(t.db, queue, (value) => value.n))
  const runs = await waitFor(
    () => sdk!.spansNamed('process pytraced').length === 3 && sdk!.spansNamed('process pytraced'),
    'the three runs to end their spans',
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
  await waitFor(async () => (await rowsOf('pytraced')).every((row) => row.state === 'done'), 'the three jobs to be done')
})

test('[postgres] a job a Node app adds inside a span carries its trace context to a Python worker, which reads it as the carrier propagate.extract takes', async () => {
  sdk = registerSdk()
  const queue = defineQueue<{ n: number }>('totrace')
  const request = trace.getTracer('the app').startSpan('POST /messages')
  await context.with(trace.setSpan(context.active(), request), () => enqueue(t.db, queue, { n: 1 }, { id: 'from-node' }))
  request.end()
  const [send] = sdk.spansNamed('send totrace')
  expect(send?.spanContext().traceId).toBe(request.spanContext().traceId)

  const owner = `python/${process.pid}`
  const claimed = (await py('claim', t.url, 'totrace', owner, '30000')) as { seq: number; trace_context: unknown }
  expect(claimed).toMatchObject({ id: 'from-node', attempt: 1 })
  expect(claimed.trace_context).toEqual({ traceparent: `00-${request.spanContext().traceId}-${send!.spanContext().spanId}-01` })
  expect(await py('complete', t.url, String(claimed.seq), owner, '1', 'null')).toEqual({ landed: true })
})
