import { toMs, toTimerMs, describe, type Duration } from '../duration.js'
import { JobsError } from '../errors.js'
import { checkName } from '../json.js'
import type { Json, JsonShape } from '../types.js'
import { uniqueRule, type UniqueOptions, type UniqueRule } from './unique.js'
import type { QueueDefinition } from '../engine/definition.js'
import { checkKnownOptions } from '../options.js'
import {
  DEFAULT_ATTEMPTS,
  DEFAULT_BACKOFF_INITIAL_MS,
  DEFAULT_BACKOFF_MAX_MS,
  DEFAULT_MAX_WAITING,
  DEFAULT_RETENTION_CANCELED_MS,
  DEFAULT_RETENTION_DONE_MS,
  DEFAULT_RETENTION_FAILED_MS,
  DEFAULT_TIMEOUT_MS,
  MAX_STORED_INT,
} from '../limits.js'

/** The options of {@link defineQueue}. Every one has a default. `T` is the queue's value type, which `unique.key` reads. */
export interface QueueOptions<T = Json> {
  /** Runs a job gets before it fails for good, the first included. Defaults to 10. */
  attempts?: number
  /** Wait before a retry: `initial × 2^(n−1)` after the n-th failed run, ×[0.9, 1.1], at most `max`. Defaults to `{ initial: '1s', max: '1h' }`. */
  backoff?: { initial?: Duration; max?: Duration }
  /**
   * Runs at once across every worker of every process on the database; `{ total, perGroup }` also caps one group. Defaults to no limit.
   * A worker stores it in `jobs_queue` as it starts, and every worker follows the one started last (JOB-19).
   */
  concurrency?: number | { total?: number; perGroup?: number }
  /**
   * Run starts allowed in any window of `per` across every worker of every process (JOB-22); `perGroup` also caps the
   * starts of one group per window. Defaults to no rate. Stored in `jobs_queue` like `concurrency`: every worker follows
   * the rate of the one started last (JOB-19). Jobs it holds back stay `waiting`; their snapshots' `rateLimitedUntil`
   * says when the next may start.
   */
  rate?: { limit: number; per: Duration; perGroup?: number }
  /** How long one run may take before its signal aborts and it counts as failed. Defaults to `'1m'`. */
  timeout?: Duration
  /** Jobs waiting or scheduled the queue may hold; an add beyond throws QUEUE_FULL. Defaults to 10,000,000. */
  maxWaiting?: number
  /** How long ended jobs are kept before workers prune them. Defaults to `{ done: '1d', failed: '7d', canceled: '1d' }`. */
  retention?: { done?: Duration; failed?: Duration; canceled?: Duration }
  /**
   * Unique windows (JOB-25): an add whose key a job of the queue holds, in the states that hold it, adds nothing and
   * answers that job's id (`added: false, matched: 'unique'`). An add's own `unique` replaces this one, and
   * `unique: false` sets it aside. Defaults to none.
   */
  unique?: UniqueOptions<T>
}

declare const valueType: unique symbol
declare const resultType: unique symbol

/**
 * Marks the values defineQueue made, so that `work` and `enqueue` tell a queue from an object that only looks
 * like one. A registered symbol, so that two copies of the package (a bundled one, say) know each other's queues.
 */
const QUEUE_BRAND = Symbol.for('drizzle-jobs.queue')

/**
 * A queue definition: a plain value, like a table, holding no connection.
 * `T` is the type of its jobs' values, which `enqueue` and the handler
 * check; `R` the type of their results, which the handler must return and
 * `getJob`, `watch` and `jobEvents` show. Written with no type arguments,
 * `Queue` is any queue.
 */
export interface Queue<T = unknown, R = unknown> extends QueueDefinition {
  /** Carries `T` for the compiler only; never set. */
  readonly [valueType]?: T
  /** Carries `R` for the compiler only; never set. */
  readonly [resultType]?: R
  /** The queue's `unique` option, checked; null for none. @internal */
  readonly unique: UniqueRule | null
}

const OPTION_NAMES = new Set(['attempts', 'backoff', 'concurrency', 'rate', 'timeout', 'maxWaiting', 'retention', 'unique'])

