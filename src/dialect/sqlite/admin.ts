/**
 * Every statement of the admin API, the testing helpers, the command-line
 * tool and the dashboard, named by what it does and prepared once per
 * connection, on first use. Listings page by keyset over the index that serves each state,
 * so a page costs the same on the millionth job as on the first.
 */
import type { AdminJobDetailRow, AdminJobRow, CountsRow, EventRow, ListParams } from '../index.js'
import type { EndedState } from '../../types.js'
import { single, statement, type JobRow, type QueueRow, type StepRow } from './statement.js'
import { ENDED, holdsKey, LIMIT, RUNNABLE } from './terms.js'

/** The columns of a job as the admin API answers it; what its run waits for only while it is scheduled. */
const JOB = `seq, queue, id, grp, value, state, priority, attempts, max_attempts as maxAttempts, run_at as runAt,
  created_at as createdAt, finished_at as finishedAt, error, error_stack as errorStack, result,
  case when state = 'scheduled' then waits_for end as waitsFor`

const IN_GROUP = `(@grp is null or grp = @grp)`

export const ADMIN_SQL = {
  findJob: statement<[queue: string, id: string], Pick<JobRow, 'seq' | 'state'>>(
    `select seq, state from jobs_job where queue = ? and id = ?`,
  ),
  jobRecord: statement<[queue: string, id: string], AdminJobDetailRow>(
    `select ${JOB}, trace_context as traceContext from jobs_job where queue = ? and id = ?`,
  ),
  /** Ends a job that has not ended yet as canceled, clearing its worker (its run's fence then fails); its steps are deleted beside it. */
  cancelJob: statement<[{ seq: number; now: number }], never>(
    `update jobs_job set state = 'canceled', finished_at = @now, owner = null where seq = @seq and state in ('waiting', 'scheduled', 'running')`,
  ),
  /**
   * A failed or canceled job runs again with fresh attempts and nothing of its last run kept, unless another job holds
   * its unique key in a state that holds it (retryKeyHolder): waiting, it would hold the key too. It takes no more
   * debounced adds (a canceled job that never ran still has its debounce id): a later add of that id queues a new job.
   */
  retryJob: statement<
    [{ seq: number; now: number }],
    never
  >(`update jobs_job set state = 'waiting', attempts = 0, run_at = @now, finished_at = null,
      error = null, error_stack = null, result = null, debounce_key = null
    where seq = @seq and state in ('failed', 'canceled')
      and not exists (select 1 from jobs_job h where h.queue = jobs_job.queue and h.unique_key = jobs_job.unique_key
        and ${holdsKey('h')} and h.seq <> jobs_job.seq)`),
  /** The job that holds the unique key of the failed or canceled job @seq, in a state that holds it: what keeps it from a retry. */
  retryKeyHolder: statement<[{ seq: number }], string>(
    `select h.id from jobs_job j join jobs_job h on h.queue = j.queue and h.unique_key = j.unique_key and ${holdsKey('h')} and h.seq <> j.seq
    where j.seq = @seq and j.state in ('failed', 'canceled') limit 1`,
    { pluck: true },
  ),
  setPaused: statement<[{ queue: string; paused: 0 | 1 }], never>(`insert into jobs_queue (name, paused) values (@queue, @paused)
    on conflict (name) do update set paused = excluded.paused`),
  queueCounts: statement<[queue: string], CountsRow>(
    `select name, paused, waiting, scheduled, running, done, failed, canceled from jobs_queue where name = ?`,
  ),
  allQueueCounts: statement<[], CountsRow>(
    `select name, paused, waiting, scheduled, running, done, failed, canceled from jobs_queue order by name`,
  ),
  queueListNames: statement<[], QueueRow['name']>(`select name from jobs_queue order by name`, { pluck: true }),
  jobSteps: statement<[seq: number], Pick<StepRow, 'name' | 'answer'>>(`select name, answer from jobs_step where job = ? order by rowid`),
  /** A job's events, in the order they took their state (by name within one ms), over the primary key (job, name). */
  jobEvents: statement<[seq: number], Omit<EventRow, 'job'>>(
    `select name, state, payload, deadline, at from jobs_event where job = ? order by at, name`,
  ),
  /** What a run left its job as: for drain's account of each run. */
  jobOutcome: statement<[seq: number], Pick<JobRow, 'state' | 'error'>>(`select state, error from jobs_job where seq = ?`),
  /** A running job's lease: its worker, the attempt, and until when the worker's row holds it (null: gone). */
  jobLease: statement<[seq: number], { owner: string; attempt: number; expiresAt: number | null }>(
    `select j.owner, j.attempts as attempt, w.expires_at as expiresAt
    from jobs_job j left join jobs_lease w on w.owner = j.owner where j.seq = ? and j.state = 'running' and j.owner is not null`,
  ),
  /** Every job of a queue in add order: for the testing helpers, on small test databases. */
  queueJobs: statement<[queue: string], AdminJobRow>(`select ${JOB} from jobs_job where queue = ? order by seq`),

  /** Waiting jobs in claim order (priority, run_at, seq), over the claim index. */
  listWaiting: statement<[ListParams], AdminJobRow>(`select ${JOB} from jobs_job
    where queue = @queue and ${RUNNABLE} and state = 'waiting' and ${IN_GROUP}
      and (priority, run_at, seq) > (@k1, @k2, @k3)
    order by priority, run_at, seq ${LIMIT}`),
  /** Scheduled jobs by the time they run, over the scheduled index. */
  listScheduled: statement<[ListParams], AdminJobRow>(`select ${JOB} from jobs_job
    where queue = @queue and state = 'scheduled' and ${IN_GROUP} and (run_at, seq) > (@k1, @k2)
    order by run_at, seq ${LIMIT}`),
  /** Running jobs, found through jobs_job_running (few: at most the queue's concurrency), newest first. */
  listRunning: statement<[ListParams], AdminJobRow>(`select ${JOB} from jobs_job indexed by jobs_job_running
    where queue = @queue and state = 'running' and ${IN_GROUP} and seq < @k1
    order by seq desc ${LIMIT}`),
  /** Ended jobs of one state, most recently ended first, over the ended index. */
  listEnded: statement<[ListParams], AdminJobRow>(`select ${JOB} from jobs_job
    where queue = @queue and ${ENDED} and state = @state and ${IN_GROUP} and (finished_at, seq) < (@k1, @k2)
    order by finished_at desc, seq desc ${LIMIT}`),
  /** Any other listing, newest added first, walking the primary key (the `+` keeps SQLite off the queue index). */
  listNewest: statement<[ListParams], AdminJobRow>(`select ${JOB} from jobs_job
    where (@queue is null or +queue = @queue) and (@state is null or state = @state) and ${IN_GROUP} and seq < @k1
    order by seq desc ${LIMIT}`),

  /** Jobs of a queue that ended in a state within [since, until). */
  endedBetween: single<[{ queue: string; state: EndedState; since: number; until: number }], number>(`select count(*) from jobs_job
    where queue = @queue and ${ENDED} and state = @state and finished_at >= @since and finished_at < @until`),
  /** Ended jobs of a state in [since, until), counted per bucket of @bucketMs. */
  endedPerBucket: statement<
    [{ queue: string; state: EndedState; since: number; until: number; bucketMs: number }],
    { bucket: number; count: number }
  >(`select finished_at / cast(@bucketMs as integer) as bucket, count(*) as count from jobs_job
    where queue = @queue and ${ENDED} and state = @state and finished_at >= @since and finished_at < @until
    group by bucket`),
  /**
   * The smallest run_at among a queue's runnable jobs: the first entry of the
   * claim index for each distinct priority, walked one priority at a time.
   */
  earliestRunnable: single<[{ queue: string }], number | null>(`with recursive priorities(priority) as (
      select (select min(priority) from jobs_job where queue = @queue and ${RUNNABLE})
      union all
      select (select priority from jobs_job where queue = @queue and ${RUNNABLE} and priority > priorities.priority
              order by priority limit 1)
      from priorities where priorities.priority is not null
    )
    select min((select run_at from jobs_job where queue = @queue and ${RUNNABLE} and priority = priorities.priority
                order by run_at limit 1))
    from priorities where priority is not null`),
} as const
