import { BACKOFF_JITTER } from '../limits.js'
import type { QueueDefinition } from './definition.js'

/**
 * The wait before the next run after the n-th failed run (JOB-09):
 * `initial × 2^(n−1)`, times a random factor in [0.9, 1.1], never above `max`.
 * @internal
 */
export function backoffMs(backoff: QueueDefinition['backoff'], failedRun: number, random: () => number = Math.random): number {
  const base = backoff.initialMs * 2 ** Math.max(0, failedRun - 1)
  const factor = 1 - BACKOFF_JITTER + 2 * BACKOFF_JITTER * random()
  return Math.min(backoff.maxMs, Math.round(base * factor))
}
