/**
 * What a worker's own writes made of its jobs' rows, told to this process's
 * watchers with the change (wake.ts), so that they need not read the rows
 * back: a claim knows the lease it took, an end knows the outcome it wrote.
 *
 * A row is made only from the row right before the change, as the watcher
 * last had it: the state, attempt and lease the change was made from must
 * match it, else (the watcher is behind, another process changed the job
 * meanwhile) the watcher reads the row as before. The columns a change does
 * not write are taken from that row as they were, so a row another program
 * stored with odd values is still shown as stored (JOB-18).
 */
import type { ClaimedJob, SnapshotRow } from '../dialect/index.js'
import { ENDED_STATES, type EndedState } from '../types.js'
import type { RunEndRecord } from './record.js'

/**
 * A job's row after this process's change, given the row before it: `index` is the job's place in the seqs the
 * change names. Undefined when the change was not made from that row, or is not known whole.
 */
export type Written = (index: number, before: SnapshotRow) => SnapshotRow | undefined

/** The rows a claim made of `jobs` (in the order of its seqs): running, on their next attempt, under the lease this worker took. @internal */
export function claimedRows(jobs: readonly ClaimedJob[], owner: string, channel: string | null): Written {
  return (index, before) => {
    const job = jobs[index]
    if (!job || job.seq !== before.seq || before.state !== job.claimedFrom || before.attempts !== job.attempts - 1) return undefined
    return row(before, 'running', before.runAt, before.finishedAt, before.result, before.error, job.attempts, owner, job.attempts, channel)
  }
}

/**
 * The rows the ends of runs `records` made (in the order of its seqs), for the ends that landed and ended their
 * job (done, failed, canceled); a run that goes back to waiting or scheduled is read, for its `ahead` and its
 * queue's rate. `withResult`: whether the row holds a result as the run wrote it (SQLite); PostgreSQL stores it
 * as jsonb, which re-encodes it, and its times go through the server's clock type: there the rows of ended jobs
 * are read back.
 * @internal
 */
export function endedRows(records: readonly RunEndRecord[], landed: readonly boolean[], withResult: boolean): Written {
  return (index, before) => {
    const record = records[index]
    if (
      !withResult ||
      !record ||
      !landed[index] ||
      record.seq !== before.seq ||
      !ENDED_STATES.includes(record.transition.state as EndedState)
    )
      return undefined
    if (
      before.state !== 'running' ||
      before.owner !== record.owner ||
      before.leaseAttempt !== record.attempt ||
      before.attempts !== record.attempt
    )
      return undefined
    const { transition } = record
    return row(
      before,
      transition.state,
      transition.runAt ?? before.runAt,
      transition.finishedAt,
      transition.result,
      transition.error,
      before.attempts - transition.refund,
      null,
      null,
      null,
    )
  }
}

/** The row before a change with the columns it wrote; every column named, so that every row made has one shape. */
function row(
  before: SnapshotRow,
  state: SnapshotRow['state'],
  runAt: SnapshotRow['runAt'],
  finishedAt: SnapshotRow['finishedAt'],
  result: SnapshotRow['result'],
  error: SnapshotRow['error'],
  attempts: SnapshotRow['attempts'],
  owner: SnapshotRow['owner'],
  leaseAttempt: SnapshotRow['leaseAttempt'],
  channel: SnapshotRow['channel'],
): SnapshotRow {
  return {
    seq: before.seq,
    queue: before.queue,
    id: before.id,
    grp: before.grp,
    state,
    priority: before.priority,
    runAt,
    attempts,
    maxAttempts: before.maxAttempts,
    createdAt: before.createdAt,
    finishedAt,
    error,
    result,
    // A claim leaves waits_for as it was, but a running or ended job waits for nothing.
    waitsFor: null,
    owner,
    leaseAttempt,
    channel,
    // The queue's rate shows only on a waiting job's row: the rows made here are of jobs that do not wait.
    rateLimit: before.rateLimit,
    ratePer: before.ratePer,
    ratePerGroup: before.ratePerGroup,
    rateStarts: null,
    rateNow: null,
  }
}
