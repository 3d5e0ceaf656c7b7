/**
 * The one place where the end of a run becomes the job's next state
 * (JOB-08): a handler's return or throw, a timeout, a lost worker.
 */
import { JobsError } from '../errors.js'
import { encodeJson } from '../json.js'
import { MAX_ERROR_BYTES, MAX_STACK_BYTES, MAX_TIME_MS, MAX_VALUE_BYTES } from '../limits.js'
import type { QueueDefinition } from './definition.js'
import { cutToBytes, storableText } from '../text.js'
import type { RunEndParams } from '../dialect/index.js'
import { runsAloneNext, type Abandonment } from './alone.js'
import { backoffMs } from './backoff.js'

const OUTCOME = Symbol('drizzle-jobs.outcome')

/** What `run.fail`, `run.retry` and `run.snooze` return; the handler returns it in turn. */
export interface Outcome {
  readonly [OUTCOME]: 'fail' | 'retry' | 'snooze'
  readonly reason?: string
  readonly delayMs?: number
}

export function outcome(kind: Outcome[typeof OUTCOME], fields: { reason?: string; delayMs?: number }): Outcome {
  return Object.freeze({ [OUTCOME]: kind, ...fields })
}

function isOutcome(value: unknown): value is Outcome {
  return typeof value === 'object' && value !== null && OUTCOME in value
}

/** How a run ended, as the executor saw it. */
export type RunEnd =
  | { kind: 'returned'; value: unknown }
  | { kind: 'threw'; error: unknown }
  /** The run's worker died or lost the lease before recording an outcome. */
  | { kind: 'abandoned'; why: string; how: Abandonment }
  /** The run parked (a sleep, a wait for an event): its job runs again at `until`, or when the event comes. */
  | { kind: 'parked'; park: Park }

/** What a parked run waits for, and until when. */
export interface Park {
  /** When the job runs again (ms since the epoch): a sleep's end, an event's timeout (MAX_TIME_MS: none). */
  until: number
  /** jobs_job.waits_for: `sleep:<step>` or `event:<name>`. */
  waitsFor: string
  /** For an event: the job's signals when the run found no event (RunEndParams.signals); null for a sleep. */
  signals: number | null
}

/** The job's next row values: what a run's end writes. */
export type Transition = RunEndParams

export interface RunFacts {
  attempt: number
  maxAttempts: number
}

/** Turns how a run ended into the job's next state. */
export function transitionFor(queue: QueueDefinition, run: RunFacts, end: RunEnd, now: number): Transition {
  if (end.kind === 'threw') return failedRun(queue, run, errorText(end.error), stackOf(end.error), now)
  if (end.kind === 'parked') {
    // A parked run gives its attempt back: waiting is not trying.
    return { ...scheduled(end.park.until, null, null, 1), waitsFor: end.park.waitsFor, signals: end.park.signals }
  }
  if (end.kind === 'abandoned') {
    const error = `attempt ${run.attempt} of ${run.maxAttempts} ended without an outcome: ${end.why}`
    return { ...failedRun(queue, run, error, null, now), abandoned: runsAloneNext(end.how) ? 1 : 0 }
  }
  const value = end.value
  if (!isOutcome(value)) {
    let result: string | null
    try {
      result = encodeJson(value, "the handler's result", MAX_VALUE_BYTES, true)
    } catch (error) {
      return failedRun(queue, run, errorText(error), stackOf(error), now)
    }
    return ended('done', now, { result })
  }
  const kind = value[OUTCOME]
  if (kind === 'fail') return ended('failed', now, { error: keptText(value.reason ?? 'failed by the handler', MAX_ERROR_BYTES) })
  if (kind === 'snooze') return scheduled(now + (value.delayMs ?? 0), null, null, 1)
  if (run.attempt >= run.maxAttempts) {
    return ended('failed', now, { error: `the handler asked for a retry on the last attempt (${run.attempt} of ${run.maxAttempts})` })
  }
  return scheduled(now + (value.delayMs ?? 0), null, null, 0)
}

/**
 * A claimed job handed back before its handler was called (a rate's start that came too late, rate.ts): back to
 * the state it was claimed from, in its place in claim order (its run_at kept), its attempt refunded.
 */
export function handedBack(job: { claimedFrom: 'waiting' | 'scheduled'; abandoned: number | boolean }): Transition {
  return {
    state: job.claimedFrom,
    runAt: null,
    finishedAt: null,
    result: null,
    error: null,
    errorStack: null,
    refund: 1,
    abandoned: job.abandoned ? 1 : 0,
    waitsFor: null,
    signals: null,
  }
}

function failedRun(queue: QueueDefinition, run: RunFacts, message: string, stack: string | null, now: number): Transition {
  // Kept errors and stacks are made storable and cut to their limits here, where every failed run passes.
  const error = keptText(message, MAX_ERROR_BYTES)
  const errorStack = stack === null ? null : keptText(stack, MAX_STACK_BYTES)
  if (run.attempt >= run.maxAttempts) return ended('failed', now, { error, errorStack })
  return scheduled(now + backoffMs(queue.backoff, run.attempt), error, errorStack, 0)
}

/**
 * An error or a stack as it is kept: U+0000 and lone surrogates made U+FFFD (text.ts), so that no run's end
 * fails for what its error says, then cut to `maxBytes`.
 */
function keptText(text: string, maxBytes: number): string {
  return cutToBytes(storableText(text), maxBytes)
}

function ended(state: 'done' | 'failed', now: number, fields: Partial<Transition>): Transition {
  return {
    state,
    runAt: null,
    finishedAt: now,
    result: null,
    error: null,
    errorStack: null,
    refund: 0,
    abandoned: 0,
    waitsFor: null,
    signals: null,
    ...fields,
  }
}

/** A wait of years may reach past the range of a Date: the job is then scheduled at its end. */
function scheduled(runAt: number, error: string | null, errorStack: string | null, refund: 0 | 1): Transition {
  return {
    state: 'scheduled',
    runAt: Math.min(runAt, MAX_TIME_MS),
    finishedAt: null,
    result: null,
    error,
    errorStack,
    refund,
    abandoned: 0,
    waitsFor: null,
    signals: null,
  }
}

/** What a thrown value says, as text, whatever was thrown: an error whose message is no string, or whose getters throw, included. */
function errorText(error: unknown): string {
  if (error instanceof Error)
    return textOf(
      () => error.message || error.name,
      () => Object.prototype.toString.call(error),
    )
  if (typeof error === 'string') return error
  return `a non-error was thrown: ${textOf(
    () => JSON.stringify(error) ?? String(error),
    () => String(error),
    () => Object.prototype.toString.call(error),
  )}`
}

/** The text of the first of `reads` that answers without throwing. */
function textOf(...reads: Array<() => unknown>): string {
  for (const read of reads) {
    try {
      return String(read())
    } catch {
      // The next way of reading it.
    }
  }
  return 'a value that cannot be read as text'
}

function stackOf(error: unknown): string | null {
  if (!(error instanceof Error)) return null
  try {
    return typeof error.stack === 'string' ? error.stack : null
  } catch {
    return null
  }
}

/** The error a run's signal aborts with when it passes its timeout (JOB-10). */
export function timeoutError(timeoutMs: number): JobsError {
  return new JobsError('TIMEOUT', `the run took longer than its timeout of ${timeoutMs} ms`)
}
