/** The states a job can be in. `waiting` and `scheduled` are runnable once `run_at` has come. */
export type JobState = 'waiting' | 'scheduled' | 'running' | 'done' | 'failed' | 'canceled'

/** Every state, in the order a job meets them. @internal */
export const STATES: readonly JobState[] = ['waiting', 'scheduled', 'running', 'done', 'failed', 'canceled']

/** The states a job ends in. */
export type EndedState = 'done' | 'failed' | 'canceled'

/** @internal */
export const ENDED_STATES: readonly EndedState[] = ['done', 'failed', 'canceled']

/**
 * Which of an add's keys met a job the queue holds, when the add added nothing: its `id` (JOB-03: that job is left as
 * it was); its `unique` key, held by a job in one of the states that hold it (JOB-25: left as it was); or its
 * `debounce` id, held by a job that has not started (JOB-26: that job took this add's value and run time).
 */
export type EnqueueMatch = 'id' | 'unique' | 'debounce'

/**
 * What `enqueue` answers: the job's id, and whether this call added it. When it added nothing, `id` is the job the
 * add met (the holder of its unique key, the job its debounced add went into) and `matched` says by which key.
 */
export type Enqueued = { id: string; added: true } | { id: string; added: false; matched: EnqueueMatch }

/**
 * A JSON value: what a job's value, a step's answer, a result and progress
 * are kept as. An object's `undefined` properties are dropped, as
 * `JSON.stringify` drops them, so optional properties are allowed; an
 * `undefined` in an array is not (JSON would turn it into null).
 */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json | undefined }

/**
 * The shape `T` must have to be kept as JSON: `T` itself when every part of
 * it is JSON, and otherwise `T` with each part that is not (a Date, a Map,
 * a function, a bigint, `undefined` in an array) replaced by a message
 * saying why, so that `T extends JsonShape<T>` fails and the compiler's
 * error names the part. Unlike `Json` it takes interfaces, which have no
 * index signature: `interface Reply { messageId: number }` passes.
 *
 * What the compiler cannot see is checked when the value is written, and
 * throws INVALID_VALUE: a class instance with only data fields, `NaN` or
 * `Infinity`, and at the top level a function, a bigint or (for a job's
 * value) `undefined`.
 *
 * @example
 * // A helper around run.step takes the same check as run.step.
 * function timed<A extends JsonShape<A>>(run: Run, name: string, fn: () => Promise<A>): Promise<A> {
 *   return run.step(name, async () => (console.time(name), await fn().finally(() => console.timeEnd(name))))
 * }
 */
export type JsonShape<T> = { [K in keyof T]: T extends readonly unknown[] ? JsonPart<T[K]> : JsonProperty<T[K]> }

/** One part of a JSON value: an array's element, or (through {@link JsonProperty}) an object's property. */
type JsonPart<T> = T extends Json
  ? T
  : T extends Date
    ? 'a Date is not JSON: pass getTime() or toISOString()'
    : T extends ReadonlyMap<unknown, unknown> | ReadonlySet<unknown>
      ? 'a Map or a Set is not JSON: pass an array or a plain object'
      : T extends (...args: never[]) => unknown
        ? 'a function is not JSON'
        : T extends bigint
          ? 'a bigint is not JSON: pass a number or a string'
          : T extends undefined
            ? 'undefined in an array is not JSON: JSON turns it into null'
            : T extends object
              ? JsonShape<T>
              : 'not JSON: expected null, a boolean, a number, a string, an array or a plain object'

/** An object's property: `undefined` is allowed, as JSON drops it. */
type JsonProperty<T> = T extends undefined ? T : JsonPart<T>

/**
 * What a parked run waits for, while its job is `scheduled` after `run.sleep` or `run.waitForEvent` (the job's
 * `runAt` is the `until` of a sleep or of a wait with a timeout):
 * - `{ kind: 'sleep', step, until }`: the sleep named `step` ends at `until`, and the job runs again then;
 * - `{ kind: 'event', name, until }`: the event `name`, which `signal` sends; the job runs again as soon as it is
 *   sent, or at `until` when the wait times out first. `until` is null for a wait without a timeout.
 */
export type JobWait = { kind: 'sleep'; step: string; until: Date } | { kind: 'event'; name: string; until: Date | null }

/** A job as `getJob` and `watch` show it. */
export interface JobSnapshot<Result = unknown> {
  id: string
  queue: string
  group: string | null
  state: JobState
  /** For a waiting job, how many jobs of its queue are claimed before it (up to 10,000); otherwise null. */
  ahead: number | null
  /**
   * For a waiting job held back by its queue's `rate` (JOB-22), when the rate next lets a run start (for its group
   * too, under `rate.perGroup`): the rate's window is full until then. Null when the rate holds nothing back, for a
   * queue with no rate, and for a job that is not waiting. The job stays `waiting` meanwhile, and `ahead` counts it.
   */
  rateLimitedUntil: Date | null
  /** The running attempt's live progress, or null. Never stored on disk. */
  progress: unknown
  /** Attempts counted so far (1-based once it has run). */
  attempt: number
  /** Attempts the job gets before it fails for good. */
  attempts: number
  /** When it may run (a waiting job: since when). Null only when the stored run_at is not a time: see `malformed`. */
  runAt: Date | null
  /**
   * What its parked run waits for (a sleep, an event), while the job is `scheduled` after `run.sleep` or
   * `run.waitForEvent`; null otherwise: a job that is not scheduled, or scheduled for another reason (a delayed add,
   * a retry's backoff, a snooze), or whose event came (it is due at once, and runs again).
   */
  waitsFor: JobWait | null
  /** When it was added. Null only when the stored created_at is not a time: see `malformed`. */
  createdAt: Date | null
  /** When it ended; null while it has not (and when the stored finished_at is not a time: see `malformed`). */
  finishedAt: Date | null
  error: string | null
  result: Result | null
  /**
   * The columns whose stored values break the table protocol, by column name, each with its value written as
   * an SQL literal (`'soon'`, `-1`, `X'00FF'`); null when the row keeps the protocol, as every row the engine
   * writes does. Only another program writing the tables by hand leaves such values. The field of such a
   * column holds null (a time), the stored number or NaN when it is no number (a count), or the literal (a text).
   */
  malformed: Readonly<Record<string, string>> | null
}
