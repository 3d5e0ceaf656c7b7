/**
 * What the command-line tool and the dashboard show beside the counts: how
 * many jobs ended lately, and how long the oldest due job has waited. Every
 * figure is read over an index, never by scanning a queue's jobs. Each
 * answers at once on SQLite and as a promise on PostgreSQL.
 */
import { andThen, type Connection, type Kind, type Result } from '../dialect/index.js'

/** Jobs of `queue` that ended in `state` within [since, until). */
export function endedBetween<K extends Kind>(
  connection: Connection<K>,
  queue: string,
  state: 'done' | 'failed' | 'canceled',
  since: number,
  until: number,
): Result<K, number> {
  return connection.executor.jobCountEnded({ queue, state, since, until })
}

/** Jobs ended in `state` per bucket of `bucketMs`, for the buckets starting at `since` up to `until` (zeros included). */
export function endedPerBucket<K extends Kind>(
  connection: Connection<K>,
  queue: string,
  state: 'done' | 'failed',
  since: number,
  until: number,
  bucketMs: number,
): Result<K, number[]> {
  const first = Math.floor(since / bucketMs)
  const rows = connection.executor.jobCountEndedPerBucket({ queue, state, since: first * bucketMs, until, bucketMs })
  return andThen(rows as { bucket: number; count: number }[] | Promise<{ bucket: number; count: number }[]>, (rows) => {
    const buckets = new Array<number>(Math.max(0, Math.ceil(until / bucketMs) - first)).fill(0)
    for (const row of rows) {
      const index = row.bucket - first
      if (index >= 0 && index < buckets.length) buckets[index] = row.count
    }
    return buckets
  }) as Result<K, number[]>
}

/** How long the queue's longest-due runnable job has been due, in ms; null when none is due. */
export function oldestDueMs<K extends Kind>(connection: Connection<K>, queue: string, now: number): Result<K, number | null> {
  const earliest = connection.executor.jobGetEarliestRunnable(queue) as number | null | Promise<number | null>
  return andThen(earliest, (earliest) => (earliest === null || earliest > now ? null : now - earliest)) as Result<K, number | null>
}
