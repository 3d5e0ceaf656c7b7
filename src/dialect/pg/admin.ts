/**
 * Every statement of the admin API, the testing helpers, the command-line
 * tool and the dashboard on PostgreSQL, named by what it does. Listings page
 * by keyset over the index that serves each state, so a page costs the same
 * on the millionth job as on the first. Counts by state are the queue's row
 * plus what is not folded into it yet (counts.ts).
 */
import type { AdminJobDetailRow, AdminJobRow, CountsRow, EventRow, ListParams } from '../index.js'
import type { EndedState } from '../../types.js'
import { pgStatement, type JobRow, type StepRow } from './statement.js'
import { at, CLAIM_ORDER, EARLIEST_RUNNABLE, ENDED, holdsKey, JOB_QUEUES, ms, RUNNABLE } from './terms.js'
import { kept, UNFOLDED, UNFOLDED_ALL } from './counts.js'

/** The columns of a job as the admin API answers it; what its run waits for only while it is scheduled. */
const JOB = `seq::float8 as seq, queue, id, grp, value::text as value, state, priority::float8 as priority, attempts, max_attempts as "maxAttempts",
  ${ms('run_at')} as "runAt", ${ms('created_at')} as "createdAt", ${ms('finished_at')} as "finishedAt", error,
  error_stack as "errorStack", result::text as result, case when state = 'scheduled' then waits_for end as "waitsFor"`

const IN_GROUP = `(@grp::text is null or grp = @grp::text)`

/** A page of a listing, its keys as numbers: times in ms (±Infinity before or after every time), seqs and priorities as whole numbers. */
type Page = Omit<ListParams, 'k1' | 'k2' | 'k3'> & { k1: number | string; k2: number | string | null; k3: number | string | null }

/** Counts by state of the queue whose row is `q` and whose counts not folded yet are `unfolded` (counts.ts). */
const COUNTS = `${kept('waiting')} as waiting, ${kept('scheduled')} as scheduled, ${kept('running')} as running,
  ${kept('done')} as done, ${kept('failed')} as failed, ${kept('canceled')} as canceled`

type EndedWindow = { queue: string; state: EndedState; since: number; until: number }

