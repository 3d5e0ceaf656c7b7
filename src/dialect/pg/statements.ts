/**
 * Every statement the engine runs on PostgreSQL, named by what it does. Writes
 * that end a run or keep a step carry the fence (terms.ts: the job running
 * this attempt for this worker) in the same statement, locking what it
 * checks, so a run that lost its lease changes nothing (JOB-16). A worker's
 * lease on all its runs is its one row of jobs_lease.
 *
 * Unlike SQLite's, these statements update no counters in jobs_queue: a
 * counter row updated by every claim, end and add would make every writer of
 * a queue wait on that one row. The triggers of counts.ts append each
 * statement's changes to jobs_count instead, and counts are read as the row
 * plus what is not folded into it yet.
 */
import type { EndedState, JobState } from '../../types.js'
import type {
  AbandonedLease,
  Claimable,
  ClaimedJob,
  ClaimLimits,
  DebouncedJob,
  EventLook,
  ExpiredBy,
  HeldRun,
  JobEnd,
  JobHolder,
  LeaseParams,
  NewJob,
  RunEndParams,
  SignalParams,
  StoredLimits,
  StoreLimitsParams,
  UniqueJob,
  UnleasedRun,
  WorkerLease,
} from '../index.js'
import { pgStatement, type JobRow, type StepRow } from './statement.js'
import { at, CLAIM_ORDER, EARLIEST_RUNNABLE, ENDED, fence, holdsKey, inSeqs, ms, ONE_RUN, RUNNABLE, runningFor } from './terms.js'
import { kept, UNFOLDED } from './counts.js'

/** Runnable jobs of @queue due by @now. */
const DUE = `queue = @queue::text and ${RUNNABLE} and run_at <= ${at('@now')}`

/** The worker of the row `w` of jobs_lease runs no job: no entry of jobs_job_running names it. */
const HOLDS_NO_RUN = `not exists (select 1 from jobs_job where state = 'running' and owner = w.owner)`

/** The columns a run's end writes, from RunEndParams: the job names no worker from then on. */
const END_SET = `state = @state::text, ${parkedSet('jobs_job', at('@runAt'), '@waitsFor::text', '@signals::int')},
  finished_at = ${at('@finishedAt')}, result = @result::jsonb, error = @error::text, error_stack = @errorStack::text,
  attempts = attempts - @refund::int, abandoned = @abandoned::int <> 0, owner = null`

/**
 * The columns a run's end writes to the job row `j` of a park (RunEndParams: waitsFor, signals), and its run_at: a run
 * parked to wait for an event whose job was signalled since the run looked (its signals moved) stays due at once,
 * its run_at as it was, waiting for nothing; any other end waits for `waitsFor` (null: nothing) until `runAt`. A
 * signal's update of the row holds its lock until the signal commits, and an end that waited for it reads the row as
 * the signal left it. The debounce id is the first run's to drop: a job holds it only until it starts.
 */
function parkedSet(j: string, runAt: string, waitsFor: string, signals: string): string {
  const signalled = `${signals} is not null and ${j}.signals <> ${signals}`
  return `run_at = case when ${signalled} then ${j}.run_at else coalesce(${runAt}, ${j}.run_at) end,
    waits_for = case when ${signalled} then null else ${waitsFor} end, debounce_key = null`
}

/**
 * Ends as the end statements read them (endEach): a JSON array of [seq, attempt, state, runAt, finishedAt, result,
 * error, errorStack, refund, abandoned, waitsFor, signals], result the JSON text of the result or null.
 */
export function endsAsJson(ends: readonly JobEnd[]): string {
  return JSON.stringify(
    ends.map(({ seq, attempt, transition: t }) => [
      seq,
      attempt,
      t.state,
      t.runAt,
      t.finishedAt,
      t.result,
      t.error,
      t.errorStack,
      t.refund,
      t.abandoned,
      t.waitsFor,
      t.signals,
    ]),
  )
}

/**
 * The columns a run's end writes to the job row `j`, from the row `e` of an ends array (endsAsJson): the job
 * names no worker from then on.
 */
function endEach(j: string, e: string): string {
  return `state = ${e} ->> 2, ${parkedSet(j, at(`(${e} ->> 3)`), `${e} ->> 10`, `(${e} ->> 11)::int`)}, finished_at = ${at(`(${e} ->> 4)`)},
      result = (${e} ->> 5)::jsonb, error = ${e} ->> 6, error_stack = ${e} ->> 7, attempts = ${j}.attempts - (${e} ->> 8)::int,
      abandoned = (${e} ->> 9)::int <> 0, owner = null`
}

/** The first due job of @queue, in claim order, whose last run was abandoned (jobs_job_abandoned): a lateral subquery. */
const FIRST_ALONE = `(select seq, run_at from jobs_job where abandoned and ${DUE} order by ${CLAIM_ORDER} limit 1)`

/**
 * A claim's renewal of the worker's row until @leaseUntil (with @channel, and @host and @pid where it writes the row),
 * when it is set and the CTE `claimed` took any job. Like every renewal it never shortens the row: a claim whose time
 * was read before a step's renewal may commit after it, and the step started its function on the promise of that
 * renewal (engine/run.ts).
 */
