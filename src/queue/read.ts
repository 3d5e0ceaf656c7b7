/**
 * Reading jobs as snapshots: the row, `ahead` for a waiting job, and the
 * running attempt's live progress.
 */
import { answer, connectionOf, type AnswerOf, type Database } from '../dialect/open.js'
import { andThen, ask, type Connection, type Executor, type Program, type SnapshotRow } from '../dialect/index.js'
import { lookupText } from '../lookup.js'
import { MAX_AHEAD } from '../limits.js'
import { readNoticeProgress } from '../progress/notices.js'
import { readRemoteProgress } from '../progress/remote.js'
import { isOwnChannel } from '../progress/channel.js'
import type { JobSnapshot } from '../types.js'
import { readProgress, runKey, type ProgressValue } from '../progress/store.js'
import { StoredColumns } from '../stored.js'
import { rateLimitedUntil } from '../engine/rate.js'
import { queueNameOf, type QueueRef, type ResultOf } from './ref.js'

/**
 * getJob answers the job of `queue` with this `id` as it is now, or
 * undefined when the queue holds no such job. Synchronous on SQLite, like
 * `enqueue`; a promise on PostgreSQL.
 * The queue is its definition, whose result type the snapshot's `result`
 * has, or its name alone (a `result` of any JSON).
 *
 * `ahead` is counted for a waiting job (up to 10,000); `progress` is the
 * running attempt's progress as this process knows it: set by a run of this
 * process, or received for a job that a `watch` in this process follows.
 * For progress set in another process, watch the job. `waitsFor` says what a
 * parked run waits for (a sleep's end, an event), while its job is scheduled. A row that another
 * program stored with values the table protocol does not allow is shown as
 * stored, never thrown on: see the snapshot's `malformed` (JOB-18).
 *
 * Any id a row holds is found, an empty one or one over 1,024 bytes that
 * another program wrote included (JOB-18).
 *
 * Throws INVALID_OPTION for an empty queue name or an id no row can hold
 * (not a string, U+0000, a lone surrogate), TOO_LARGE for a queue name over
 * 1,024 bytes, SCHEMA_MISSING when the tables were not migrated.
 *
 * @example
 * const job = getJob(db, replies, `reply:${messageId}`)
 * if (job?.state === 'failed') console.log(job.error)
 */
export function getJob<Q extends QueueRef, D extends Database = Database>(
  db: D,
  queue: Q,
  id: string,
): AnswerOf<D, JobSnapshot<ResultOf<Q>> | undefined>
export function getJob<Q extends QueueRef>(
  db: Database,
  queue: Q,
  id: string,
): JobSnapshot<ResultOf<Q>> | undefined | Promise<JobSnapshot<ResultOf<Q>> | undefined> {
  const connection = connectionOf(db)
  return answer(connection, () => {
    const name = queueNameOf(queue)
    lookupText(id, 'id')
    return andThen(
      connection.read((db) => readJob(db, name, id)),
      (row) => {
        if (!row) return undefined
        const key = runKeyOf(row.row)
        return toSnapshot<ResultOf<Q>>(row.row, row.ahead, key === null ? undefined : progressOf(connection, key, row.row))
      },
    )
  })
}

/** A job's row and, when it is waiting, how many are ahead of it, read in one snapshot. @internal */
export function* readJob(db: Executor, queue: string, id: string): Program<{ row: SnapshotRow; ahead: number | null } | undefined> {
  const row = yield* ask(db.jobGetSnapshot(queue, id))
  if (!row) return undefined
  return { row, ahead: row.state === 'waiting' ? yield* countAhead(db, row) : null }
}

/** How many runnable jobs (waiting, or scheduled and due) of the job's queue come before it in claim order, up to 10,000. @internal */
export function countAhead(db: Executor, row: SnapshotRow, now = Date.now()): Program<number> {
  return ask(db.jobCountAhead({ queue: row.queue, priority: row.priority, runAt: row.runAt, seq: row.seq, now, limit: MAX_AHEAD }))
}

/**
 * `ahead` for many waiting jobs of one queue at once: one walk down the
 * line in claim order, stopped after the last of them or at 10,000 jobs,
 * gives each its place. However many jobs are asked about, the index is
 * walked at most 10,000 entries. Answers the counts by seq.
 * @internal
 */
