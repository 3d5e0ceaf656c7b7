/**
 * What workers do besides running jobs: take back the leases of runs whose
 * worker died or stalled (JOB-05), end as abandoned the runs that hold no
 * lease at all (JOB-18), prune ended jobs past retention, and fold the
 * queue's counts kept apart into its row (PostgreSQL: engine/counts.ts).
 */
import { ask, type Connection, type Executor, type Program } from '../dialect/index.js'
import type { AbandonedLease, UnleasedRun } from '../dialect/index.js'
import { PRUNE_BATCH_SIZE, RESCUE_BATCH_SIZE } from '../limits.js'
import { counting, foldCounts, shift } from '../engine/counts.js'
import { jobsChanged, notifyOthers } from '../engine/wake.js'
import type { Queue } from '../queue/define.js'
import { ENDED_STATES, type EndedState } from '../types.js'
import { transitionFor } from '../engine/outcome.js'
import { isOwnerGone } from '../engine/owner.js'
import { jobEndMany } from '../engine/record.js'

/**
 * Leases of the queue, other than `self`'s, whose time ran out or whose process on this host is gone.
 * A worker never takes back its own leases: it knows its runs are alive, and renews them. Read-only.
 */
export async function findAbandoned(connection: Connection, queue: Queue, self: string, now: number): Promise<AbandonedLease[]> {
  const owners = await connection.executor.jobListRunningOwners(queue.name)
  const gone = owners.filter(isOwnerGone)
  return connection.executor.leaseGetAbandoned({ queue: queue.name, self, now, deadOwners: gone, limit: RESCUE_BATCH_SIZE })
}

/**
 * Ends abandoned runs inside the caller's transaction: the job runs again
 * after its backoff, or fails for good if that was its last attempt, with an
 * error that says what happened. Each end is fenced by the attempt it takes
 * back and, for an expired lease, by its expiry (record.ts): a run that
 * ended, was taken back by another rescue or renewed its lease meanwhile is
 * left as it is. Answers the seqs taken back.
 */
export function* releaseAbandoned(db: Executor, queue: Queue, leases: readonly AbandonedLease[], now: number): Program<number[]> {
  const records = leases.map((lease) => {
    const expired = lease.expiresAt === null || lease.expiresAt <= now
    const why = expired ? `its lease expired (worker ${lease.owner} stopped renewing it)` : `its worker process (${lease.owner}) is gone`
    const transition = transitionFor(
      queue,
      { attempt: lease.attempt, maxAttempts: lease.maxAttempts },
      { kind: 'abandoned', why, how: 'rescued' },
      now,
    )
    // The rescue names the attempt it takes, and takes an expired lease only if it has not been renewed since it was read.
    return { seq: lease.seq, owner: lease.owner, attempt: lease.attempt, transition, expiredBy: expired ? now : null }
  })
  const landed = yield* counting(db, queue.name, (moved) => jobEndMany(db, records, moved))
  if (landed.some(Boolean)) yield* notifyOthers(db, queue.name, 'ended')
  return records.filter((_, i) => landed[i]).map((record) => record.seq)
}

/**
 * Per connection and queue, the count of unleased runs for which a walk of the queue found none: the counters
 * are off, not the rows, so the queue is not walked again until that count changes.
 */
const fruitlessWalks = new WeakMap<Connection, Map<string, number>>()

/**
 * Running jobs of the queue that hold no lease: another program wrote them so, or deleted their lease. No
 * worker runs them, yet each holds a place under the queue's concurrency. Read-only: one read of the
 * counters and of the (small) lease table, and a walk of the queue's jobs only when they say some are there.
 */
export async function findUnleased(connection: Connection, queue: Queue): Promise<UnleasedRun[]> {
  const unleased = await connection.executor.jobCountUnleased(queue.name)
  let walks = fruitlessWalks.get(connection)
  if (unleased <= 0 || walks?.get(queue.name) === unleased) return []
  const runs = await connection.executor.jobGetUnleased({ queue: queue.name, limit: RESCUE_BATCH_SIZE })
  if (runs.length === 0) {
    if (!walks) fruitlessWalks.set(connection, (walks = new Map()))
    walks.set(queue.name, unleased)
  }
  return runs
}