export const ADMIN_SQL = {
  findJob: pgStatement<{ queue: string; id: string }, Pick<JobRow, 'seq' | 'state'>>(
    'findJob',
    `select seq::float8 as seq, state from jobs_job where queue = @queue::text and id = @id::text`,
  ),
  jobRecord: pgStatement<{ queue: string; id: string }, AdminJobDetailRow>(
    'jobRecord',
    `select ${JOB}, trace_context as "traceContext" from jobs_job where queue = @queue::text and id = @id::text`,
  ),
  /**
   * Ends a job that has not ended yet as canceled, clearing its worker: a run of it loses its lease, and its fence
   * holds no more. Its steps are deleted beside it.
   */
  cancelJob: pgStatement<{ seq: number; now: number }, { canceled: 1 }>(
    'cancelJob',
    `update jobs_job set state = 'canceled', finished_at = ${at('@now')}, owner = null
    where seq = @seq::bigint and state in ('waiting', 'scheduled', 'running')
    returning 1 as canceled`,
  ),
  /**
   * A failed or canceled job runs again with fresh attempts and nothing of its last run kept, unless another job holds
   * its unique key in a state that holds it (`holder`, its id): waiting, it would hold the key too. It takes no more
   * debounced adds (a canceled job that never ran still has its debounce id): a later add of that id queues a new job.
   * An add of its key that commits while the update waits for it fails the update on jobs_job_unique (JobRetried).
   */
  retryJob: pgStatement<{ seq: number; now: number }, { retried: number; holder: string | null }>(
    'retryJob',
    `with job as (
    select seq, queue, unique_key from jobs_job where seq = @seq::bigint and state in ('failed', 'canceled')
  ),
  holder as (
    select h.id from job join jobs_job h on h.queue = job.queue and h.unique_key = job.unique_key
    where ${holdsKey('h')} and h.seq <> job.seq limit 1
  ),
  retried as (
    update jobs_job set state = 'waiting', attempts = 0, run_at = ${at('@now')}, finished_at = null,
      error = null, error_stack = null, result = null, debounce_key = null
    where seq = (select seq from job) and state in ('failed', 'canceled') and not exists (select 1 from holder)
    returning 1
  )
  select (select count(*) from retried)::int as retried, (select id from holder) as holder`,
  ),
  setPaused: pgStatement<{ queue: string; paused: boolean }>(
    'setPaused',
    `insert into jobs_queue (name, paused) values (@queue::text, @paused::boolean)
    on conflict (name) do update set paused = excluded.paused`,
  ),
  /**
   * A queue's counts by state: its row plus its counts not folded yet (counts.ts), however many jobs it holds.
   * Undefined for a queue with neither a row, nor counts, nor a job.
   */
  queueCounts: pgStatement<{ queue: string }, CountsRow>(
    'queueCounts',
    `select @queue::text as name, coalesce(q.paused, false)::int as paused, ${COUNTS}
    from ${UNFOLDED} left join jobs_queue q on q.name = @queue::text
    where q.name is not null or unfolded.rows > 0 or exists (select 1 from jobs_job where queue = @queue::text)`,
  ),
  /** Every queue's counts by state, by name: each row plus its counts not folded yet. */
  allQueueCounts: pgStatement<Record<never, never>, CountsRow>(
    'allQueueCounts',
    `with recursive ${JOB_QUEUES},
      names as (select name from jobs_queue union select name from job_queues where name is not null union select distinct queue from jobs_count)
    select n.name, coalesce(q.paused, false)::int as paused, ${COUNTS}
    from names n left join jobs_queue q on q.name = n.name left join ${UNFOLDED_ALL} on unfolded.queue = n.name
    order by n.name`,
  ),
  /** The queues that have a row or a job. */
  queueListNames: pgStatement<Record<never, never>, { name: string }>(
    'queueListNames',
    `with recursive ${JOB_QUEUES}
    select name from jobs_queue union select name from job_queues where name is not null order by name`,
  ),
  /** A job's kept steps in the order they were written: jobs_step.seq, an identity, numbers them so. */
  jobSteps: pgStatement<{ seq: number }, Pick<StepRow, 'name' | 'answer'>>(
    'jobSteps',
    `select name, answer::text as answer from jobs_step where job = @seq::bigint
    order by jobs_step.seq`,
  ),
  /** A job's events, in the order they took their state (by name within one ms), over the primary key (job, name). */
  jobEvents: pgStatement<{ seq: number }, Omit<EventRow, 'job'>>(
    'jobEvents',
    `select name, state, payload::text as payload, ${ms('deadline')} as deadline, ${ms('at')} as at
    from jobs_event where job = @seq::bigint order by jobs_event.at, name`,
  ),
  /** What a run left its job as: for drain's account of each run. */
  jobOutcome: pgStatement<{ seq: number }, Pick<JobRow, 'state' | 'error'>>(
    'jobOutcome',
    `select state, error from jobs_job where seq = @seq::bigint`,
  ),
  /** A running job's worker, the attempt it runs, and until when the worker's row holds it (null: the worker has no row). */
  jobLease: pgStatement<{ seq: number }, { owner: string; attempt: number; expiresAt: number | null }>(
    'jobLease',
    `select j.owner, j.attempts as attempt, ${ms('w.expires_at')} as "expiresAt"
    from jobs_job j left join jobs_lease w on w.owner = j.owner
    where j.seq = @seq::bigint and j.state = 'running' and j.owner is not null`,
  ),
  /** Every job of a queue in add order: for the testing helpers, on small test databases. */
  queueJobs: pgStatement<{ queue: string }, AdminJobRow>(
    'queueJobs',
    `select ${JOB} from jobs_job where queue = @queue::text order by jobs_job.seq`,
  ),

  /** Waiting jobs in claim order (priority, run_at, seq), over the claim index. */
  listWaiting: pgStatement<Page, AdminJobRow>(
    'listWaiting',
    `select ${JOB} from jobs_job
    where queue = @queue::text and ${RUNNABLE} and state = 'waiting' and ${IN_GROUP}
      and (priority, run_at, seq) > (@k1::bigint, ${at('@k2')}, @k3::bigint)
    order by ${CLAIM_ORDER} limit @limit::bigint`,
  ),
  /** Scheduled jobs by the time they run, over the scheduled index. */
  listScheduled: pgStatement<Page, AdminJobRow>(
    'listScheduled',
    `select ${JOB} from jobs_job
    where queue = @queue::text and state = 'scheduled' and ${IN_GROUP} and (run_at, seq) > (${at('@k1')}, @k2::bigint)
    order by jobs_job.run_at, jobs_job.seq limit @limit::bigint`,
  ),
  /**
   * Running jobs, found through jobs_job_running (few: at most the queue's concurrency), newest first: their seqs
   * are gathered first, or the planner may walk the primary key down from @k1, through every job ended since.
   */
  listRunning: pgStatement<Page, AdminJobRow>(
    'listRunning',
    `select ${JOB} from jobs_job
    where seq = any(array(select seq from jobs_job where queue = @queue::text and state = 'running'))
      and state = 'running' and ${IN_GROUP} and seq < @k1::bigint
    order by jobs_job.seq desc limit @limit::bigint`,
  ),
  /** Ended jobs of one state, most recently ended first, over the ended index. */
  listEnded: pgStatement<Page, AdminJobRow>(
    'listEnded',
    `select ${JOB} from jobs_job
    where queue = @queue::text and ${ENDED} and state = @state::text and ${IN_GROUP} and (finished_at, seq) < (${at('@k1')}, @k2::bigint)
    order by jobs_job.finished_at desc, jobs_job.seq desc limit @limit::bigint`,
  ),
  /** Any other listing, newest added first, walking the primary key. */
  listNewest: pgStatement<Page, AdminJobRow>(
    'listNewest',
    `select ${JOB} from jobs_job
    where (@queue::text is null or queue = @queue::text) and (@state::text is null or state = @state::text) and ${IN_GROUP} and seq < @k1::bigint
    order by jobs_job.seq desc limit @limit::bigint`,
  ),

  /** Jobs of a queue that ended in a state within [since, until). */
  endedBetween: pgStatement<EndedWindow, { count: number }>(
    'endedBetween',
    `select count(*)::float8 as count from jobs_job
    where queue = @queue::text and ${ENDED} and state = @state::text and finished_at >= ${at('@since')} and finished_at < ${at('@until')}`,
  ),
  /** Ended jobs of a state in [since, until), counted per bucket of @bucketMs (the finish time in ms over @bucketMs, rounded down). */
  endedPerBucket: pgStatement<EndedWindow & { bucketMs: number }, { bucket: number; count: number }>(
    'endedPerBucket',
    `select floor(${ms('finished_at')} / @bucketMs::float8) as bucket,
      count(*)::float8 as count
    from jobs_job
    where queue = @queue::text and ${ENDED} and state = @state::text and finished_at >= ${at('@since')} and finished_at < ${at('@until')}
    group by 1 order by 1`,
  ),
  /** The earliest run_at among a queue's runnable jobs (terms.ts: one probe of the claim index per priority). */
  earliestRunnable: pgStatement<{ queue: string }, { runAt: number | null }>(
    'earliestRunnable',
    `select ${ms(EARLIEST_RUNNABLE)} as "runAt"`,
  ),
} as const
