/**
 * What workers do besides running jobs: take back the leases of runs whose
 * worker died or stalled (JOB-05), and prune ended jobs past retention.
 */
import type { Connection } from '../connection.js'
import { PRUNE_BATCH_SIZE, RESCUE_BATCH_SIZE } from '../limits.js'
import { counting } from '../engine/counts.js'
import type { Queue } from '../queue/define.js'
import { ENDED_STATES } from '../types.js'
import { transitionFor } from '../engine/outcome.js'
import { isOwnerGone } from '../engine/owner.js'
import { recordEnds } from '../engine/record.js'

interface AbandonedLease {
  seq: number
  owner: string
  attempt: number
  expiresAt: number
  attempts: number
  maxAttempts: number
}

/**
 * Leases of the queue, other than `self`'s, whose time ran out or whose process on this host is gone.
 * A worker never takes back its own leases: it knows its runs are alive, and renews them. Read-only.
 */
export function findAbandoned(connection: Connection, queue: Queue, self: string, now: number): AbandonedLease[] {
  const owners = connection.sql.leaseOwners.all(queue.name) as string[]
  const gone = owners.filter(isOwnerGone)
  return connection.sql.abandonedLeases.all({ queue: queue.name, self, now, deadOwners: JSON.stringify(gone), limit: RESCUE_BATCH_SIZE }) as AbandonedLease[]
}

/**
 * Ends abandoned runs inside the caller's transaction: the job runs again
 * after its backoff, or fails for good if that was its last attempt, with an
 * error that says what happened. Answers the seqs taken back.
 */
export function releaseAbandoned(connection: Connection, queue: Queue, leases: readonly AbandonedLease[], now: number): number[] {
  const records = leases.map((lease) => {
    const why = lease.expiresAt <= now ? `its lease expired (worker ${lease.owner} stopped renewing it)` : `its worker process (${lease.owner}) is gone`
    const transition = transitionFor(queue, { attempt: lease.attempt, maxAttempts: lease.maxAttempts }, { kind: 'abandoned', why, isolate: true }, now)
    return { seq: lease.seq, owner: lease.owner, attempt: lease.attempt, transition }
  })
  const landed = counting(connection, queue.name, (moved) => recordEnds(connection, records, moved))
  return records.filter((_, i) => landed[i]).map((record) => record.seq)
}

/** Whether the queue has ended jobs past their retention. Read-only. */
export function hasPrunable(connection: Connection, queue: Queue, now: number): boolean {
  return ENDED_STATES.some((state) => connection.sql.firstPrunable.get({ queue: queue.name, state, before: now - queue.retentionMs[state] }) !== undefined)
}

/** Deletes one batch of ended jobs past retention, per ended state, in the caller's transaction. */
export function pruneEnded(connection: Connection, queue: Queue, now: number): number {
  let deleted = 0
  for (const state of ENDED_STATES) {
    const before = now - queue.retentionMs[state]
    deleted += connection.sql.pruneEnded.run({ queue: queue.name, state, before, limit: PRUNE_BATCH_SIZE }).changes
  }
  return deleted
}
