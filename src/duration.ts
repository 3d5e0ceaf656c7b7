import { JobsError } from './errors.js'
import { MAX_DURATION_MS, MAX_TIMER_MS } from './limits.js'

/** A number of milliseconds, or a string such as `'500ms'`, `'5s'`, `'10m'`, `'1h'`, `'1d'`. */
export type Duration = number | `${number}${DurationUnit}`
type DurationUnit = 'ms' | 's' | 'm' | 'h' | 'd'

const UNIT_MS: Record<DurationUnit, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const DURATION_PATTERN = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/

/**
 * Turns a duration that is only compared with times (a delay, a backoff, a
 * retention, a prune age) into whole milliseconds: it may be years long.
 * Throws INVALID_OPTION naming `option` when it is not a non-negative finite
 * duration within the span of a Date (8.64e15 ms).
 * @internal
 */
export function toMs(value: unknown, option: string): number {
  let ms: number
  if (typeof value === 'number') {
    ms = value
  } else if (typeof value === 'string') {
    const match = DURATION_PATTERN.exec(value)
    if (!match) {
      throw new JobsError(
        'INVALID_OPTION',
        `${option}: '${value}' is not a duration; write a number of ms or a string such as '500ms', '5s', '10m', '1h', '1d'`,
      )
    }
    ms = Number(match[1]) * UNIT_MS[match[2] as DurationUnit]
  } else {
    throw new JobsError('INVALID_OPTION', `${option}: expected a duration (ms or a string such as '5s'), got ${describe(value)}`)
  }
  if (!Number.isFinite(ms) || ms < 0) {
    throw new JobsError('INVALID_OPTION', `${option}: a duration must be finite and not negative, got ${String(value)}`)
  }
  if (ms > MAX_DURATION_MS) {
    throw new JobsError(
      'INVALID_OPTION',
      `${option}: ${String(value)} is longer than the longest duration allowed (${MAX_DURATION_MS} ms, the span of a Date)`,
    )
  }
  return Math.round(ms)
}

/**
 * Turns a duration that a timer waits on directly (a timeout, a lease, a poll
 * interval) into whole milliseconds. Throws INVALID_OPTION naming `option` as
 * {@link toMs} does, and past 2^31 - 1 ms (about 24.8 days), the longest a
 * Node timer waits.
 * @internal
 */
export function toTimerMs(value: unknown, option: string): number {
  const ms = toMs(value, option)
  if (ms > MAX_TIMER_MS) {
    throw new JobsError(
      'INVALID_OPTION',
      `${option}: ${String(value)} is longer than a timer can wait (${MAX_TIMER_MS} ms, about 24.8 days)`,
    )
  }
  return ms
}

/** @internal */
export function describe(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'string') return `the string '${value.length > 40 ? `${value.slice(0, 40)}…` : value}'`
  if (typeof value === 'object') return 'an object'
  return `${typeof value} ${String(value)}`
}

/** A span of milliseconds the way a person reads it: 850ms, 12s, 4m 05s, 3h 20m, 2d 4h. */
export function humanSpan(ms: number): string {
  if (ms < 1_000) return `${Math.max(0, Math.round(ms))}ms`
  const s = Math.floor(ms / 1_000)
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`
  const h = Math.floor(m / 60)
  if (h < 24) return `${h}h ${String(m % 60).padStart(2, '0')}m`
  return `${Math.floor(h / 24)}d ${h % 24}h`
}
