/**
 * OpenTelemetry's SDK registered globally for one test, as an app's setup does: a tracer provider whose finished spans
 * the test reads, the W3C trace context propagator and the AsyncLocalStorage context manager. For tests whose runs
 * are started by a worker the test does not call into, so that only the global registration reaches them.
 */
import { randomBytes } from 'node:crypto'
import { context, propagation, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'

export interface RegisteredSdk {
  /** The spans named `name` that have ended so far. */
  spansNamed(name: string): ReadableSpan[]
  /** Unregisters the SDK: the API answers its no-op tracer again, and nothing more is recorded or stored. */
  unregister(): void
}

/** Registers the SDK globally; call `unregister` when the test ends, so that the file's other tests record nothing. */
export function registerSdk(): RegisteredSdk {
  const exporter = new InMemorySpanExporter()
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }))
  return {
    spansNamed: (name) => exporter.getFinishedSpans().filter((span) => span.name === name),
    unregister() {
      trace.disable()
      propagation.disable()
      context.disable()
    },
  }
}

/** A span of another program, as the W3C `traceparent` of a sampled span names it: random ids the test chose. */
export function remoteSpan(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex')
  const spanId = randomBytes(8).toString('hex')
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` }
}
