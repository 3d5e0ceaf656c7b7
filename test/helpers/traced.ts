/**
 * Jobs added in a trace, through the public path: an OpenTelemetry SDK registered globally, as an app's setup
 * registers it, for the length of one call made inside a request's span, so that the jobs it adds store that
 * request's trace context. The SDK is unregistered afterwards: the rest of the test file records nothing.
 */
import { context, propagation, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base'

/** Calls `add` inside a request's span with an SDK registered; resolves the request's trace id, which the jobs it adds store. */
export async function addedInTrace(add: () => unknown): Promise<string> {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  trace.setGlobalTracerProvider(new BasicTracerProvider())
  try {
    const request = trace.getTracer('the app').startSpan('POST /messages')
    await context.with(trace.setSpan(context.active(), request), add)
    request.end()
    return request.spanContext().traceId
  } finally {
    trace.disable()
    propagation.disable()
    context.disable()
  }
}
