/**
 * The statements that read jobs for `getJob` and `watch`, prepared once per
 * connection, on first use. They only read: a watcher never takes the write lock.
 */
import type { SnapshotRow } from '../index.js'
import { single, statement, type JobRow } from './statement.js'
import { LIMIT, RUNNABLE } from './terms.js'

/** A waiting job's queue rate, for the snapshot's rateLimitedUntil (JOB-22): the log is read only while the job waits. */
const RATE_COLUMNS = `q.rate_limit as rateLimit, q.rate_per as ratePer, q.rate_per_group as ratePerGroup,
  case when j.state = 'waiting' then q.rate_starts end as rateStarts, null as rateNow`
/** The job's worker (while it runs) and queue row. */
const JOINS = `jobs_job j left join jobs_lease w on w.owner = j.owner and j.state = 'running' left join jobs_queue q on q.name = j.queue`

/**
 * A job's row with its run's worker, as snapshots are built from. The result is read only once the job has ended,
 * what its run waits for only while it is scheduled (a claim leaves waits_for as it was).
 */
const JOB_COLUMNS = `j.seq, j.queue, j.id, j.grp, j.state, j.priority, j.run_at as runAt, j.attempts,
  j.max_attempts as maxAttempts, j.created_at as createdAt, j.finished_at as finishedAt, j.error,
  case when j.state in ('done', 'failed', 'canceled') then j.result end as result,
  case when j.state = 'scheduled' then j.waits_for end as waitsFor,
  case when j.state = 'running' then j.owner end as owner,
  case when j.state = 'running' and j.owner is not null then j.attempts end as leaseAttempt, w.channel, ${RATE_COLUMNS}`

/**
 * `ahead` walks the claim index (jobs_job_claim: queue, priority, run_at, seq, over the runnable states) in
 * claim order. A row-value bound `(priority, run_at, seq) < (?, ?, ?)` is not exact there: SQLite seeks on
 * `(priority, run_at) <= (?, ?)` and filters `seq`, so the jobs added in one batch (one run_at) are all
 * walked for each count (measured: 0.8 ms for ahead 0 in a batch of 10,000). Three exact ranges are
 * walked instead — more urgent priorities, then earlier run_at, then earlier seq — each counted up to what
 * the limit leaves. Only runnable jobs count: one scheduled for later, though more urgent, is not claimed
 * before this one now.
 */
/** Where a job stands in claim order, and how far `ahead` counts. */
interface AheadParams {
  queue: string
  priority: number
  limit: number
}

const RUNNABLE_NOW = `queue = @queue and ${RUNNABLE} and run_at <= @now`

export const READ_SQL = {
  jobById: statement<[queue: string, id: string], SnapshotRow>(`select ${JOB_COLUMNS} from ${JOINS} where j.queue = ? and j.id = ?`),
  /** The rows of many watched jobs in one pass: @seqs is a JSON array. */
  jobsBySeq: statement<[seqs: string], SnapshotRow>(`select ${JOB_COLUMNS} from ${JOINS}
    where j.seq in (select value from json_each(?))`),
  aheadByPriority: single<[AheadParams & { now: number }], number>(
    `select count(*) from (select 1 from jobs_job where ${RUNNABLE_NOW} and priority < @priority ${LIMIT})`,
  ),
  /** One upper bound on run_at, `@before` = min(its run_at, now + 1): given two, SQLite may seek on the wrong one and walk the rest. */
  aheadByRunAt: single<[AheadParams & { before: number }], number>(`select count(*) from (select 1 from jobs_job
    where queue = @queue and ${RUNNABLE} and priority = @priority and run_at < @before ${LIMIT})`),
  aheadBySeq: single<[AheadParams & { now: number; runAt: number; seq: number }], number>(`select count(*) from (select 1 from jobs_job
    where ${RUNNABLE_NOW} and priority = @priority and run_at = @runAt and seq < @seq ${LIMIT})`),
  /** The head of the line in claim order, for the `ahead` of many watched jobs at once: one walk serves them all. */
  lineHead: statement<[{ queue: string; now: number; limit: number }], JobRow['seq']>(
    `select seq from jobs_job where ${RUNNABLE_NOW} order by priority, run_at, seq ${LIMIT}`,
    { pluck: true },
  ),
} as const
