/**
 * OpenTelemetry traces, on each contract database: the SDK's in-memory exporter takes the spans of an add made inside
 * a request's span and of the runs of its job, and the test checks their names, kinds, parents and attributes, the
 * trace context stored with the job, the steps' spans and the errors recorded; across processes on each driver that
 * several processes share (on PostgreSQL node-postgres and postgres.js 3.4 and 4). The metrics, read by a reader the
 * test collects from: the jobs and runs counted, and a renewal of a worker's lease that gave up, its database held by
 * another connection. Without an SDK nothing is stored.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { drizzle } from 'drizzle-orm/node-postgres'
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js'
import pg from 'pg'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { configureTelemetry, type Database, defineQueue, enqueue, enqueueMany, type Run, schedule, signal, work } from '../src/index.js'
import { runSchedule } from '../src/testing/index.js'
import { CONTRACT_DATABASES, CONTRACT_TEST_MS, eachContractDb } from './helpers/dialects.js'
import { type HeldLock, holdPgTableLock, holdSqliteWriteLock } from './helpers/locks.js'
import { openPostgresJs, POSTGRES_JS } from './helpers/postgres-js.js'
import { waitFor } from './helpers/wait.js'
import { started, startFixture } from './helpers/processes.js'
import { traced } from './fixtures/contract-queues.js'
import { MAX_ERROR_BYTES } from '../src/limits.js'

const exporter = new InMemorySpanExporter()
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
const contextManager = new AsyncLocalStorageContextManager()

/** Registers the SDK globally, as an app's setup does. */
function registerSdk(): void {
  context.setGlobalContextManager(contextManager.enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  trace.setGlobalTracerProvider(provider)
}

/** Unregisters it: the API answers its no-op tracer again. */
function unregisterSdk(): void {
  trace.disable()
  propagation.disable()
  context.disable()
}

afterAll(() => unregisterSdk())

/** A reader the test collects from when it wants. */
class TestReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

/** The data points collected now, by metric name. */
async function collected(reader: MetricReader): Promise<Map<string, { attributes: Record<string, unknown>; value: unknown }[]>> {
  const { resourceMetrics } = await reader.collect()
  const byName = new Map<string, { attributes: Record<string, unknown>; value: unknown }[]>()
  for (const scope of resourceMetrics.scopeMetrics)
    for (const metric of scope.metrics) byName.set(metric.descriptor.name, metric.dataPoints as never)
  return byName
}

const spansNamed = (name: string): ReadableSpan[] => exporter.getFinishedSpans().filter((span) => span.name === name)
const parentOf = (span: ReadableSpan): string | undefined => span.parentSpanContext?.spanId

describe.each(CONTRACT_DATABASES)('%s', { timeout: CONTRACT_TEST_MS }, (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`
  beforeAll(() => registerSdk())
  afterEach(() => exporter.reset())

  test(`${on} an add inside a request's span is a PRODUCER span, its child; each run of the job is a CONSUMER span, the add's child, with its attempt, outcome, steps and error`, async () => {
    const queue = defineQueue<{ n: number }>('traced', { attempts: 2, backoff: { initial: '10ms', max: '10ms' } })
    const tracer = trace.getTracer('the app')
    const request = tracer.startSpan('POST /messages')
    await context.with(trace.setSpan(context.active(), request), async () => {
      await enqueue(t.db, queue, { n: 1 }, { id: 'job-1' })
    })
    request.end()
    const [send] = spansNamed('send traced')
    expect(send).toBeDefined()
    expect(send!.kind).toBe(SpanKind.PRODUCER)
    expect(parentOf(send!)).toBe(request.spanContext().spanId)
    expect(send!.spanContext().traceId).toBe(request.spanContext().traceId)
    expect(send!.attributes).toMatchObject({
      'messaging.system': 'drizzle-jobs',
      'messaging.operation.name': 'send',
      'messaging.operation.type': 'send',
      'messaging.destination.name': 'traced',
      'messaging.message.id': 'job-1',
    })
    // The add's context is stored with the job, as W3C trace context.
    const [row] = await t.query<{ trace_context: string }>(`select trace_context from jobs_job where id = 'job-1'`)
    const stored = JSON.parse(row!.trace_context) as { traceparent: string }
    expect(stored.traceparent).toBe(`00-${send!.spanContext().traceId}-${send!.spanContext().spanId}-01`)

    // The first attempt keeps a step and throws; the second finds the step kept and returns.
    const handler = async (_value: { n: number }, run: Run) => {
      await run.step('lookup', () => 'found')
      if (run.attempt === 1) throw new Error(`attempt one fails ${'x'.repeat(100_000)}`)
      return { ok: true }
    }
    workers.push(work(t.db, queue, handler, { pollInterval: '20ms' }))
    await waitFor(() => spansNamed('process traced').length === 2 || undefined, 'both runs to end their spans')
    const runs = spansNamed('process traced').sort(
      (a, b) => Number(a.attributes['drizzle_jobs.attempt']) - Number(b.attributes['drizzle_jobs.attempt']),
    )
    for (const run of runs) {
      expect(run.kind).toBe(SpanKind.CONSUMER)
      expect(run.spanContext().traceId).toBe(request.spanContext().traceId)
      expect(parentOf(run)).toBe(send!.spanContext().spanId)
      expect(run.attributes).toMatchObject({
        'messaging.system': 'drizzle-jobs',
        'messaging.operation.name': 'process',
        'messaging.operation.type': 'process',
        'messaging.destination.name': 'traced',
        'messaging.message.id': 'job-1',
      })
    }
    const [first, second] = runs
    expect(first!.attributes).toMatchObject({ 'drizzle_jobs.attempt': 1, 'drizzle_jobs.outcome': 'retry' })
    expect(first!.status.code).toBe(SpanStatusCode.ERROR)
    const exception = first!.events.find((event) => event.name === 'exception')
    const message = String(exception?.attributes?.['exception.message'])
    expect(message).toMatch(/^attempt one fails x+/)
    // Cut to the size the job keeps of an error.
    expect(Buffer.byteLength(message)).toBeLessThanOrEqual(MAX_ERROR_BYTES)
    expect(second!.attributes).toMatchObject({ 'drizzle_jobs.attempt': 2, 'drizzle_jobs.outcome': 'done' })
    expect(second!.status.code).not.toBe(SpanStatusCode.ERROR)
    // The step's function ran once, in the first attempt, in a span of its own; the second found it kept.
    const steps = spansNamed('step lookup')
    expect(steps).toHaveLength(1)
    expect(parentOf(steps[0]!)).toBe(first!.spanContext().spanId)
    expect(second!.events.map((event) => [event.name, event.attributes?.['drizzle_jobs.step']])).toContainEqual(['step replayed', 'lookup'])
  })

  // PGlite serves one process: no other process holds its database. On PostgreSQL, each driver an app may bring adds
  // the job in this process and runs it in the other (contract-child.ts's PG_DRIVER): node-postgres, and postgres.js
  // 3.4 and 4, their tests named [postgres] [postgres.js] and [postgres] [postgres.js 4].
  for (const driver of dialect === 'pglite' ? [] : dialect === 'postgres' ? (['node-postgres', ...POSTGRES_JS] as const) : [null])
    test(`${on}${driver === null || driver === 'node-postgres' ? '' : ` [${driver}]`} the context flows from an HTTP request that adds a job in its transaction, in this process, to the run in a worker of another process`, async () => {
      const tracer = trace.getTracer('the app')
      const postgresJs = driver === null || driver === 'node-postgres' ? null : openPostgresJs(driver, t.address, { max: 2 })
      const server = createServer((request, response) => {
        // The server's span continues the client's trace, as an HTTP instrumentation's does.
        const incoming = propagation.extract(ROOT_CONTEXT, request.headers)
        const span = tracer.startSpan('POST /messages', { kind: SpanKind.SERVER }, incoming)
        context
          .with(trace.setSpan(incoming, span), async () => {
            if (t.sqlite) t.sqlite.transaction((tx) => void enqueue(tx, traced, { n: 1 }, { id: 'from-http' }))
            else if (postgresJs)
              await drizzlePostgresJs(postgresJs).transaction(async (tx) => void (await enqueue(tx, traced, { n: 1 }, { id: 'from-http' })))
            else await t.inTransaction!(async (tx) => void (await enqueue(tx, traced, { n: 1 }, { id: 'from-http' })))
          })
          .then(
            () => response.end('added'),
            (error: unknown) => response.writeHead(500).end(String(error)),
          )
          .finally(() => span.end())
      })
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      try {
        const client = tracer.startSpan('client', { kind: SpanKind.CLIENT })
        const headers: Record<string, string> = {}
        propagation.inject(trace.setSpan(ROOT_CONTEXT, client), headers)
        const { port } = server.address() as AddressInfo
        const answer = await fetch(`http://127.0.0.1:${port}/messages`, { method: 'POST', headers })
        client.end()
        expect(await answer.text()).toBe('added')
        const [send] = spansNamed('send traced')
        expect(send!.spanContext().traceId).toBe(client.spanContext().traceId)
        expect(parentOf(send!)).toBe(spansNamed('POST /messages')[0]!.spanContext().spanId)

        const child = startFixture('contract-child.ts', ['work', t.address, 'traced'], driver === null ? {} : { PG_DRIVER: driver })
        await started(child, 'working', 'the traced worker')
        const printed = () =>
          child
            .output()
            .split('\n')
            .filter((line) => line.startsWith('span '))
            .map((line) => JSON.parse(line.slice(5)) as { name: string; kind: number; traceId: string; spanId: string; parent?: string })
        await waitFor(() => printed().some((span) => span.name === 'process traced') || undefined, 'the run in the other process')
        const run = printed().find((span) => span.name === 'process traced')!
        expect(run).toMatchObject({ kind: SpanKind.CONSUMER, traceId: client.spanContext().traceId, parent: send!.spanContext().spanId })
        expect(printed().find((span) => span.name === 'step one')).toMatchObject({
          traceId: client.spanContext().traceId,
          parent: run.spanId,
        })
      } finally {
        await new Promise((resolve) => server.close(resolve))
        await postgresJs?.end({ timeout: 0 })
      }
    })

  test(`${on} a schedule's slot starts a trace of its own, whatever the context it is fired in, and its run continues it`, async () => {
    const queue = defineQueue<{ kind: string }>('digests')
    await schedule(t.db, queue, 'daily', { cron: '0 8 * * *', value: { kind: 'daily' } })
    const request = trace.getTracer('the app').startSpan('an unrelated request')
    const { id } = await context.with(trace.setSpan(context.active(), request), async () => runSchedule(t.db, queue, 'daily'))
    request.end()
    const [send] = spansNamed('send digests')
    expect(send!.attributes).toMatchObject({ 'messaging.message.id': id, 'messaging.destination.name': 'digests' })
    expect(parentOf(send!)).toBeUndefined()
    expect(send!.spanContext().traceId).not.toBe(request.spanContext().traceId)
    workers.push(work(t.db, queue, () => undefined, { pollInterval: '20ms' }))
    await waitFor(() => spansNamed('process digests').length === 1 || undefined, 'the slot to run')
    const [run] = spansNamed('process digests')
    expect(run!.spanContext().traceId).toBe(send!.spanContext().traceId)
    expect(parentOf(run!)).toBe(send!.spanContext().spanId)
  })

  test(`${on} a run resumed after a sleep and after an event continues the trace of the add: each run's span is the add's child, the parked ones say so`, async () => {
    const queue = defineQueue<{ n: number }>('resumed')
    const request = trace.getTracer('the app').startSpan('POST /orders')
    await context.with(trace.setSpan(context.active(), request), async () => {
      await enqueue(t.db, queue, { n: 1 }, { id: 'order' })
    })
    request.end()
    const [send] = spansNamed('send resumed')
    workers.push(
      work(
        t.db,
        queue,
        async (_value, run) => {
          await run.sleep('nap', 50)
          await run.waitForEvent('paid')
          return 'shipped'
        },
        { pollInterval: '20ms' },
      ),
    )
    await waitFor(
      async () =>
        (await t.query<{ waits_for: string | null }>(`select waits_for from jobs_job where id = 'order'`))[0]?.waits_for === 'event:paid',
      'the run to wait for its event',
    )
    await context.with(ROOT_CONTEXT, () => signal(t.db as Database, queue, 'order', 'paid', null))
    await waitFor(() => spansNamed('process resumed').length === 3 || undefined, 'the three runs to end their spans')
    const runs = spansNamed('process resumed')
    for (const run of runs) {
      expect(run.spanContext().traceId).toBe(request.spanContext().traceId)
      expect(parentOf(run)).toBe(send!.spanContext().spanId)
      expect(run.attributes).toMatchObject({ 'messaging.message.id': 'order', 'drizzle_jobs.attempt': 1 })
    }
    expect(runs.map((run) => run.attributes['drizzle_jobs.outcome'])).toEqual(['parked', 'parked', 'done'])
  })

  test(`${on} a batch added together is one PRODUCER span, whose context each job keeps`, async () => {
    const queue = defineQueue<{ n: number }>('batch')
    await enqueueMany(t.db, queue, [
      { value: { n: 1 }, id: 'a' },
      { value: { n: 2 }, id: 'b' },
    ])
    const [send] = spansNamed('send batch')
    expect(send!.attributes).toMatchObject({ 'messaging.batch.message_count': 2, 'messaging.destination.name': 'batch' })
    const rows = await t.query<{ trace_context: string }>(`select trace_context from jobs_job order by id`)
    expect(rows.map((row) => (JSON.parse(row.trace_context) as { traceparent: string }).traceparent)).toEqual([
      `00-${send!.spanContext().traceId}-${send!.spanContext().spanId}-01`,
      `00-${send!.spanContext().traceId}-${send!.spanContext().spanId}-01`,
    ])
  })

  test(`${on} configureTelemetry sends the spans to the app's own provider, not the global one`, async () => {
    const own = new InMemorySpanExporter()
    configureTelemetry({ tracerProvider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(own)] }) })
    try {
      await enqueue(t.db, defineQueue('own'), null, { id: 'mine' })
      expect(own.getFinishedSpans().map((span) => span.name)).toEqual(['send own'])
      expect(spansNamed('send own')).toEqual([])
    } finally {
      configureTelemetry({ tracerProvider: null })
    }
  })

  test(`${on} metrics: jobs added, runs started and ended by outcome with their durations, the wait from run_at, and the queue's jobs by state`, async () => {
    const reader = new TestReader()
    configureTelemetry({ meterProvider: new MeterProvider({ readers: [reader] }) })
    try {
      const queue = defineQueue<{ n: number }>('metered', { attempts: 2, backoff: { initial: '10ms', max: '10ms' } })
      await enqueue(t.db, queue, { n: 1 }, { id: 'one' })
      await enqueueMany(t.db, queue, [{ value: { n: 2 } }, { value: { n: 3 } }])
      await enqueue(t.db, queue, { n: 4 }, { id: 'one' })
      workers.push(
        work(
          t.db,
          queue,
          (value, run) => {
            if (value.n === 1 && run.attempt === 1) throw new Error('once')
          },
          { pollInterval: '20ms' },
        ),
      )
      await waitFor(async () => (await t.query(`select 1 from jobs_job where state = 'done'`)).length === 3 || undefined, 'the runs')
      await waitFor(async () => {
        const metrics = await collected(reader)
        return (metrics.get('messaging.process.duration')?.length ?? 0) >= 2 || undefined
      }, 'the runs to be recorded')
      const metrics = await collected(reader)
      const sum = (name: string) => (metrics.get(name) ?? []).reduce((total, point) => total + Number(point.value), 0)
      expect(sum('messaging.client.sent.messages')).toBe(3)
      expect(sum('messaging.client.consumed.messages')).toBe(4)
      const byOutcome = Object.fromEntries(
        (metrics.get('messaging.process.duration') ?? []).map((point) => [
          point.attributes['drizzle_jobs.outcome'],
          (point.value as { count: number }).count,
        ]),
      )
      expect(byOutcome).toEqual({ done: 3, retry: 1 })
      const waits = metrics.get('drizzle_jobs.job.wait.duration') ?? []
      expect(waits.reduce((total, point) => total + (point.value as { count: number }).count, 0)).toBe(4)
      const byState = Object.fromEntries(
        (metrics.get('drizzle_jobs.queue.jobs') ?? []).map((point) => [point.attributes['drizzle_jobs.job.state'], point.value]),
      )
      expect(byState).toMatchObject({ done: 3, waiting: 0, running: 0, failed: 0 })
      for (const points of metrics.values())
        for (const point of points)
          expect(point.attributes).toMatchObject({ 'messaging.system': 'drizzle-jobs', 'messaging.destination.name': 'metered' })
    } finally {
      configureTelemetry({})
    }
  })

  // PGlite serves one connection: an app's transaction there holds the whole database, and a renewal waits its turn
  // behind it, then lands; none gives up.
  if (dialect !== 'pglite')
    test(`${on} metrics: a renewal of a worker's lease that gives up, its database held by another connection for more than a third of a lease, counts in drizzle_jobs.lease.renewals.missed, with the queue's attributes`, async () => {
      const reader = new TestReader()
      configureTelemetry({ meterProvider: new MeterProvider({ readers: [reader] }) })
      const missed = async () => (await collected(reader)).get('drizzle_jobs.lease.renewals.missed') ?? []
      // Each try of a renewal while another process holds SQLite's write lock is refused with SQLITE_BUSY: at once on
      // libsql, after the connection's busy timeout on better-sqlite3, set to 100 ms here (its default, 5 s, would hold
      // this process still for 5 s at each renewal and at each maintenance pass while the lock is held). On PostgreSQL
      // a renewal passes over a row another transaction locks, and waits with no end for a table's lock: the worker's
      // pool sets lock_timeout, as an app's may, so that each try ends with lock_not_available. Busy errors all: the
      // renewal tries again until a third of the lease has passed, then gives up.
      if (dialect === 'sqlite') await t.run('pragma busy_timeout = 100')
      const pool = dialect === 'postgres' ? new pg.Pool({ connectionString: t.address, lock_timeout: 200 }) : null
      pool?.on('error', () => {})
      const queue = defineQueue('leased')
      await enqueue(t.db, queue, null, { id: 'held' })
      const errors: unknown[] = []
      let finish = () => {}
      const worker = work(pool ? drizzle(pool) : t.db, queue, () => new Promise<void>((resolve) => (finish = resolve)), {
        lease: '3s',
        onError: (error) => errors.push(error),
      })
      let lock: HeldLock | undefined
      try {
        await waitFor(async () => (await t.job('leased', 'held'))?.state === 'running' || undefined, 'the run to start', 60_000)
        // A renewal that lands counts nothing: the worker's row, written by the claim, is renewed once before the lock.
        const expiry = async () => {
          const [row] = await t.query<{ expires_at: Date | number }>('select expires_at from jobs_lease')
          return row === undefined ? undefined : Number(row.expires_at)
        }
        const claimed = await expiry()
        await waitFor(async () => ((await expiry()) ?? 0) > (claimed ?? 0) || undefined, "a renewal of the worker's row", 60_000)
        expect(await missed()).toEqual([])

        lock =
          t.dialect === 'sqlite'
            ? await holdSqliteWriteLock(t.address.replace(/^file:/, ''))
            : await holdPgTableLock(t.inTransaction!, 'jobs_lease')
        await waitFor(async () => (await missed()).length > 0 || undefined, 'a renewal to give up', 60_000)
        await lock.release()
        lock = undefined
        finish()
        await worker.stop({ timeout: 5_000 })
        const [point, ...others] = await missed()
        expect(others).toEqual([])
        expect(point!.attributes).toEqual({ 'messaging.system': 'drizzle-jobs', 'messaging.destination.name': 'leased' })
        // Each renewal the lock outlasted gave up: one at least, more where this process saw the first late.
        expect(point!.value).toBeGreaterThanOrEqual(1)
        // Busy errors all: none went to onError.
        expect(errors).toEqual([])
      } finally {
        await lock?.release()
        finish()
        await worker.stop({ timeout: 1_000 })
        await pool?.end()
        configureTelemetry({})
      }
    })

  test(`${on} with no SDK registered nothing is recorded and no trace context is stored`, async () => {
    unregisterSdk()
    try {
      const queue = defineQueue<{ n: number }>('untraced')
      await enqueue(t.db, queue, { n: 1 }, { id: 'plain' })
      const [row] = await t.query<{ trace_context: string | null }>(`select trace_context from jobs_job where id = 'plain'`)
      expect(row!.trace_context).toBeNull()
      let ran = false
      workers.push(work(t.db, queue, () => void (ran = true), { pollInterval: '20ms' }))
      await waitFor(() => ran || undefined, 'the run')
      expect(exporter.getFinishedSpans()).toEqual([])
    } finally {
      registerSdk()
    }
  })
})