const RENEW_IF_CLAIMED = `insert into jobs_lease (owner, host, pid, expires_at, channel)
    select @owner::text, @host::text, @pid::int, ${at('@leaseUntil')}, @channel::text
    where @leaseUntil::float8 is not null and exists (select 1 from claimed)
    on conflict (owner) do update set expires_at = greatest(jobs_lease.expires_at, excluded.expires_at), channel = excluded.channel`

/**
 * A flush's CTEs for the worker @owner's own ends in @ends (an ends array, endsAsJson): `ended`, each run's end behind
 * its fence (terms.ts runningFor) with its own next state, and `dropped_steps`, the steps of the jobs that ended.
 */
const OWN_ENDS = `ended as (
    update jobs_job j set ${endEach('j', 'e.row')}
    from jsonb_array_elements(@ends::jsonb) as e(row)
    where j.seq = (e.row ->> 0)::bigint and ${runningFor('j', '(e.row ->> 1)::int')}
    returning j.seq, j.state
  ),
  dropped_steps as (
    delete from jobs_step where job in (select seq from ended where ${ENDED})
  )`

/**
 * The running jobs of @queue: the entries of jobs_job_running for the queue, a few however many jobs it holds. Every
 * count of runs under way (for limits, per group) reads them.
 */
const RUNNING = `jobs_job where queue = @queue::text and state = 'running'`

/** The insert of one job from its NewJob parameters, with `columns` more, whose values `values` gives in their order. */
function insertJobWith(columns = '', values = ''): string {
  return `insert into jobs_job (queue, id, grp, value, state, priority, attempts, max_attempts, run_at, created_at, trace_context${columns && `, ${columns}`})
  select @queue::text, @id::text, @grp::text, @value::jsonb, @state::text, @priority::bigint, 0, @maxAttempts::int, ${at('@runAt')}, ${at('@now')},
    @traceContext::text${values && `, ${values}`}`
}

const INSERT_JOB = insertJobWith()

/**
 * The queue @queue holds fewer than @maxWaiting jobs waiting or scheduled, by its kept counts (the row and what is not
 * folded: counts.ts), whatever the number of jobs.
 */
const HAS_ROOM = `(select ${kept('waiting')} + ${kept('scheduled')} from ${UNFOLDED} left join jobs_queue q on q.name = @queue::text)
      < @maxWaiting::bigint`

/** The job of @queue with @id, or else the one holding @uniqueKey in a state that holds it (jobs_job_unique): its id, and by which. */
const HOLDER = `select id, matched from (
      select id, 'id' as matched, 0 as rank from jobs_job where queue = @queue::text and id = @id::text
      union all
      select id, 'unique', 1 from jobs_job where queue = @queue::text and unique_key = @uniqueKey::text and ${holdsKey('jobs_job')}
    ) h order by rank limit 1`

/** The channel on which the engine tells of changes: a notice's payload is `kind:queue` (or `progress:ask`, an ask for a run's progress). */
export const NOTICE_CHANNEL = 'drizzle_jobs'
/** The channel that carries runs' progress values (src/progress/notices.ts), listened to only by processes that watch runs of others. */
export const PROGRESS_CHANNEL = 'drizzle_jobs_progress'
/** PostgreSQL refuses a notice whose payload is 8,000 bytes or more (in its default build). */
export const MAX_NOTICE_PAYLOAD_BYTES = 7_999

/** The queue's row, made on its first job where the CTE `added` added one, and the workers told of the add. */
const QUEUE_ROW_AND_NOTICE = `queue_row as (
    insert into jobs_queue (name) select @queue::text
    where exists (select 1 from added) and not exists (select 1 from jobs_queue where name = @queue::text)
    on conflict (name) do nothing
  ),
  notice as (
    select pg_notify('${NOTICE_CHANNEL}', 'added:' || @queue::text) as sent from added
  )`

type QueueParam = { queue: string }
type Window = { queue: string; now: number }
type Seqs = { seqs: string }

/**
 * A row of a flush statement's answer: an end that landed (its seq), a job claimed, a group the rate's cap per group
 * held back, that the queue has a policy for the engine to plan (flush), or the notice sent.
 */
export type FlushRow = { part: 'ended' | 'claimed' | 'held' | 'policy' | 'notice' } & ClaimedJob

