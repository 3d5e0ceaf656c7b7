/** Pausing and resuming queues, and their counts by state. */
import { answer, connectionOf, type AnswerOf, type Database } from '../dialect/open.js'
import { jobsChanged, notifyOthers } from '../engine/wake.js'
import { sqlLiteral } from '../stored.js'
import { allOf, andThen, ask, type CountsRow, type Executor, type ScheduleRow } from '../dialect/index.js'
import { queueNameOf, type QueueRef } from '../queue/ref.js'

/** A queue's jobs by state, as the engine's counters hold them. */
export interface QueueCounts {
  queue: string
  /** Whether workers have been told to stop claiming (see {@link pauseQueue}). */
  paused: boolean
  waiting: number
  scheduled: number
  running: number
  done: number
  failed: number
  canceled: number
}

/**
 * pauseQueue stops every worker of the queue, in every process, from
 * claiming: each checks the flag before each claim, so a worker elsewhere
 * stops within its `pollInterval`. Runs under way go on to their end. Jobs
 * may still be added. The flag is kept in `jobs_queue.paused`, so it holds
 * across restarts until {@link resumeQueue}. A queue that holds no job yet
 * may be paused too.
 *
 * Throws INVALID_OPTION or TOO_LARGE for a bad queue name, SCHEMA_MISSING
 * when the tables were not migrated.
 *
 * @example
 * pauseQueue(db, replies)   // the model is down
 * resumeQueue(db, replies)  // it is back
 */
export function pauseQueue<D extends Database>(db: D, queue: QueueRef): AnswerOf<D, void>
export function pauseQueue(db: Database, queue: QueueRef): void | Promise<void> {
  return setPaused(db, queue, true)
}

/**
 * resumeQueue lets the workers of a paused queue claim again; those in this
 * process wake at once, those elsewhere within their `pollInterval`.
 *
 * Throws as {@link pauseQueue} does.
 */
export function resumeQueue<D extends Database>(db: D, queue: QueueRef): AnswerOf<D, void>
export function resumeQueue(db: Database, queue: QueueRef): void | Promise<void> {
  return setPaused(db, queue, false)
}

function setPaused(db: Database, queue: QueueRef, paused: boolean): void | Promise<void> {
  const connection = connectionOf(db)
  return answer(connection, () => {
    const name = queueNameOf(queue)
    const kind = paused ? 'other' : 'added'
    const write = function* (db: Executor) {
      yield* ask(db.queueSetPaused(name, paused))
      yield* notifyOthers(db, name, kind)
    }
    return andThen(connection.write(write), () => jobsChanged(connection.key, name, kind))
  })
}

/** A `jobs_queue` row: the counts, under the table's column names. */
/**
 * queueCounts answers a queue's jobs by state, or with no queue, every
 * queue's (by name): each queue that has held a job, and each that has a
 * schedule but no job yet. It reads the counters that triggers keep in
 * `jobs_queue`, one row per queue, and never counts jobs, so it costs the
 * same with ten jobs as with ten million. A queue that never held a job
 * counts zero everywhere.
 *
 * Throws INVALID_OPTION or TOO_LARGE for a bad queue name, SCHEMA_MISSING
 * when the tables were not migrated.
 *
 * @example
 * const { waiting, running, failed } = queueCounts(db, replies)
 * for (const counts of queueCounts(db)) console.log(counts.queue, counts.waiting)
 */
export function queueCounts<D extends Database>(db: D, queue: QueueRef): AnswerOf<D, QueueCounts>
export function queueCounts<D extends Database>(db: D): AnswerOf<D, QueueCounts[]>
export function queueCounts(db: Database, queue?: QueueRef): QueueCounts | QueueCounts[] | Promise<QueueCounts | QueueCounts[]> {
  const connection = connectionOf(db)
  return answer(connection, (): QueueCounts | QueueCounts[] | Promise<QueueCounts | QueueCounts[]> => {
    const name = queue === undefined ? undefined : queueNameOf(queue)
    const executor = connection.executor
    if (name === undefined) {
      return andThen(allOf<[CountsRow[], ScheduleRow[]]>([executor.queueGetCountsAll(), executor.scheduleList(null)]), ([rows, list]) =>
        withScheduledQueues(rows.map(toCounts), list),
      )
    }
    return andThen(executor.queueGetCounts(name), (row) => (row ? toCounts(row) : noJobs(name)))
  })
}

/** A queue that holds no job, nor ever did. */
function noJobs(queue: string): QueueCounts {
  return { queue, paused: false, waiting: 0, scheduled: 0, running: 0, done: 0, failed: 0, canceled: 0 }
}

/**
 * Every queue's counts with the queues that have a schedule but have held no job yet (their row in
 * `jobs_queue` comes with their first job), by name.
 */
function withScheduledQueues(counts: QueueCounts[], schedules: readonly ScheduleRow[]): QueueCounts[] {
  const known = new Set(counts.map((row) => row.queue))
  const added = [...new Set(schedules.map((schedule) => schedule.queue))].filter(
    (queue): queue is string => typeof queue === 'string' && !known.has(queue),
  )
  if (added.length === 0) return counts
  return [...counts, ...added.map(noJobs)].sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0))
}

function toCounts(row: CountsRow): QueueCounts {
  const { name, paused, ...counts } = row
  // A name another program stored as a blob is shown as its SQL literal.
  return { queue: typeof name === 'string' ? name : sqlLiteral(name), paused: paused !== 0, ...counts }
}
