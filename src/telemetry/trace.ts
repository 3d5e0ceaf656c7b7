/**
 * Traces, as OpenTelemetry's semantic conventions for messaging name them: a
 * PRODUCER span `send {queue}` for each add, a CONSUMER span `process
 * {queue}` for each run, and a span `step {name}` for each step whose
 * function runs (a step answered from the table adds an event to the run's
 * span instead).
 *
 * The add's context travels with the job, in `jobs_job.trace_context` (its
 * W3C trace context fields as a JSON object), and each run's span is its
 * child: a job is one message, which the conventions let a process span take
 * as its parent, and a team that opens the trace of the request that added a
 * job then finds every attempt of the job in it. A slot of a schedule starts
 * a trace of its own.
 *
 * `@opentelemetry/api` is an optional peer, loaded on first use: without it,
 * or with no SDK registered, nothing is recorded and no context is stored,
 * at the cost of a check.
 */
import type * as Otel from '@opentelemetry/api'
import { andThen, type RunEndParams as Transition } from '../dialect/index.js'
import { MESSAGING_SYSTEM, otel, providers, type Api } from './api.js'
import { storedCarrier } from './trace-id.js'

const TRACER_NAME = 'drizzle-jobs'

/** The tracer of the provider in use, made once per provider: a run asks for it every time. */
let tracer: { provider: unknown; tracer: Otel.Tracer } | null = null

/** The tracer spans are recorded with, or null where no SDK is registered: then an add or a run makes no span at all. */
function tracerOf(otelApi: Api): Otel.Tracer | null {
  const provider = providers.tracerProvider ?? otelApi.trace.getTracerProvider()
  if (provider instanceof otelApi.ProxyTracerProvider && provider.getDelegateTracer(TRACER_NAME) === undefined) return null
  if (tracer?.provider !== provider) tracer = { provider, tracer: provider.getTracer(TRACER_NAME) as Otel.Tracer }
  return tracer.tracer
}

/** An add's producer span: end it once the add is written or refused. */
export interface SendSpan {
  /** The trace context to store with the jobs (JSON text), or null where no trace is recorded. */
  readonly traceContext: string | null
  end(error?: unknown): void
}

/** A span that records nothing, where no SDK is registered or the API is absent. */
const NO_SEND: SendSpan = { traceContext: null, end() {} }

/**
 * Starts the producer span of an add of `count` jobs to `queue` (`id` when it is one): on the app's current context,
 * or, for a schedule's slot, as the root of a trace of its own.
 */
export function startSend(queue: string, { id, count, root = false }: { id?: string; count: number; root?: boolean }): SendSpan {
  const otelApi = otel()
  if (otelApi === null) return NO_SEND
  const attributes: Otel.Attributes = {
    'messaging.system': MESSAGING_SYSTEM,
    'messaging.operation.name': 'send',
    'messaging.operation.type': 'send',
    'messaging.destination.name': queue,
  }
  if (id !== undefined) attributes['messaging.message.id'] = id
  if (count !== 1) attributes['messaging.batch.message_count'] = count
  const tracer = tracerOf(otelApi)
  if (tracer === null) return NO_SEND
  const parent = root ? otelApi.ROOT_CONTEXT : otelApi.context.active()
  const span = tracer.startSpan(`send ${queue}`, { kind: otelApi.SpanKind.PRODUCER, attributes }, parent)
  if (!span.isRecording()) {
    span.end()
    return NO_SEND
  }
  const carrier: Record<string, string> = {}
  otelApi.propagation.inject(otelApi.trace.setSpan(parent, span), carrier)
  return {
    traceContext: Object.keys(carrier).length > 0 ? JSON.stringify(carrier) : null,
    end(error) {
      if (error !== undefined) failed(otelApi, span, error)
      span.end()
    },
  }
}

/** A run's consumer span, and the context its handler runs in. */
export interface ProcessSpan {
  /** Calls `fn` with the run's span as the active one: the handler's own spans are its children. */
  within<T>(fn: () => T): T
  /** Calls a step's function inside a span of its own, a child of the run's. */
  step<T>(name: string, fn: () => T | Promise<T>): T | Promise<T>
  /** Notes a step answered from the table, whose function did not run. */
  replayed(name: string): void
  /** Ends the span with the run's outcome: its next state, or null when it lost its lease. */
  end(transition: Transition | null): void
}