export const SQL = {
  /**
   * Which of the tables the migrations make are missing, whether jobs_job has the column the latest migration adds
   * (`debounce_key`: a jobs_job without it is an older version's), and the database the
   * connection is on (for a client whose options do not say).
   */
  schemaCheck: pgStatement<Record<never, never>, { missing: string | null; latest: boolean; database: string; host: string; port: number }>(
    'schemaCheck',
    `select
      (select string_agg(t.name, ', ' order by t.ord) from unnest(array['jobs_queue', 'jobs_job', 'jobs_step', 'jobs_lease', 'jobs_schedule', 'jobs_count']) with ordinality as t(name, ord)
       where to_regclass(t.name) is null) as missing,
      exists (select 1 from pg_attribute where attrelid = to_regclass('jobs_job') and attname = 'debounce_key' and not attisdropped) as latest,
      current_database() as database, coalesce(host(inet_server_addr()), 'localhost') as host,
      coalesce(inet_server_port(), current_setting('port')::int) as port`,
  ),

  /**
   * Tells listeners of the channel, when the transaction commits, what changed of which queue: one
   * notification per transaction and payload, however many jobs it added (PostgreSQL folds identical
   * notifications of one transaction into one).
   */
  notify: pgStatement<{ payload: string }>('notify', `select pg_notify('${NOTICE_CHANNEL}', @payload::text)`),

  /**
   * Many notices in one statement, delivered when it commits: `@notices` is a JSON array of
   * `{ "channel", "payload" }`. Progress values and asks go this way, one statement per send however many
   * runs it carries.
   */
  notifyMany: pgStatement<{ notices: string }>(
    'notifyMany',
    `select pg_notify(n.channel, n.payload)
    from jsonb_to_recordset(@notices::jsonb) as n(channel text, payload text)`,
  ),

  /**
   * Creates a queue's row on its first job, so that its pause flag and limits have a row to live in; else does
   * nothing, and waits for nothing: where the row is there, no insert is tried, so no lock on the row (a claim's, a
   * fold's, the app's) holds it up, where `on conflict` alone would wait for a transaction that changed the row.
   */
  queueEnsureRow: pgStatement<QueueParam>(
    'queueEnsureRow',
    `insert into jobs_queue (name) select @queue::text
    where not exists (select 1 from jobs_queue where name = @queue::text)
    on conflict (name) do nothing`,
  ),

  /**
   * What `enqueue` writes, whole (Executor.jobAdd), in one statement: one round trip in the app's transaction. The
   * job, unless its id is taken or the queue holds `maxWaiting` jobs waiting or scheduled by its kept counts (the
   * row and what is not folded: counts.ts), whatever the number of jobs; the queue's row made on its first job; and
   * the workers told. Two adders whose transactions run at once do not see each other's jobs: each may take the
   * last free place, so the queue may hold, for a moment, one job more per adder running at once than its
   * maxWaiting. Answers 1 when it added the job. `told` is read only so that the notice runs: PostgreSQL skips a
   * select in a WITH that nothing reads.
   */
  addJob: pgStatement<NewJob, { added: number }>(
    'addJob',
    `with added as (
    ${INSERT_JOB}
    where (select ${kept('waiting')} + ${kept('scheduled')} from ${UNFOLDED} left join jobs_queue q on q.name = @queue::text)
      < @maxWaiting::bigint
    on conflict (queue, id) do nothing
    returning 1 as one
  ),
  queue_row as (
    insert into jobs_queue (name) select @queue::text
    where exists (select 1 from added) and not exists (select 1 from jobs_queue where name = @queue::text)
    on conflict (name) do nothing
  ),
  notice as (
    select pg_notify('${NOTICE_CHANNEL}', 'added:' || @queue::text) as sent from added
  )
  select (select count(*) from added)::int as added, (select count(*) from notice)::int as told`,
  ),
  /**
   * What `enqueue` writes for a job with a unique key (JOB-25), whole, in one statement: the job, unless its id is
   * taken, its key is held by a job in one of that job's unique_states (jobs_job_unique), or the queue has no room
   * (as addJob), in an insert with no conflict target, which a conflict on any unique index makes do nothing; where
   * it added nothing, the job holding its id, or else its key, as the statement's snapshot holds it (an add that
   * committed while this one waited for it is not there: Executor.jobGetHolder reads it next); the queue's row and
   * the notice, as addJob.
   */
  addUniqueJob: pgStatement<UniqueJob, { added: number; holder: string | null; matched: JobHolder['matched'] | null }>(
    'addUniqueJob',
    `with added as (
    ${insertJobWith('unique_key, unique_states', '@uniqueKey::text, @uniqueStates::text')}
    where ${HAS_ROOM}
    on conflict do nothing
    returning 1 as one
  ),
  holder as (${HOLDER}),
  ${QUEUE_ROW_AND_NOTICE}
  select (select count(*) from added)::int as added, (select id from holder) as holder, (select matched from holder) as matched,
    (select count(*) from notice)::int as told`,
  ),
  /**
   * What `enqueue` writes for a job with a debounce id (JOB-26), whole, in one statement: the job, or, where a job of
   * the queue holds that id (waiting or scheduled: jobs_job_debounce, which the conflict target names with its
   * condition), this one's value, run_at and state given to that job instead, locked, as the upsert does under
   * racing adds; the id of the job added or given them. A full queue adds nothing, but still merges. The queue's row
   * and the notice, as addJob: a merge moves the job's run_at, which the workers read again.
   */
  addDebouncedJob: pgStatement<DebouncedJob, { id: string | null; told: number }>(
    'addDebouncedJob',
    `with added as (
    ${insertJobWith('debounce_key', '@debounceKey::text')}
    where ${HAS_ROOM}
      or exists (select 1 from jobs_job where queue = @queue::text and debounce_key = @debounceKey::text and ${RUNNABLE})
    on conflict (queue, debounce_key) where debounce_key is not null and ${RUNNABLE}
    do update set value = excluded.value, run_at = excluded.run_at, state = excluded.state
    returning id
  ),
  ${QUEUE_ROW_AND_NOTICE}
  select (select id from added) as id, (select count(*) from notice)::int as told`,
  ),
  /** The job of @queue with @id, or else the one holding @uniqueKey in a state that holds it (Executor.jobGetHolder). */
  jobHolder: pgStatement<{ queue: string; id: string; uniqueKey: string | null }, JobHolder>('jobHolder', HOLDER),
  insertJob: pgStatement<NewJob, { added: 1 }>(
    'insertJob',
    `${INSERT_JOB}
    on conflict (queue, id) do nothing
    returning 1 as added`,
  ),
  /**
   * Adds the jobs of @jobs, a JSON array of [id, grp, value, state, priority, runAt], in its order, in one
   * statement: one round trip however many jobs. Answers the ids it added; a taken id adds nothing.
   */
  insertJobs: pgStatement<{ queue: string; maxAttempts: number; now: number; traceContext: string | null; jobs: string }, { id: string }>(
    'insertJobs',
    `insert into jobs_job (queue, id, grp, value, state, priority, attempts, max_attempts, run_at, created_at, trace_context)
    select @queue::text, j.job ->> 0, j.job ->> 1, (j.job ->> 2)::jsonb, j.job ->> 3, (j.job ->> 4)::bigint, 0, @maxAttempts::int,
      ${at(`(j.job ->> 5)`)}, ${at('@now')}, @traceContext::text
    from jsonb_array_elements(@jobs::jsonb) with ordinality as j(job, ord)
    order by j.ord
    on conflict (queue, id) do nothing
    returning id`,
  ),
  jobExists: pgStatement<{ queue: string; id: string }, { found: 1 }>(
    'jobExists',
    `select 1 as found from jobs_job where queue = @queue::text and id = @id::text`,
  ),
  /** The jobs a queue holds waiting or scheduled, by its kept counts, this transaction's own adds among them. */
  queueCountWaiting: pgStatement<QueueParam, { count: number }>(
    'queueCountWaiting',
    `select ${kept('waiting')} + ${kept('scheduled')} as count
    from ${UNFOLDED} left join jobs_queue q on q.name = @queue::text`,
  ),

  /**
   * What a worker reads before it claims: is there anything it may claim, under the stored limit? Read from
   * the jobs, each state only as far as the worker tests it, in a few index probes however many jobs the
   * queue holds: `running` is the count of the queue's running jobs (jobs_job_running); `waiting` is 1 when a
   * runnable job is due by the server's clock (its earliest run_at, terms.ts), else 0; `scheduled` is 1 when a job is scheduled, and
   * `nextScheduled` when the first of them is due (jobs_job_scheduled), which the worker compares with its own
   * clock. Answers a row for a queue with no jobs_queue row (jobs added with plain SQL) too.
   */
  queueGetClaimable: pgStatement<QueueParam, Claimable>(
    'queueGetClaimable',
    `select coalesce(q.paused, false)::int as paused, q.concurrency,
      (select count(*)::int from ${RUNNING}) as running,
      coalesce(${EARLIEST_RUNNABLE} <= now(), false)::int as waiting,
      (s.next is not null)::int as scheduled, ${ms('s.next')} as "nextScheduled"
    from (select min(run_at) as next from jobs_job where queue = @queue::text and state = 'scheduled') s
    left join jobs_queue q on q.name = @queue::text`,
  ),
  /**
   * A flush's first statement where its queue has a policy (a limit, a rate, or a due job that must run alone): the
   * worker's own ends in @ends (an ends array, endsAsJson), each behind the fence with its own next state, and the
   * steps of the jobs that ended; the queue's row, locked until the flush commits, so that the claims of a queue take
   * turns on it and its log of starts and its waiters are read and written by one claim at a time (JOB-07, JOB-22);
   * the server's clock once the lock is held (clock_timestamp(), not the transaction's now(), which a claim that waited
   * would read from before the one ahead of it committed); the runs under way, less the ones ended here, and the first
   * due job that must run alone, as this statement's snapshot sees them. A statement that waited for the lock may count
   * fewer runs than there are: the claim that follows counts them again (flushClaim's @total). `ended` is the JSON
   * array of the ends that landed; with @notify 1, a notice when any did.
   */
  claimPolicy: pgStatement<
    Window & { owner: string; ends: string; notify: 0 | 1 },
    Omit<ClaimLimits, 'rateStarts' | 'claimWaiters'> & {
      rateStarts: string | null
      claimWaiters: string | null
      ended: string
      noticed: number
    }
  >(
    'claimPolicy',
    `with ${OWN_ENDS},
  notice as (
    select pg_notify('${NOTICE_CHANNEL}', 'ended:' || @queue::text) as sent
    where @notify::int = 1 and exists (select 1 from ended)
  ),
  q as materialized (select * from jobs_queue where name = @queue::text for update)
  select coalesce(q.paused, false)::int as paused, q.concurrency, q.concurrency_per_group as "perGroup",
    (select count(*)::int from ${RUNNING}) - (select count(*)::int from ended) as running,
    q.rate_limit as "rateLimit", q.rate_per::float8 as "ratePer", q.rate_per_group as "ratePerGroup", q.rate_starts::text as "rateStarts",
    ${ms('clock_timestamp()')} as "rateNow", q.claim_waiters::text as "claimWaiters",
    a.seq::float8 as "aloneSeq", ${ms('a.run_at')} as "aloneRunAt",
    (select coalesce(jsonb_agg(seq), '[]'::jsonb) from ended)::text as ended,
    (select count(*) from notice)::int as noticed
  from (select 1) one
  left join q on true
  left join lateral ${FIRST_ALONE} a on true`,
  ),
  /** The limits a queue holds, and when a worker stored them (null: never). */
  queueLimits: pgStatement<QueueParam, StoredLimits>(
    'queueLimits',
    `select concurrency, concurrency_per_group as "perGroup", ${ms('limits_set_at')} as "setAt",
      rate_limit as "rateLimit", rate_per::float8 as "ratePer", rate_per_group as "ratePerGroup"
    from jobs_queue where name = @queue::text`,
  ),
  /** Stores a queue's limits, replacing any others: the worker started last wins. */
  storeQueueLimits: pgStatement<StoreLimitsParams>(
    'storeQueueLimits',
    `insert into jobs_queue (name, concurrency, concurrency_per_group, limits_set_at, rate_limit, rate_per, rate_per_group)
    values (@queue::text, @total::int, @perGroup::int, ${at('@now')}, @rateLimit::int, @ratePer::bigint, @ratePerGroup::int)
    on conflict (name) do update set concurrency = excluded.concurrency, concurrency_per_group = excluded.concurrency_per_group,
      limits_set_at = excluded.limits_set_at, rate_limit = excluded.rate_limit, rate_per = excluded.rate_per, rate_per_group = excluded.rate_per_group`,
  ),
  /** Writes back a rated queue's log of recent starts (engine/rate.ts), in the claim's transaction, under the row's lock. */
  storeRateStarts: pgStatement<{ queue: string; starts: string }>(
    'storeRateStarts',
    `update jobs_queue set rate_starts = @starts::jsonb where name = @queue::text`,
  ),
  /**
   * A flush's claim as the engine planned it (ClaimPlan), after claimPolicy, in one statement: the first @window runnable jobs in claim order (priority, run_at, seq — JOB-17), but for @passOver, groups already at
   * @perGroup and (with @skipAbandoned) the jobs that must run alone, or only the job @only, locked FOR UPDATE SKIP
   * LOCKED, so that claims at once never take the same job and never wait on each other; of those, the first @limit
   * (and no more than @total less the runs under way, counted here, after the queue's lock was granted) whose group's
   * runs under way and the rate's room for the group (@groupRoom, a JSON object; @otherRoom for a group not in it) let
   * them start after the jobs of their group before them, marked running for @owner, counting their attempt (JOB-04);
   * the worker's row renewed when @leaseUntil is set and it claimed; the queue's waiters for a share written when
   * @setWaiters is 1; and, with @notify 1, a notice when it claimed. Answers the jobs claimed in claim order, and a
   * `held` row for each group whose jobs only the rate's room passed over before the claim was full.
   */
  flushClaim: pgStatement<
    {
      queue: string
      owner: string
      now: number
      notify: 0 | 1
      limit: number
      total: number | null
      window: number
      passOver: string
      skipAbandoned: 0 | 1
      only: number | null
      perGroup: number | null
      groupRoom: string | null
      otherRoom: number | null
      setWaiters: 0 | 1
      waiters: string | null
      leaseUntil: number | null
      host: string | null
      pid: number | null
      channel: string | null
    },
    FlushRow
  >(
    'flushClaim',
    `with running_groups as materialized (
    select r.grp, count(*)::int as running
    from jobs_job r where r.queue = @queue::text and r.state = 'running' and r.grp is not null and @perGroup::int is not null
    group by r.grp
  ),
  win as materialized (
    select seq, grp, state, priority, run_at from jobs_job
    where ${DUE} and (@skipAbandoned::int = 0 or not abandoned) and (@only::bigint is null or seq = @only::bigint)
      and not (seq = any(array(select value::bigint from jsonb_array_elements_text(@passOver::jsonb))))
      and (grp is null or grp not in (select grp from running_groups where running >= @perGroup::int))
    order by ${CLAIM_ORDER} limit @window::bigint
    for update skip locked
  ),
  ranked as materialized (
    select w.seq, w.grp, w.state, row_number() over (order by w.priority, w.run_at, w.seq) as pos,
      row_number() over (partition by w.grp order by w.priority, w.run_at, w.seq) as rn,
      @perGroup::int - coalesce((select g.running from running_groups g where g.grp = w.grp), 0) as cap_room,
      coalesce((@groupRoom::jsonb ->> w.grp)::int, @otherRoom::int) as rate_room
    from win w
  ),
  picked as materialized (
    select seq, state, pos from ranked
    where grp is null or ((cap_room is null or rn <= cap_room) and (rate_room is null or rn <= rate_room))
    order by pos
    limit greatest(0, least(@limit::bigint, coalesce(@total::bigint - (select count(*) from ${RUNNING}), @limit::bigint)))
  ),
  claimed as (
    update jobs_job j set state = 'running', attempts = j.attempts + 1, owner = @owner::text
    from picked p where j.seq = p.seq
    returning j.seq, j.id, j.grp, j.value, p.state as claimed_from, j.attempts, j.max_attempts, j.abandoned, j.trace_context, j.run_at, p.pos
  ),
  renewed as (${RENEW_IF_CLAIMED}),
  waiters_set as (
    update jobs_queue set claim_waiters = @waiters::jsonb where name = @queue::text and @setWaiters::int = 1
  ),
  notice as (
    select pg_notify('${NOTICE_CHANNEL}', 'claimed:' || @queue::text) as sent
    where @notify::int = 1 and exists (select 1 from claimed)
  )
  (select 'claimed' as part, seq::float8 as seq, id, grp, value::text as value, claimed_from as "claimedFrom", attempts,
    max_attempts as "maxAttempts", abandoned::int as abandoned, trace_context as "traceContext", ${ms('run_at')} as "runAt"
   from claimed order by pos)
  union all
  select distinct 'held', null::float8, null::text, grp, null::text, null::text, null::int, null::int, null::int, null::text, null::float8
  from ranked
  where grp is not null and (cap_room is null or rn <= cap_room) and rate_room is not null and rn > rate_room
    and pos < coalesce((select max(pos) from picked having count(*) = @limit::bigint), 9223372036854775807)
  union all
  select 'notice', null, null, null, null, null, null, null, null, null, null from notice`,
  ),
  /**
   * Ends runs of the worker @owner, each with its own next state, behind the fence (terms.ts), with a rescue's expiry
   * (@expiredBy), and drops the steps of the jobs that ended, in one statement however the ends differ. `@ends` is
   * an ends array (endsAsJson). Answers the jobs it ended. Every end of a run with a worker goes through it
   * or through a flush.
   */
  jobEndMany: pgStatement<ExpiredBy & { owner: string; ends: string }, Pick<JobRow, 'seq'>>(
    'jobEndMany',
    `with ${fence(
      `select (e.row ->> 0)::bigint as seq, (e.row ->> 1)::int as attempt
      from jsonb_array_elements(@ends::jsonb) as e(row)`,
      { rescue: true },
    )},
    ended as (
      update jobs_job j set ${endEach('j', 'e.row')}
      from jsonb_array_elements(@ends::jsonb) as e(row)
      where j.seq = (e.row ->> 0)::bigint and j.seq in (select seq from fenced)
      returning j.seq, j.state
    ),
    dropped_steps as (
      delete from jobs_step where job in (select seq from ended where ${ENDED})
    )
    select seq::float8 as seq from ended`,
  ),
  deleteSteps: pgStatement<Seqs>('deleteSteps', `delete from jobs_step where ${inSeqs('job', '@seqs')}`),

  /**
   * A worker's flush of a queue without a policy, as one statement: its own ends, each behind the fence and each with
   * its own next state, then the steps of the jobs that ended, then its claim of up to @limit runnable jobs in claim
   * order (SKIP LOCKED) but for @passOver, a renewal of its row when @leaseUntil is set and it claimed, and one notice.
   * Where the queue has a policy for the engine to plan (its row holds a limit or a rate, or a due job's last run was
   * abandoned and must run alone) it claims nothing and answers a `policy` row; a paused queue claims nothing. `@ends`
   * is an ends array (endsAsJson). Data-modifying CTEs all see the statement's snapshot: the claim never takes a job
   * these ends just put back.
   */
  flush: pgStatement<
    {
      queue: string
      owner: string
      now: number
      ends: string
      limit: number
      passOver: string
      leaseUntil: number | null
      host: string | null
      pid: number | null
      channel: string | null
    },
    FlushRow
  >(
    'flush',
    `with ${OWN_ENDS},
  policy as materialized (
    select coalesce(bool_or(q.paused), false) as paused,
      coalesce(bool_or(q.concurrency is not null or q.concurrency_per_group is not null or q.rate_limit is not null), false)
        or exists (select 1 from jobs_job where abandoned and ${DUE}) as planned
    from (select 1) one left join jobs_queue q on q.name = @queue::text
  ),
  candidates as materialized (
    select seq, state from jobs_job
    where ${DUE} and not (seq = any(array(select value::bigint from jsonb_array_elements_text(@passOver::jsonb))))
      and not (select paused or planned from policy)
    order by ${CLAIM_ORDER} limit @limit::bigint
    for update skip locked
  ),
  claimed as (
    update jobs_job j set state = 'running', attempts = j.attempts + 1, owner = @owner::text
    from candidates c where j.seq = c.seq
    returning j.seq, j.id, j.grp, j.value, c.state as claimed_from, j.attempts, j.max_attempts, j.abandoned, j.trace_context, j.priority, j.run_at
  ),
  renewed as (${RENEW_IF_CLAIMED}),
  notice as (
    select pg_notify('${NOTICE_CHANNEL}', k.kind || ':' || @queue::text) as sent
    from (select case when exists (select 1 from ended) then 'ended' when exists (select 1 from claimed) then 'claimed' end as kind) k
    where k.kind is not null
  )
  select 'ended' as part, seq::float8 as seq, null::text as id, null::text as grp, null::text as value, null::text as "claimedFrom",
    null::int as attempts, null::int as "maxAttempts", null::int as abandoned, null::text as "traceContext", null::float8 as "runAt"
  from ended
  union all
  (select 'claimed', seq::float8, id, grp, value::text, claimed_from, attempts, max_attempts, abandoned::int, trace_context,
     ${ms('run_at')}
   from claimed order by priority, run_at, seq)
  union all
  select 'policy', null, null, null, null, null, null, null, null, null, null from policy where planned and not paused
  union all
  select 'notice', null, null, null, null, null, null, null, null, null, null from notice`,
  ),

  /**
   * Renews the worker's row until @expiresAt, writing it where it is gone, in one statement that waits for nothing: a
   * row another transaction has locked (a rescue checking it, a run's leaseRenewIfHeld renewing it) is passed over,
   * and renewed next time. Answers the runs the worker holds (committed), whether its row was renewed or not: a run
   * missing from them lost its lease. Its runs are found by owner through jobs_job_running, which holds running jobs
   * only.
   */
  workerRenew: pgStatement<WorkerLease, HeldRun>(
    'workerRenew',
    `with locked as materialized (
      select owner from jobs_lease where owner = @owner::text for no key update skip locked
    ), renewed as (
      update jobs_lease set expires_at = greatest(expires_at, ${at('@expiresAt')}), channel = @channel::text
      where owner = (select owner from locked)
      returning 1
    ), added as (
      insert into jobs_lease (owner, host, pid, expires_at, channel)
      select @owner::text, @host::text, @pid::int, ${at('@expiresAt')}, @channel::text
      where not exists (select 1 from jobs_lease where owner = @owner::text)
      on conflict (owner) do nothing
      returning 1
    )
    select seq::float8 as job, attempts as attempt from jobs_job where state = 'running' and owner = @owner::text`,
  ),
  /** Deletes a worker's row: a worker that stopped, holding no runs. */
  workerDelete: pgStatement<{ owner: string }>('workerDelete', `delete from jobs_lease where owner = @owner::text`),
  /** The first row of a worker expired by @now that holds no run: a worker that died idle, or whose runs were taken back. */
  workerExpired: pgStatement<{ now: number }, { found: 1 }>(
    'workerExpired',
    `select 1 as found from jobs_lease w where w.expires_at <= ${at('@now')} and ${HOLDS_NO_RUN} limit 1`,
  ),
  /**
   * Deletes the rows of workers expired by @now that hold no run, waiting for none: a row another transaction holds
   * (its worker renewing it, a rescue checking it) is passed over, and one renewed before it was locked no longer
   * counts as expired. A worker that comes back writes its row again. Answers how many it deleted.
   */
  workerDeleteExpired: pgStatement<{ now: number }, { count: number }>(
    'workerDeleteExpired',
    `with gone as (
      delete from jobs_lease where owner = any(array(
        select w.owner from jobs_lease w where w.expires_at <= ${at('@now')} and ${HOLDS_NO_RUN}
        order by w.owner for update skip locked))
      returning 1
    )
    select count(*)::int as count from gone`,
  ),
  /**
   * Runs of a queue, not the asking worker's own, whose worker's row expired by @now or is gone (`expiresAt` null),
   * or whose worker is one of the given dead ones (a JSON array).
   */
  abandonedLeases: pgStatement<{ queue: string; self: string; now: number; deadOwners: string; limit: number }, AbandonedLease>(
    'abandonedLeases',
    `select j.seq::float8 as seq, j.owner, j.attempts as attempt, ${ms('w.expires_at')} as "expiresAt", j.attempts,
      j.max_attempts as "maxAttempts"
    from jobs_job j left join jobs_lease w on w.owner = j.owner
    where j.queue = @queue::text and j.state = 'running' and j.owner <> @self::text
      and (w.owner is null or w.expires_at <= ${at('@now')}
           or j.owner in (select value from jsonb_array_elements_text(@deadOwners::jsonb)))
    limit @limit::bigint`,
  ),
  /** How many running jobs of a queue name no worker: the entries of jobs_job_running whose owner is null. */
  unleasedCount: pgStatement<QueueParam, { count: number }>(
    'unleasedCount',
    `select count(*)::int as count from ${RUNNING} and owner is null`,
  ),
  /** Running jobs of a queue that name no worker. */
  unleasedRuns: pgStatement<{ queue: string; limit: number }, UnleasedRun>(
    'unleasedRuns',
    `select seq::float8 as seq, attempts, max_attempts as "maxAttempts" from ${RUNNING} and owner is null
    limit @limit::bigint`,
  ),
  /**
   * Ends a run that names no worker, as endRun ends one that does: only while it still names none, which the update
   * re-checks on the row's newest version if it waited for it.
   */
  endUnleased: pgStatement<RunEndParams & { seq: number }, { ended: 1 }>(
    'endUnleased',
    `update jobs_job set ${END_SET}
    where seq = @seq::bigint and state = 'running' and owner is null
    returning 1 as ended`,
  ),
  /** The runs a worker holds: a run missing here lost its lease (a cancel, a rescue). */
  heldRuns: pgStatement<{ owner: string }, HeldRun>(
    'heldRuns',
    `select seq::float8 as job, attempts as attempt from jobs_job where state = 'running' and owner = @owner::text`,
  ),
  jobState: pgStatement<{ seq: number }, { state: JobState }>('jobState', `select state from jobs_job where seq = @seq::bigint`),
  /** The workers running jobs of a queue. */
  runningOwners: pgStatement<QueueParam, { owner: string }>('runningOwners', `select distinct owner from ${RUNNING} and owner is not null`),

  /**
   * Renews the row of one run's worker until @expiresAt, writing it (with @host and @pid) where it is gone, behind the
   * fence (terms.ts: the job row locked first, then the worker's), and answers a row only if the run still holds its
   * job: a run asks before it calls a step's function. Expired or not, a row nobody took the runs of is the worker's
   * again, and a rescue that read it expired no longer takes them (its fence re-checks the expiry on the row it locks).
   */
  leaseRenewIfHeld: pgStatement<LeaseParams & Pick<WorkerLease, 'host' | 'pid' | 'expiresAt'>, { held: 1 }>(
    'leaseRenewIfHeld',
    `with ${fence(ONE_RUN)}
    insert into jobs_lease (owner, host, pid, expires_at)
    select @owner::text, @host::text, @pid::int, ${at('@expiresAt')} from fenced
    on conflict (owner) do update set expires_at = greatest(jobs_lease.expires_at, excluded.expires_at)
    returning 1 as held`,
  ),
  readStep: pgStatement<{ seq: number; name: string }, Pick<StepRow, 'answer'>>(
    'readStep',
    `select answer::text as answer from jobs_step where job = @seq::bigint and name = @name::text`,
  ),
  /** Keeps a step's answer, behind the fence (JOB-06, JOB-16). */
  writeStep: pgStatement<LeaseParams & { name: string; answer: string | null }, { written: 1 }>(
    'writeStep',
    `with ${fence(ONE_RUN)}
    insert into jobs_step (job, name, answer)
    select seq, @name::text, @answer::jsonb from fenced
    on conflict (job, name) do nothing
    returning 1 as written`,
  ),

  /** A run's look for event @name of its job (Executor.eventGet). */
  eventLook: pgStatement<{ seq: number; name: string }, EventLook>(
    'eventLook',
    `select j.signals, e.state, e.payload::text as payload, ${ms('e.deadline')} as deadline
    from jobs_job j left join jobs_event e on e.job = j.seq and e.name = @name::text
    where j.seq = @seq::bigint`,
  ),
  /** Marks a run's wait for an event, behind the fence, where the event has no row. */
  eventWait: pgStatement<LeaseParams & { name: string; deadline: number | null; now: number }, { written: 1 }>(
    'eventWait',
    `with ${fence(ONE_RUN)}
    insert into jobs_event (job, name, state, deadline, at)
    select seq, @name::text, 'waiting', ${at('@deadline')}, ${at('@now')} from fenced
    on conflict (job, name) do nothing
    returning 1 as written`,
  ),
  /** Ends a run's wait for an event as timed out, behind the fence, where no signal took it. */
  eventTimeOut: pgStatement<LeaseParams & { name: string; now: number }, { written: 1 }>(
    'eventTimeOut',
    `with ${fence(ONE_RUN)}
    update jobs_event set state = 'timed_out', at = ${at('@now')}
    where job = (select seq from fenced) and name = @name::text and state = 'waiting'
    returning 1 as written`,
  ),
  /**
   * A signal (Executor.jobSignal): the job's row locked first, so that what it says of a parked run holds until the
   * signal commits, and an end of that run waits for it (then reads the signals it bumped: parkedSet); the event kept
   * where it has no row but a wait's; the job's signals bumped and, where its run is parked waiting for the event, its
   * run_at made now.
   */
  signal: pgStatement<SignalParams & { waitsFor: string }, { found: boolean; sent: boolean; woke: boolean }>(
    'signal',
    `with job as materialized (
      select seq, state, waits_for from jobs_job where queue = @queue::text and id = @id::text for no key update
    ),
    sent as (
      insert into jobs_event (job, name, state, payload, at)
      select seq, @name::text, 'sent', @payload::jsonb, ${at('@now')} from job where state not in ('done', 'failed', 'canceled')
      on conflict (job, name) do update set state = 'sent', payload = excluded.payload, deadline = null, at = excluded.at
        where jobs_event.state = 'waiting'
      returning job
    ),
    bumped as (
      update jobs_job j set signals = j.signals + 1,
        run_at = case when job.state = 'scheduled' and job.waits_for = @waitsFor::text then ${at('@now')} else j.run_at end,
        waits_for = case when job.state = 'scheduled' and job.waits_for = @waitsFor::text then null else j.waits_for end
      from job where j.seq = job.seq and exists (select 1 from sent)
      returning job.state = 'scheduled' and job.waits_for = @waitsFor::text as woke
    )
    select exists (select 1 from job) as found, exists (select 1 from sent) as sent, coalesce((select woke from bumped), false) as woke`,
  ),

  /** The first job of a queue that ended in @state before @before, in jobs_job_ended's order (so that the planner walks it). */
  firstPrunable: pgStatement<{ queue: string; state: EndedState; before: number }, { found: 1 }>(
    'firstPrunable',
    `select 1 as found from jobs_job
    where queue = @queue::text and ${ENDED} and state = @state::text and finished_at < ${at('@before')}
    order by jobs_job.finished_at limit 1`,
  ),
  /**
   * Deletes up to @limit jobs of a queue that ended in @state before @before, the longest ended first
   * (jobs_job_ended's order); their steps go with them.
   */
  pruneEnded: pgStatement<{ queue: string; state: EndedState; before: number; limit: number }, { count: number }>(
    'pruneEnded',
    `with pruned as (
      delete from jobs_job where seq = any(array(select seq from jobs_job
        where queue = @queue::text and ${ENDED} and state = @state::text and finished_at < ${at('@before')}
        order by jobs_job.finished_at limit @limit::bigint))
      returning 1
    )
    select count(*)::int as count from pruned`,
  ),
} as const
