/**
 * How `jobs_queue`'s counters stay right: the whole rule, in one place.
 *
 * - The engine's own adds, claims and ends (enqueue, a worker's or drain's
 *   flush, a rescue) bump the row's `engine_writes` in the statement that
 *   writes it, and count what they moved here (`shift`), written once per
 *   transaction by `counting` or `writeShift`, in that transaction.
 * - Every other write to `jobs_job` (the admin API's cancel, retry and
 *   prune, another program's plain SQL) leaves `engine_writes` as it was,
 *   and the triggers (SQLite's: COUNTER_TRIGGERS in dialect/sqlite/statements.ts) count it. A
 *   delete is always counted by its trigger.
 * - Writers install the triggers before they write (connection.ts's
 *   installCounters); a read-only connection installs nothing.
 */
import { ask, type Executor, type Program } from '../dialect/index.js'
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

/** Writes the shift to the queue's counters, inside the caller's transaction; nothing when nothing moved. */
export function* writeShift(db: Executor, queue: string, counts: CountShift): Program<void> {
  for (const state in counts) {
    if (counts[state as JobState] !== 0) {
      yield* ask(db.queueShiftCounts({ queue, ...counts }))
      return
    }
  }
}