/**
 * defineQueue declares a queue: its name and how its jobs run.
 *
 * `T` is its jobs' value type and `R` their result type; both must be JSON
 * (see {@link JsonShape}: interfaces are fine, a Date is not). `T` defaults
 * to any JSON value. `R` defaults to `Json`: the handler may return any JSON
 * value or nothing. With `R` given, the handler must return an `R` (or an
 * outcome such as `run.retry()`), and snapshots' `result` is an `R`.
 *
 * Throws INVALID_OPTION naming the option when an option is unknown or out
 * of range (for example `attempts: 0`, `timeout: 'soon'`, a `backoff.initial`
 * above its `max`, a `rate.perGroup` above its `limit`, `unique.states`
 * without `running`), and for a name that is empty or over 1,024 bytes
 * (TOO_LARGE).
 *
 * @example
 * interface Reply { messageId: number }
 * interface ReplyResult { text: string }
 * export const replies = defineQueue<Reply, ReplyResult>('replies', {
 *   attempts: 5,
 *   backoff: { initial: '5s', max: '10m' },
 *   concurrency: { total: 4, perGroup: 1 },
 *   rate: { limit: 60, per: '1m' },
 *   timeout: '1m',
 *   // One reply per message an hour: a second add within the hour answers the first job.
 *   unique: { key: ['messageId'], for: '1h' },
 * })
 */
export function defineQueue<T extends JsonShape<T> = Json, R extends JsonShape<R> = Json>(
  name: string,
  options: QueueOptions<T> = {},
): Queue<T, R> {
  checkName(name, 'queue name')
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new JobsError('INVALID_OPTION', `options: expected an object, got ${describe(options)}`)
  }
  checkKnownOptions(options, OPTION_NAMES, 'defineQueue')
  const backoff = objectOption(options.backoff, 'backoff', ['initial', 'max'])
  const retention = objectOption(options.retention, 'retention', ['done', 'failed', 'canceled'])
  const queue: Queue<T, R> = {
    name,
    attempts: storedCount(options.attempts, 'attempts', DEFAULT_ATTEMPTS),
    backoff: Object.freeze(backoffOption(backoff)),
    concurrency: Object.freeze(concurrencyOption(options.concurrency)),
    rate: rateOption(options.rate),
    timeoutMs: options.timeout === undefined ? DEFAULT_TIMEOUT_MS : positiveMs(options.timeout, 'timeout'),
    maxWaiting: positiveInteger(options.maxWaiting, 'maxWaiting', DEFAULT_MAX_WAITING),
    retentionMs: Object.freeze({
      done: retention.done === undefined ? DEFAULT_RETENTION_DONE_MS : toMs(retention.done, 'retention.done'),
      failed: retention.failed === undefined ? DEFAULT_RETENTION_FAILED_MS : toMs(retention.failed, 'retention.failed'),
      canceled: retention.canceled === undefined ? DEFAULT_RETENTION_CANCELED_MS : toMs(retention.canceled, 'retention.canceled'),
    }),
    unique: options.unique === undefined ? null : uniqueRule(options.unique, 'unique'),
  }
  Object.defineProperty(queue, QUEUE_BRAND, { value: true })
  return Object.freeze(queue)
}

/**
 * Checks that `value` is a queue that defineQueue made: INVALID_OPTION for anything else, a copy of one included
 * (its options would not have been checked). @internal
 */
export function checkQueue(value: unknown): Queue {
  if (typeof value !== 'object' || value === null || (value as { [QUEUE_BRAND]?: unknown })[QUEUE_BRAND] !== true) {
    const named = typeof value === 'object' && value !== null && typeof (value as { name?: unknown }).name === 'string'
    throw new JobsError(
      'INVALID_OPTION',
      `queue: expected a queue made by defineQueue, got ${named ? 'an object that is not one (a copy of a queue is not a queue: define it again)' : describe(value)}`,
    )
  }
  return value as Queue
}

