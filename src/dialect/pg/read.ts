/**
 * The statements that read jobs for `getJob` and `watch` on PostgreSQL. They
 * only read, and lock nothing: a watcher never makes a writer wait.
 */
import type { SnapshotRow } from '../index.js'
import { pgStatement } from './statement.js'
import { at, CLAIM_ORDER, inSeqs, ms, RUNNABLE } from './terms.js'

/**
 * A waiting job's queue rate, for the snapshot's rateLimitedUntil (JOB-22): the log is read only while the job waits,
 * with the server's clock, which claims stamp it with.
 */
const RATE_COLUMNS = `q.rate_limit as "rateLimit", q.rate_per::float8 as "ratePer", q.rate_per_group as "ratePerGroup",
  case when j.state = 'waiting' then q.rate_starts::text end as "rateStarts",
  case when j.state = 'waiting' and q.rate_limit is not null then ${ms('clock_timestamp()')} end as "rateNow"`
/** The row of the job's worker, while it runs, and the job's queue row. */
const JOINS = `jobs_job j left join jobs_lease w on w.owner = j.owner and j.state = 'running' left join jobs_queue q on q.name = j.queue`

/**
 * A job's row with its lease (the worker running it and the attempt, while it runs; where that worker publishes its
 * runs' progress), as snapshots are built from. The result is read only once the job has ended, what its run waits
 * for only while it is scheduled (a claim leaves waits_for as it was).
 */
const JOB_COLUMNS = `j.seq::float8 as seq, j.queue, j.id, j.grp, j.state, j.priority::float8 as priority, ${ms('j.run_at')} as "runAt", j.attempts,
  j.max_attempts as "maxAttempts", ${ms('j.created_at')} as "createdAt", ${ms('j.finished_at')} as "finishedAt", j.error,
  case when j.state in ('done', 'failed', 'canceled') then j.result::text end as result,
  case when j.state = 'scheduled' then j.waits_for end as "waitsFor",
  case when j.state = 'running' then j.owner end as owner,
  case when j.state = 'running' and j.owner is not null then j.attempts end as "leaseAttempt", w.channel, ${RATE_COLUMNS}`

const RUNNABLE_NOW = `queue = @queue::text and ${RUNNABLE} and run_at <= ${at('@now')}`

/** The head of the line: the first @limit runnable jobs in claim order, over jobs_job_claim. */
const LINE_HEAD = `select seq, priority, run_at from jobs_job where ${RUNNABLE_NOW} order by ${CLAIM_ORDER} limit @limit::bigint`

export const READ_SQL = {
  jobById: pgStatement<{ queue: string; id: string }, SnapshotRow>(
    'jobById',
    `select ${JOB_COLUMNS} from ${JOINS}
    where j.queue = @queue::text and j.id = @id::text`,
  ),
  /** The rows of many watched jobs in one pass: @seqs is a JSON array. */
  jobsBySeq: pgStatement<{ seqs: string }, SnapshotRow>(
    'jobsBySeq',
    `select ${JOB_COLUMNS} from ${JOINS}
    where ${inSeqs('j.seq', '@seqs')}`,
  ),
  /**
   * How many runnable jobs come before a job in claim order, up to @limit: one range of jobs_job_claim, bounded
   * by the row value (priority, run_at, seq), which PostgreSQL seeks on exactly, walked in its order (so that a
   * generic plan walks the index, not the table). Only jobs due by @now count: one
   * scheduled for later, though more urgent, is not claimed before this one now. The job itself never counts: a
   * run_at that another program wrote with microseconds is read rounded to the ms, perhaps up, past its own.
   */
  countAhead: pgStatement<
    { queue: string; now: number; priority: number | string; runAt: number; seq: number; limit: number },
    { ahead: number }
  >(
    'countAhead',
    `select count(*)::int as ahead from (
      select 1 from jobs_job where ${RUNNABLE_NOW} and (priority, run_at, seq) < (@priority::bigint, ${at('@runAt')}, @seq::bigint)
        and seq <> @seq::bigint
      order by ${CLAIM_ORDER} limit @limit::bigint
    ) a`,
  ),
  /**
   * The places in claim order of the jobs @seqs (a JSON array) among the first @limit in line, and, in the row
   * whose seq is null, how many were walked: the place of those not met.
   */
  placesInLine: pgStatement<{ queue: string; now: number; limit: number; seqs: string }, { seq: number | null; place: number }>(
    'placesInLine',
    `with head as (
      select seq, row_number() over (order by priority, run_at, seq) - 1 as place from (${LINE_HEAD}) h
    )
    select seq::float8 as seq, place::int as place from head where ${inSeqs('seq', '@seqs')}
    union all
    select null, count(*)::int from head`,
  ),
} as const
