/**
 * The telemetry rows' set-up, the same in the SQLite and the PostgreSQL benchmark: OpenTelemetry absent, installed
 * with no SDK, or recording every run; and the trace context each drained job carries, as a request's would.
 */
import Module from 'node:module'
import type { TelemetryOptions } from '../../src/index.js'
import type { TelemetryMode } from './tasks.js'

/**
 * Sets up OpenTelemetry as `mode` asks, before the first worker starts (which loads the API): 'absent' hides
 * `@opentelemetry/api` from this process, as in an app that does not install it; 'api' leaves it installed with no
 * SDK registered; 'sdk' registers the SDK's tracer provider with a batch span processor into an exporter that drops
 * what it is given, W3C propagation, an AsyncLocalStorage context manager, and a meter provider with a reader (given
 * to `configure`, the package's configureTelemetry), so that every run records its span and metrics; 'sampled' the
 * same, the jobs' trace contexts then saying which requests were sampled (traceEachJob).
 */
export async function setUpTelemetry(mode: TelemetryMode, configure: (options: TelemetryOptions) => void): Promise<void> {
  if (mode === 'absent') {
    const loader = Module as unknown as { _resolveFilename: (request: string, ...rest: unknown[]) => string }
    const resolveFilename = loader._resolveFilename
    loader._resolveFilename = (request, ...rest) => {
      if (request === '@opentelemetry/api') throw Object.assign(new Error(`Cannot find module '${request}'`), { code: 'MODULE_NOT_FOUND' })
      return resolveFilename.call(loader, request, ...rest)
    }
  }
  if (mode !== 'sdk' && mode !== 'sampled') return
  const { context, propagation, trace } = await import('@opentelemetry/api')
  const { AsyncLocalStorageContextManager } = await import('@opentelemetry/context-async-hooks')
  const { W3CTraceContextPropagator } = await import('@opentelemetry/core')
  const { MeterProvider, MetricReader } = await import('@opentelemetry/sdk-metrics')
  const { BasicTracerProvider, BatchSpanProcessor } = await import('@opentelemetry/sdk-trace-base')
  class Reader extends MetricReader {
    protected override async onForceFlush(): Promise<void> {}
    protected override async onShutdown(): Promise<void> {}
  }
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  const dropping = { export: (_spans: unknown, done: (result: { code: 0 }) => void) => done({ code: 0 }), shutdown: async () => {} }
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] }))
  configure({ meterProvider: new MeterProvider({ readers: [new Reader()] }) })
}

/**
 * The trace context of a request of its own for each job, as `enqueue` stores it inside a span (a W3C traceparent
 * made from the job's seq): the value of `update jobs_job set trace_context = …`, per dialect. Every request was
 * sampled, or (`sampled` mode) one in ten, as a root sampler of 10% decides: its traceparent's flags say so, and
 * the SDK's default sampler (parent-based) follows them.
 */
export function traceEachJob(dialect: 'sqlite' | 'postgres', mode: TelemetryMode): string {
  const flags = mode === 'sampled' ? `(case when seq % 10 = 0 then '01' else '00' end)` : `'01'`
  return dialect === 'sqlite'
    ? `json_object('traceparent', printf('00-%016x%016x-%016x-', 4242, seq, seq + 1) || ${flags})`
    : `json_build_object('traceparent', '00-' || lpad(to_hex(4242), 16, '0') || lpad(to_hex(seq), 16, '0') || '-' || lpad(to_hex(seq + 1), 16, '0') || '-' || ${flags})::text`
}
