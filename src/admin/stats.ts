/**
 * What the command-line tool and the dashboard show beside the counts: how
 * many jobs ended lately, and how long the oldest due job has waited. Every
 * figure is read over an index, never by scanning a queue's jobs.
 */
import type { Connection } from '../dialect/index.js'

/** Jobs of `queue` that ended in `state` within [since, until). */
export function endedBetween(connection: Connection<'sync'>, queue: string, state: 'done' | 'failed' | 'canceled', since: number, until: number): number {
  return connection.executor.jobCountEnded({ queue, state, since, until })
}

/** Jobs ended in `state` per bucket of `bucketMs`, for the buckets starting at `since` up to `until` (zeros included). */
export function endedPerBucket(connection: Connection<'sync'>, queue: string, state: 'done' | 'failed', since: number, until: number, bucketMs: number): number[] {
  const first = Math.floor(since / bucketMs)
  const buckets = new Array<number>(Math.max(0, Math.ceil(until / bucketMs) - first)).fill(0)
  const rows = connection.executor.jobCountEndedPerBucket({ queue, state, since: first * bucketMs, until, bucketMs })
  for (const row of rows) {
    const index = row.bucket - first
    if (index >= 0 && index < buckets.length) buckets[index] = row.count
  }
  return buckets
}

/** How long the queue's longest-due runnable job has been due, in ms; null when none is due. */
export function oldestDueMs(connection: Connection<'sync'>, queue: string, now: number): number | null {
  const earliest = connection.executor.jobEarliestRunnable(queue)
  return earliest === null || earliest > now ? null : now - earliest
}
