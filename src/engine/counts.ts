/**
 * How a queue's counts by state stay right: the whole rule, in one place.
 *
 * On SQLite, the counters live in `jobs_queue`'s row:
 * - The engine's own adds, claims and ends (enqueueMany, a worker's or
 *   drain's flush, a rescue) bump the row's `engine_writes` in the statement
 *   that writes it, and count what they moved here (`shift`), written once
 *   per transaction by `counting` or `writeShift`, in that transaction.
 *   `enqueue`'s one job is counted by the driver's whole add (Executor.jobAdd).
 * - Every other write to `jobs_job` (the admin API's cancel, retry and
 *   prune, another program's plain SQL) leaves `engine_writes` as it was,
 *   and the triggers (COUNTER_TRIGGERS in dialect/sqlite/statements.ts) count it. A
 *   delete is always counted by its trigger.
 *
 * On PostgreSQL, one row that every claim, end and add updated would make
 * them wait on one another, so statement-level triggers count every write
 * alike, the engine's too (dialect/pg/counts.ts): each statement appends
 * its changes to `jobs_count`; `writeShift` only makes sure the queue has its
 * row. The executor says which way its database keeps them (`counts`). The workers' maintenance folds those changes into the row
 * (`foldCounts`), and counts are read as the row plus what is not folded.
 *
 * On both, writers install the triggers before they write (each dialect's
 * connection.ts); a read-only connection installs nothing.
 */
import { ask, type Connection, type Executor, type Program } from '../dialect/index.js'
import type { JobState } from '../types.js'

/** How many jobs of one queue entered (positive) or left (negative) each state. */
export type CountShift = Record<JobState, number>

export function noShift(): CountShift {
  return { waiting: 0, scheduled: 0, running: 0, done: 0, failed: 0, canceled: 0 }
}

/** Counts one job moved from `from` (null: added) to `to`. */
export function shift(counts: CountShift, from: JobState | null, to: JobState): void {
  if (from !== null) counts[from]--
  counts[to]++
}

/** Runs `write`, which counts in `moved` the jobs of `queue` it moves, then writes those counts once. */
export function* counting<R>(db: Executor, queue: string, write: (moved: CountShift) => Program<R>): Program<R> {
  const moved = noShift()
  const result = yield* write(moved)
  yield* writeShift(db, queue, moved)
  return result
}

/**
 * Writes the shift to the queue's counters, inside the caller's transaction; nothing when nothing moved. Where the
 * counts are kept apart, the triggers counted the writes already, and the queue only needs its row.
 */
export function* writeShift(db: Executor, queue: string, counts: CountShift): Program<void> {
  if (Object.values(counts).every((n) => n === 0)) return
  if (db.counts === 'in-row') yield* ask(db.queueShiftCounts({ queue, ...counts }))
  else yield* ask(db.queueEnsureRow(queue))
}

/**
 * Folds the queue's counts kept apart (PostgreSQL's jobs_count) into its row when there are some: a read first,
 * so that a queue with nothing to fold writes nothing. The fold is one statement outside any
 * transaction, so the lock it takes on the queue's row never outlives it, whatever this process does next.
 * Answers how many changes were folded.
 */
export async function foldCounts(connection: Connection, queue: string): Promise<number> {
  const db = connection.executor
  if (db.counts !== 'apart' || !(await db.queueHasUnfolded(queue))) return 0
  return db.queueFoldCounts(queue)
}