/** The run of one attempt of a job, as its span describes it. */
export interface RunFacts {
  queue: string
  id: string
  attempt: number
  /** The trace context stored with the job (JSON text), or null. */
  traceContext: string | null
}

/** How a run ended, as its span and the metrics say it. */
export type RunOutcome = 'done' | 'failed' | 'retry' | 'snooze' | 'parked' | 'canceled' | 'lease_lost'

/** The outcome of a run that ended as `transition` (null: it lost its lease). */
export function runOutcome(transition: Transition | null): RunOutcome {
  if (transition === null) return 'lease_lost'
  if (transition.state === 'done' || transition.state === 'failed' || transition.state === 'canceled') return transition.state
  if (transition.waitsFor !== null) return 'parked'
  return transition.refund === 1 ? 'snooze' : 'retry'
}

/** Starts the consumer span of a run, the child of the context stored with its job; null where nothing is recorded. */
export function startProcess(run: RunFacts): ProcessSpan | null {
  const otelApi = otel()
  if (otelApi === null) return null
  const tracer = tracerOf(otelApi)
  if (tracer === null) return null
  const parent = storedContext(otelApi, run.traceContext)
  const span = tracer.startSpan(
    `process ${run.queue}`,
    {
      kind: otelApi.SpanKind.CONSUMER,
      attributes: {
        'messaging.system': MESSAGING_SYSTEM,
        'messaging.operation.name': 'process',
        'messaging.operation.type': 'process',
        'messaging.destination.name': run.queue,
        'messaging.message.id': run.id,
        'drizzle_jobs.attempt': run.attempt,
      },
    },
    parent,
  )
  if (!span.isRecording()) {
    span.end()
    return null
  }
  const active = otelApi.trace.setSpan(parent, span)
  return {
    within: (fn) => otelApi.context.with(active, fn),
    step(name, fn) {
      const stepSpan = tracer.startSpan(`step ${name}`, { attributes: { 'drizzle_jobs.step': name } }, active)
      const ended = (error?: unknown) => {
        if (error !== undefined) failed(otelApi, stepSpan, error)
        stepSpan.end()
      }
      try {
        // A step's function answers at once or with a promise: its span ends with it either way.
        return andThen(
          otelApi.context.with(otelApi.trace.setSpan(active, stepSpan), fn),
          (value) => {
            ended()
            return value
          },
          (error: unknown) => {
            ended(error)
            throw error
          },
        )
      } catch (error) {
        ended(error)
        throw error
      }
    },
    replayed(name) {
      span.addEvent('step replayed', { 'drizzle_jobs.step': name })
    },
    end(transition) {
      const outcome = runOutcome(transition)
      span.setAttribute('drizzle_jobs.outcome', outcome)
      if (transition?.error != null && outcome !== 'snooze') {
        // The error as the job keeps it: cut to the stored size.
        span.recordException({ name: 'Error', message: transition.error, stack: transition.errorStack ?? undefined })
        span.setStatus({ code: otelApi.SpanStatusCode.ERROR, message: transition.error })
      } else if (outcome === 'lease_lost') {
        span.setStatus({ code: otelApi.SpanStatusCode.ERROR, message: 'the run lost its lease' })
      }
      span.end()
    },
  }
}

/**
 * The last stored trace context read, and its context: the jobs of one `enqueueMany`, a fan-out, share theirs, and
 * their runs come in a row. A context is immutable, so runs can share it.
 */
let lastStored: { stored: string; context: Otel.Context } | null = null

/** The context a job's stored trace context describes, or the root context where there is none (or it is broken). */
function storedContext(otelApi: Api, stored: string | null): Otel.Context {
  if (stored === null) return otelApi.ROOT_CONTEXT
  if (lastStored?.stored === stored) return lastStored.context
  const context = parsedContext(otelApi, stored)
  lastStored = { stored, context }
  return context
}

function parsedContext(otelApi: Api, stored: string): Otel.Context {
  const carrier = storedCarrier(stored)
  return carrier === null ? otelApi.ROOT_CONTEXT : otelApi.propagation.extract(otelApi.ROOT_CONTEXT, carrier)
}

function failed(otelApi: Api, span: Otel.Span, error: unknown): void {
  const recorded = error instanceof Error ? error : String(error)
  span.recordException(recorded)
  span.setStatus({ code: otelApi.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) })
}