export function* countAheadOfMany(db: Executor, rows: readonly SnapshotRow[], now = Date.now()): Program<Map<number, number>> {
  if (rows.length === 1) return new Map([[rows[0]!.seq, yield* countAhead(db, rows[0]!, now)]])
  // A job not met in the first 10,000 has at least that many ahead (or, its run_at still to come, none runnable before it).
  return yield* ask(db.jobGetPlacesInLine({ queue: rows[0]!.queue, now, limit: MAX_AHEAD }, new Set(rows.map((row) => row.seq))))
}

/** The run whose progress a snapshot of this row shows: the attempt holding the lease, or null when none runs. @internal */
export function runKeyOf(row: SnapshotRow): string | null {
  if (row.state !== 'running' || row.owner === null || row.leaseAttempt !== row.attempts) return null
  return runKey(row.owner, row.seq, row.leaseAttempt)
}

/** A run's progress as this process knows it: its own runs' directly, other processes' as received by notice or through their channel. @internal */
export function progressOf(connection: Connection, key: string, row: SnapshotRow): ProgressValue | undefined {
  const local = readProgress(key)
  if (local !== undefined) return local
  if (connection.progressNotices) return readNoticeProgress(connection, key)
  const channel = row.channel
  return channel === null || isOwnChannel(channel) ? undefined : readRemoteProgress(channel, key)
}

/** The row as a snapshot, showing what another program stored as it is (JOB-18). A result that is not JSON is given as its text. @internal */
export function toSnapshot<Result = unknown>(
  row: SnapshotRow,
  ahead: number | null,
  progress: ProgressValue | undefined,
): JobSnapshot<Result> {
  const stored = new StoredColumns()
  // Read in the snapshot's order, so that `malformed` lists the columns in it too.
  const id = stored.text(row.id, 'id')
  const queue = stored.text(row.queue, 'queue')
  const group = stored.optionalText(row.grp, 'grp')
  const state = stored.state(row.state)
  const run = stored.runFields(row)
  const waitsFor = stored.wait(row.waitsFor, run.runAt)
  const result = stored.json(row.result, 'result') as Result | null
  return {
    id,
    queue,
    group,
    state,
    ahead,
    rateLimitedUntil: dateOrNull(rateUntil(row)),
    progress: progress === undefined ? null : progress.value,
    attempt: run.attempt,
    attempts: run.attempts,
    runAt: run.runAt,
    waitsFor,
    createdAt: run.createdAt,
    finishedAt: run.finishedAt,
    error: run.error,
    result,
    malformed: stored.malformed,
  }
}

/** Each row's rateLimitedUntil in ms, worked out once: a watcher's refresh compares a row with the last one, then snapshots it. */
const rateUntilOf = new WeakMap<SnapshotRow, number | null>()

/** When the queue's rate next lets the waiting job start (ms), if it holds it back now (JOB-22). */
function rateUntil(row: SnapshotRow): number | null {
  // A job that does not wait is held back by no rate: most rows a watcher compares, told apart without the map.
  if (row.state !== 'waiting') return null
  let until = rateUntilOf.get(row)
  if (until === undefined) rateUntilOf.set(row, (until = rateLimitedUntil(row, Date.now())))
  return until
}

function dateOrNull(ms: number | null): Date | null {
  return ms === null ? null : new Date(ms)
}

/** Whether two rows of a job show the same snapshot but for `ahead` and progress. @internal */
export function sameRun(a: SnapshotRow, b: SnapshotRow): boolean {
  // The state first: it tells apart most of the rows a watcher is handed.
  return (
    same(a.state, b.state) &&
    same(a.attempts, b.attempts) &&
    rateUntil(a) === rateUntil(b) &&
    same(a.maxAttempts, b.maxAttempts) &&
    same(a.runAt, b.runAt) &&
    same(a.waitsFor, b.waitsFor) &&
    same(a.finishedAt, b.finishedAt) &&
    same(a.error, b.error) &&
    same(a.result, b.result) &&
    same(a.grp, b.grp)
  )
}

/** Two stored values alike: blobs, which another program may have stored in any column, are read as new Buffers each time. */
function same(a: unknown, b: unknown): boolean {
  return a === b || (typeof a === 'object' && Buffer.isBuffer(a) && Buffer.isBuffer(b) && a.equals(b))
}
