/**
 * Reading jobs as snapshots: the row, `ahead` for a waiting job, and the
 * running attempt's live progress.
 */
import { connectionOf, type SqliteConnection as Connection, type SyncDatabase } from '../dialect/sqlite/connection.js'
import { checkName } from '../json.js'
import { MAX_AHEAD } from '../limits.js'
import { readRemoteProgress } from '../progress/remote.js'
import { isOwnChannel } from '../progress/channel.js'
import { readStatements, type SnapshotRow } from '../dialect/sqlite/read.js'
import type { JobSnapshot, JobState } from '../types.js'
import { readProgress, runKey, type ProgressValue } from '../progress/store.js'
import { StoredColumns } from '../stored.js'
import { queueNameOf, type QueueRef, type ResultOf } from './ref.js'

/**
 * getJob answers the job of `queue` with this `id` as it is now, or
 * undefined when the queue holds no such job. Synchronous, like `enqueue`.
 * The queue is its definition, whose result type the snapshot's `result`
 * has, or its name alone (a `result` of any JSON).
 *
 * `ahead` is counted for a waiting job (up to 10,000); `progress` is the
 * running attempt's progress as this process knows it: set by a run of this
 * process, or received for a job that a `watch` in this process follows.
 * For progress set in another process, watch the job. A row that another
 * program stored with values the table protocol does not allow is shown as
 * stored, never thrown on: see the snapshot's `malformed` (JOB-18).
 *
 * Throws INVALID_OPTION for an empty id or queue name, TOO_LARGE for one
 * over 1,024 bytes, SCHEMA_MISSING when the tables were not migrated.
 *
 * @example
 * const job = getJob(db, replies, `reply:${messageId}`)
 * if (job?.state === 'failed') console.log(job.error)
 */
export function getJob<Q extends QueueRef>(db: SyncDatabase, queue: Q, id: string): JobSnapshot<ResultOf<Q>> | undefined {
  const connection = connectionOf(db)
  const name = queueNameOf(queue)
  checkName(id, 'id')
  return readStatements(connection).snapshot(() => {
    const row = readJobRow(connection, name, id)
    if (!row) return undefined
    const ahead = row.state === 'waiting' ? countAhead(connection, row) : null
    const key = runKeyOf(row)
    return toSnapshot<ResultOf<Q>>(row, ahead, key === null ? undefined : progressOf(key, row.channel))
  })
}

/** @internal */
export function readJobRow(connection: Connection, queue: string, id: string): SnapshotRow | undefined {
  return readStatements(connection).statements.jobById.get(queue, id)
}

/** The rows of many jobs in one statement. @internal */
export function readJobRows(connection: Connection, seqs: readonly number[]): SnapshotRow[] {
  return readStatements(connection).statements.jobsBySeq.all(JSON.stringify(seqs))
}

/** How many runnable jobs (waiting, or scheduled and due) of the job's queue come before it in claim order, up to 10,000. @internal */
export function countAhead(connection: Connection, row: SnapshotRow, now = Date.now()): number {
  const { aheadByPriority, aheadByRunAt, aheadBySeq } = readStatements(connection).statements
  const at = { queue: row.queue, priority: row.priority, runAt: row.runAt, seq: row.seq, now, limit: MAX_AHEAD }
  let ahead = aheadByPriority.get(at)
  if (ahead < MAX_AHEAD) ahead += aheadByRunAt.get({ queue: row.queue, priority: row.priority, before: Math.min(row.runAt, now + 1), limit: MAX_AHEAD - ahead })
  if (ahead < MAX_AHEAD) ahead += aheadBySeq.get({ ...at, limit: MAX_AHEAD - ahead })
  return ahead
}

/**
 * `ahead` for many waiting jobs of one queue at once: one walk down the
 * line in claim order, stopped after the last of them or at 10,000 jobs,
 * gives each its place. However many jobs are asked about, the index is
 * walked at most 10,000 entries. Answers the counts by seq.
 * @internal
 */
export function countAheadOfMany(connection: Connection, rows: readonly SnapshotRow[], now = Date.now()): Map<number, number> {
  const counts = new Map<number, number>()
  if (rows.length === 1) {
    counts.set(rows[0]!.seq, countAhead(connection, rows[0]!, now))
    return counts
  }
  const wanted = new Set(rows.map((row) => row.seq))
  let place = 0
  for (const seq of readStatements(connection).statements.lineHead.iterate({ queue: rows[0]!.queue, now, limit: MAX_AHEAD })) {
    if (wanted.delete(seq)) {
      counts.set(seq, place)
      if (wanted.size === 0) break
    }
    place++
  }
  // Not met in the first 10,000: at least that many are ahead (or, run_at still to come, none is runnable before it).
  for (const seq of wanted) counts.set(seq, place)
  return counts
}

/** The run whose progress a snapshot of this row shows: the attempt holding the lease, or null when none runs. @internal */
export function runKeyOf(row: SnapshotRow): string | null {
  if (row.state !== 'running' || row.owner === null || row.leaseAttempt !== row.attempts) return null
  return runKey(row.owner, row.seq, row.leaseAttempt)
}

/** A run's progress as this process knows it: its own runs' directly, other processes' as received through their channel. @internal */
export function progressOf(key: string, channel: string | null): ProgressValue | undefined {
  const local = readProgress(key)
  if (local !== undefined || channel === null || isOwnChannel(channel)) return local
  return readRemoteProgress(channel, key)
}

/** The row as a snapshot, showing what another program stored as it is (JOB-18). A result that is not JSON is given as its text. @internal */
export function toSnapshot<Result = unknown>(row: SnapshotRow, ahead: number | null, progress: ProgressValue | undefined): JobSnapshot<Result> {
  const stored = new StoredColumns()
  return {
    id: stored.text(row.id, 'id'),
    queue: stored.text(row.queue, 'queue'),
    group: stored.optionalText(row.grp, 'grp'),
    state: stored.state(row.state),
    ahead,
    progress: progress === undefined ? null : progress.value,
    ...stored.runFields(row),
    result: stored.json(row.result, 'result') as Result | null,
    malformed: stored.malformed,
  }
}
