/**
 * Claiming: inside the caller's `BEGIN IMMEDIATE` transaction, take up to
 * `limit` runnable jobs in claim order (priority, run_at, seq — JOB-17),
 * count their attempt (JOB-04), and lease them. The queue's concurrency is
 * decided here, from the database, so it holds across processes (JOB-07).
 * @internal
 */
import type { Connection } from '../connection.js'
import type { Queue } from '../queue/define.js'
import type { ClaimedJob } from './run.js'

export interface ClaimRequest {
  limit: number
  owner: string
  leaseMs: number
  now: number
  channel: string | null
}

export function claimJobs(connection: Connection, queue: Queue, request: ClaimRequest): ClaimedJob[] {
  const { sql } = connection
  const counts = sql.queueRunning.get(queue.name) as { paused: number; running: number } | undefined
  if (counts?.paused) return []
  let limit = request.limit
  if (queue.concurrency.total !== null) limit = Math.min(limit, queue.concurrency.total - (counts?.running ?? 0))
  if (limit <= 0) return []
  const claimed =
    queue.concurrency.perGroup === null
      ? (sql.claimJobs.all({ queue: queue.name, now: request.now, limit }) as ClaimedJob[])
      : claimUnderGroupCap(connection, queue, queue.concurrency.perGroup, limit, request.now)
  const expiresAt = request.now + request.leaseMs
  for (const job of claimed) {
    sql.insertLease.run({ seq: job.seq, queue: queue.name, grp: job.grp, owner: request.owner, attempt: job.attempts, expiresAt, channel: request.channel })
  }
  return claimed
}

/** Walks candidates in claim order, skipping jobs whose group is at its cap, counting the ones taken here too. */
function claimUnderGroupCap(connection: Connection, queue: Queue, perGroup: number, limit: number, now: number): ClaimedJob[] {
  const { sql } = connection
  const candidates = sql.claimCandidatesByGroup.all({ queue: queue.name, now, perGroup, limit: limit * 4 + 16 }) as { seq: number; grp: string | null }[]
  const running = new Map<string, number>()
  const claimed: ClaimedJob[] = []
  for (const candidate of candidates) {
    if (claimed.length === limit) break
    if (candidate.grp !== null) {
      const inGroup = running.get(candidate.grp) ?? (sql.groupRunning.get(queue.name, candidate.grp) as number)
      if (inGroup >= perGroup) continue
      running.set(candidate.grp, inGroup + 1)
    }
    const job = sql.claimJob.get(candidate.seq) as ClaimedJob | undefined
    if (job) claimed.push(job)
  }
  return claimed
}
