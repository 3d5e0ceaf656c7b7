/**
 * Metrics, named as OpenTelemetry's semantic conventions for messaging name
 * them where they have a name, under `drizzle_jobs.` where they do not:
 *
 * - `messaging.client.sent.messages` ({message}): jobs added;
 * - `messaging.client.consumed.messages` ({message}): runs started;
 *   both asynchronous counters, the totals this process keeps read as the SDK
 *   collects: a run adds one to a number, where a counter's `add` would hash
 *   its attributes each time (the data exported is the same monotonic sum);
 * - `messaging.process.duration` (s): runs, by `drizzle_jobs.outcome`; its
 *   count is the runs ended by outcome;
 * - `drizzle_jobs.job.wait.duration` (s): from a job's `run_at` to its run's
 *   start;
 * - `drizzle_jobs.queue.jobs` ({job}): the jobs of each queue a worker runs,
 *   by `drizzle_jobs.job.state`, an observable gauge read from the counts the
 *   engine keeps;
 * - `drizzle_jobs.lease.renewals.missed` ({renewal}): renewals of a worker's
 *   lease that gave up (a database busy or unreachable for a third of a
 *   lease), after which its runs may be taken over.
 *
 * With no SDK registered the instruments are OpenTelemetry's no-ops.
 */
import type * as Otel from '@opentelemetry/api'
import type { CountsRow } from '../dialect/index.js'
import { STATES } from '../types.js'
import { MESSAGING_SYSTEM, otel, providers } from './api.js'
import type { RunOutcome } from './trace.js'

const METER_NAME = 'drizzle-jobs'
/** The buckets the conventions give for durations, in seconds. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]

interface Instruments {
  readonly meter: Otel.Meter
  /** Jobs added by this process since the provider was first used, by queue: `messaging.client.sent.messages`. */
  readonly sent: Map<string, number>
  /** Runs started, by queue: `messaging.client.consumed.messages`. */
  readonly consumed: Map<string, number>
  readonly processDuration: Otel.Histogram
  readonly waitDuration: Otel.Histogram
  readonly renewalsMissed: Otel.Counter
  readonly queueJobs: Otel.ObservableGauge
}

/** The instruments of the meter provider in use, made once per provider. */
let made: { provider: unknown; instruments: Instruments | null } | null = null

/** The instruments, or null where no SDK is registered (the global meter is the API's no-op one): nothing is recorded. */
function instruments(): Instruments | null {
  const otelApi = otel()
  if (otelApi === null) return null
  const provider = providers.meterProvider ?? otelApi.metrics.getMeterProvider()
  if (made?.provider !== provider) {
    const meter = (provider as Otel.MeterProvider).getMeter(METER_NAME)
    made = { provider, instruments: meter === otelApi.createNoopMeter() ? null : makeInstruments(meter) }
  }
  return made.instruments
}

function makeInstruments(meter: Otel.Meter): Instruments {
  const sent = new Map<string, number>()
  const consumed = new Map<string, number>()
  meter
    .createObservableCounter('messaging.client.sent.messages', { unit: '{message}', description: 'Jobs added.' })
    .addCallback((result) => {
      for (const [queue, total] of sent) result.observe(total, attributesOf(queue).send)
    })
  meter
    .createObservableCounter('messaging.client.consumed.messages', { unit: '{message}', description: 'Runs started.' })
    .addCallback((result) => {
      for (const [queue, total] of consumed) result.observe(total, attributesOf(queue).process)
    })
  return {
    meter,
    sent,
    consumed,
    processDuration: meter.createHistogram('messaging.process.duration', {
      unit: 's',
      description: 'How long runs took, by outcome.',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS },
    }),
    waitDuration: meter.createHistogram('drizzle_jobs.job.wait.duration', {
      unit: 's',
      description: "From a job's run_at to its run's start.",
      advice: { explicitBucketBoundaries: DURATION_BUCKETS },
    }),
    renewalsMissed: meter.createCounter('drizzle_jobs.lease.renewals.missed', {
      unit: '{renewal}',
      description: "Renewals of a worker's lease that gave up.",
    }),
    queueJobs: meter.createObservableGauge('drizzle_jobs.queue.jobs', { unit: '{job}', description: 'Jobs of a queue, by state.' }),
  }
}

/** A queue's attributes, made once: the SDK reads them on every recording, and a run records twice. */
interface QueueAttributes {
  readonly plain: Otel.Attributes
  readonly send: Otel.Attributes
  readonly process: Otel.Attributes
  readonly byOutcome: Map<RunOutcome, Otel.Attributes>
  readonly byState: Map<string, Otel.Attributes>
}

const queueAttributes = new Map<string, QueueAttributes>()

function attributesOf(queue: string): QueueAttributes {
  let made = queueAttributes.get(queue)
  if (!made) {
    const plain = { 'messaging.system': MESSAGING_SYSTEM, 'messaging.destination.name': queue }
    const process = { ...plain, 'messaging.operation.name': 'process' }
    made = {
      plain,
      send: { ...plain, 'messaging.operation.name': 'send' },
      process,
      byOutcome: new Map(),
      byState: new Map(STATES.map((state) => [state, { ...plain, 'drizzle_jobs.job.state': state }])),
    }
    queueAttributes.set(queue, made)
  }
  return made
}

function outcomeAttributes(queue: string, outcome: RunOutcome): Otel.Attributes {
  const { process, byOutcome } = attributesOf(queue)
  let attributes = byOutcome.get(outcome)
  if (!attributes) byOutcome.set(outcome, (attributes = { ...process, 'drizzle_jobs.outcome': outcome }))
  return attributes
}

/** Counts jobs added to `queue`. */
export function jobsAdded(queue: string, count: number): void {
  const made = instruments()
  if (made && count > 0) made.sent.set(queue, (made.sent.get(queue) ?? 0) + count)
}

/** Counts a run's start, and how long its job waited past its `run_at` (ms since the epoch) until `startedAt`. */
export function runStarted(queue: string, runAt: number, startedAt: number): void {
  const made = instruments()
  if (!made) return
  made.consumed.set(queue, (made.consumed.get(queue) ?? 0) + 1)
  made.waitDuration.record(Math.max(0, startedAt - runAt) / 1_000, attributesOf(queue).plain)
}

/** Records a run's end: how it ended and how long it took, in ms. */
export function runEnded(queue: string, outcome: RunOutcome, ms: number): void {
  instruments()?.processDuration.record(ms / 1_000, outcomeAttributes(queue, outcome))
}

/** Counts a renewal of a worker's lease that gave up. */
export function renewalMissed(queue: string): void {
  instruments()?.renewalsMissed.add(1, attributesOf(queue).plain)
}

/**
 * Observes the jobs of `queue` by state, read by `read` (the counts the engine keeps) each time the SDK collects;
 * answers the stop.
 */
export function observeQueue(queue: string, read: () => Promise<CountsRow | undefined>): () => void {
  const made = instruments()
  if (!made) return () => {}
  const callback = async (result: Otel.ObservableResult) => {
    const counts = await read().catch(() => undefined)
    if (!counts) return
    const { byState } = attributesOf(queue)
    for (const state of STATES) result.observe(counts[state], byState.get(state))
  }
  made.queueJobs.addCallback(callback)
  return () => made.queueJobs.removeCallback(callback)
}