/**
 * Ends runs that hold no lease inside the caller's transaction, as abandoned runs end: the job runs again
 * after its backoff, or fails for good if that was its last attempt, with an error that says what happened.
 * Not alone: nothing says such a run took its process down. Answers the seqs ended.
 */
export function releaseUnleased(db: Executor, queue: Queue, runs: readonly UnleasedRun[], now: number): Program<number[]> {
  const why = 'it was running with no lease (another program wrote it so, or deleted its lease), so no worker was running it'
  return counting(db, queue.name, function* (moved) {
    const released: number[] = []
    for (const run of runs) {
      const transition = transitionFor(
        queue,
        { attempt: run.attempts, maxAttempts: run.maxAttempts },
        { kind: 'abandoned', why, how: 'unleased' },
        now,
      )
      if (!(yield* ask(db.jobSetStateIfUnleased({ ...transition, seq: run.seq })))) continue
      shift(moved, 'running', transition.state)
      if (ENDED_STATES.includes(transition.state as EndedState)) yield* ask(db.stepDeleteMany([run.seq]))
      released.push(run.seq)
    }
    if (released.length > 0) yield* notifyOthers(db, queue.name, 'ended')
    return released
  })
}

/** Whether the queue has ended jobs past their retention. Read-only. */
export async function hasPrunable(connection: Connection, queue: Queue, now: number): Promise<boolean> {
  for (const state of ENDED_STATES) {
    if (await connection.executor.jobHasPrunable({ queue: queue.name, state, before: now - queue.retentionMs[state] })) return true
  }
  return false
}

/** Deletes one batch of ended jobs past retention, per ended state, in the caller's transaction. */
export function* pruneEnded(db: Executor, queue: Queue, now: number): Program<number> {
  let deleted = 0
  for (const state of ENDED_STATES) {
    const before = now - queue.retentionMs[state]
    deleted += yield* ask(db.jobDeleteEnded({ queue: queue.name, state, before, limit: PRUNE_BATCH_SIZE }))
  }
  if (deleted > 0) yield* notifyOthers(db, queue.name, 'other')
  return deleted
}

/**
 * One maintenance pass over a queue, on behalf of worker `self`: folds its counts kept apart (first, so that
 * the unleased runs are counted from a short sum), takes back abandoned leases, ends runs that hold none,
 * prunes ended jobs past retention, and deletes the rows of workers that expired holding no run (a worker
 * that died idle, or whose runs were taken back: each process's workers have owners of their own, so a row
 * left would stay). Each step reads first and takes the write lock
 * only when it has work, and tells this process of what it changed. Throws the database's busy error
 * when another writer holds the lock.
 */
export async function maintainQueue(connection: Connection, queue: Queue, self: string, now: number): Promise<void> {
  await foldCounts(connection, queue.name)
  const abandoned = await findAbandoned(connection, queue, self, now)
  if (abandoned.length > 0) {
    const released = await connection.write((db) => releaseAbandoned(db, queue, abandoned, now))
    if (released.length > 0) jobsChanged(connection.key, queue.name, 'ended', released)
  }
  const unleased = await findUnleased(connection, queue)
  if (unleased.length > 0) {
    const released = await connection.write((db) => releaseUnleased(db, queue, unleased, now))
    if (released.length > 0) jobsChanged(connection.key, queue.name, 'ended', released)
  }
  if (await hasPrunable(connection, queue, now)) {
    await connection.write((db) => pruneEnded(db, queue, now))
    jobsChanged(connection.key, queue.name, 'other')
  }
  if (await connection.executor.workerHasExpired(now)) await connection.write((db) => deleteExpiredWorkers(db, now))
}

/** Deletes the rows of workers expired by `now` that hold no run, in the caller's transaction. */
function* deleteExpiredWorkers(db: Executor, now: number): Program<number> {
  return yield* ask(db.workerDeleteExpired(now))
}