function backoffOption(backoff: Record<string, unknown>): { initialMs: number; maxMs: number } {
  const initialMs = backoff.initial === undefined ? DEFAULT_BACKOFF_INITIAL_MS : toMs(backoff.initial, 'backoff.initial')
  const maxMs = backoff.max === undefined ? DEFAULT_BACKOFF_MAX_MS : toMs(backoff.max, 'backoff.max')
  if (initialMs > maxMs) {
    const initial = backoff.initial === undefined ? `its default of ${initialMs} ms` : String(backoff.initial)
    const max = backoff.max === undefined ? `its default of ${maxMs} ms` : String(backoff.max)
    throw new JobsError(
      'INVALID_OPTION',
      `backoff.initial: ${initial} is above backoff.max (${max}); no wait would ever be the initial one`,
    )
  }
  return { initialMs, maxMs }
}

function concurrencyOption(value: QueueOptions['concurrency']): { total: number | null; perGroup: number | null } {
  if (value === undefined) return { total: null, perGroup: null }
  if (typeof value === 'number') return { total: storedCount(value, 'concurrency', 0), perGroup: null }
  const limits = objectOption(value, 'concurrency', ['total', 'perGroup'])
  return {
    total: limits.total === undefined ? null : storedCount(limits.total, 'concurrency.total', 0),
    perGroup: limits.perGroup === undefined ? null : storedCount(limits.perGroup, 'concurrency.perGroup', 0),
  }
}

/** `rate`: a limit of at least 1 start, a window of at least 1 ms, and a cap per group no higher than the limit. */
function rateOption(value: QueueOptions['rate']): QueueDefinition['rate'] {
  if (value === undefined) return null
  const rate = objectOption(value, 'rate', ['limit', 'per', 'perGroup'])
  if (rate.limit === undefined)
    throw new JobsError('INVALID_OPTION', `rate.limit: required, the run starts allowed per window (rate: { limit: 60, per: '1m' })`)
  if (rate.per === undefined)
    throw new JobsError('INVALID_OPTION', `rate.per: required, the window's length (rate: { limit: 60, per: '1m' })`)
  const limit = storedCount(rate.limit, 'rate.limit', 0)
  const perMs = positiveMs(rate.per, 'rate.per')
  const perGroup = rate.perGroup === undefined ? null : storedCount(rate.perGroup, 'rate.perGroup', 0)
  if (perGroup !== null && perGroup > limit)
    throw new JobsError(
      'INVALID_OPTION',
      `rate.perGroup: ${perGroup} is above rate.limit (${limit}); one group can never start more than the whole queue`,
    )
  return Object.freeze({ limit, perMs, perGroup })
}

function objectOption(value: unknown, option: string, keys: string[]): Record<string, unknown> {
  if (value === undefined) return {}
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new JobsError('INVALID_OPTION', `${option}: expected an object with ${keys.join(', ')}, got ${describe(value)}`)
  }
  for (const key of Object.keys(value)) {
    if (!keys.includes(key)) throw new JobsError('INVALID_OPTION', `${option}.${key}: not an option (known: ${keys.join(', ')})`)
  }
  return value as Record<string, unknown>
}

/** @internal */
export function positiveInteger(value: unknown, option: string, fallback: number): number {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new JobsError('INVALID_OPTION', `${option}: expected a whole number of at least 1, got ${describe(value)}`)
  }
  return value
}

/**
 * A whole number from 1 that the tables store in an integer column (a job's max_attempts, a queue's limits and
 * rates): at most 2^31 - 1, PostgreSQL's integer, on SQLite too, so that a queue is good on both databases.
 */
function storedCount(value: unknown, option: string, fallback: number): number {
  const count = positiveInteger(value, option, fallback)
  if (count > MAX_STORED_INT)
    throw new JobsError(
      'INVALID_OPTION',
      `${option}: expected a whole number from 1 to ${MAX_STORED_INT} (the most an integer column stores), got ${count}`,
    )
  return count
}

/** A duration a timer waits on: at least 1 ms, at most about 24.8 days. @internal */
export function positiveMs(value: unknown, option: string): number {
  const ms = toTimerMs(value, option)
  if (ms < 1) throw new JobsError('INVALID_OPTION', `${option}: must be at least 1 ms`)
  return ms
}
