/**
 * Every statement the engine runs, named by what it does, prepared once per
 * connection. Writes that end a run or keep a step carry the fence (terms.ts:
 * the job running this attempt for this owner) in the same statement, so a
 * run that lost its lease changes nothing (JOB-16).
 */
import { protocolBreak } from './protocol.js'
import { STATES, type EndedState, type JobState } from '../../types.js'

export type { AbandonedLease, Claimable, ClaimedJob, NewJob, RunEndParams, UnleasedRun } from '../index.js'
import type {
  AbandonedLease,
  Claimable,
  ClaimedJob,
  ClaimLimits,
  DebouncedJob,
  EventLook,
  ExpiredBy,
  JobRow,
  LeaseParams,
  HeldRun,
  JobHolder,
  NewJob,
  NewJobs,
  RunEndParams,
  StepRow,
  StoredLimits,
  StoreLimitsParams,
  UniqueJob,
  UnleasedRun,
  WorkerLease,
} from '../index.js'
import type { Kind, Result } from '../executor.js'
import { ask, type Program } from '../program.js'
import { single, statement, type Prepared, type PreparedStatements, type RunResult } from './statement.js'
import { ENDED, fence, holdsKey, LIMIT, RUNNABLE } from './terms.js'

/** What a claim answers of each job: `attempts` is the attempt the claim starts. */
const CLAIMED = `seq, id, grp, value, state as claimedFrom, attempts + 1 as attempts, max_attempts as maxAttempts, abandoned,
  trace_context as traceContext, run_at as runAt`

/** Which jobs a statement for one job, or for several, writes. */
/**
 * The columns a run's end writes of a park (RunEndParams: waitsFor, signals), and its run_at: a run parked to wait for
 * an event whose job was signalled since the run looked (its signals moved) stays due at once, its run_at as it was,
 * waiting for nothing; any other end waits for @waitsFor (null: nothing) until @runAt. The debounce id is the first
 * run's to drop: a job holds it only until it starts.
 */
const PARKED_SET = `run_at = iif(@signals is not null and signals <> @signals, run_at, coalesce(@runAt, run_at)),
      waits_for = iif(@signals is not null and signals <> @signals, null, @waitsFor), debounce_key = null`

/**
 * The insert of one job from its NewJob parameters, counted by the engine (engine_writes 1), with `columns` more,
 * whose values `values` gives in their order: an INSERT … SELECT, which a WHERE must follow before any ON CONFLICT.
 */
function insertJobWith(columns = '', values = ''): string {
  return `insert into jobs_job (queue, id, grp, value, state, priority, attempts, max_attempts, run_at, created_at, trace_context,
      ${columns && `${columns}, `}engine_writes)
    select @queue, @id, @grp, @value, @state, @priority, 0, @maxAttempts, @runAt, @now, @traceContext, ${values && `${values}, `}1`
}

/** The queue @queue holds fewer than @maxWaiting jobs waiting or scheduled. */
const HAS_ROOM = `coalesce((select waiting + scheduled from jobs_queue where name = @queue), 0) < @maxWaiting`

const IN_SEQS = `in (select value from json_each(@seqs))`
const ONE = `seq = @seq`
const ALL = `seq ${IN_SEQS}`

function markRunning(jobs: string): string {
  return `update jobs_job set state = 'running', attempts = attempts + 1, owner = @owner, engine_writes = engine_writes + 1
    where ${jobs} and ${RUNNABLE}`
}

/** The worker of the row `jobs_lease` runs no job. */
const HOLDS_NO_RUN = `not exists (select 1 from jobs_job indexed by jobs_job_running where state = 'running' and owner = jobs_lease.owner)`

/** A value bound to one of insertJobRows' per-job parameters. */
type JobParam = string | number | null

/**
 * Adds `rows` jobs of one queue in one statement, their parameters bound in place: a multi-row VALUES
 * costs SQLite about 1 µs a job less than reading the jobs from one JSON text with json_each. Six
 * parameters a job keep 100 jobs under 999, the fewest any SQLite build allows.
 */
function insertJobRows(rows: number) {
  const values = Array.from({ length: rows }, () => `(@queue, ?, ?, ?, ?, ?, 0, @maxAttempts, ?, @now, @traceContext, 1)`).join(', ')
  return statement<[{ queue: string; maxAttempts: number; now: number; traceContext: string | null }, ...JobParam[]], number>(
    `insert into jobs_job (queue, id, grp, value, state, priority, attempts, max_attempts, run_at, created_at, trace_context, engine_writes)
    values ${values}
    on conflict (queue, id) do nothing
    returning seq`,
    { pluck: true },
  )
}

export const SQL = {
  tablesPresent: statement<[], string>(
    `select name from sqlite_master where type = 'table' and name in ('jobs_queue', 'jobs_job', 'jobs_step', 'jobs_lease', 'jobs_schedule')`,
    { pluck: true },
  ),
  triggersPresent: single<[], number>(`select count(*) from sqlite_master where type = 'trigger' and name in
    ('jobs_job_counts_insert_v4', 'jobs_job_counts_update_v4', 'jobs_job_counts_delete_v1', 'jobs_job_protocol_v2', 'jobs_queue_counts_kept_v1')`),
  /**
   * The column that the latest migration adds: without it the tables are an older version's (one whose jobs_lease
   * held a row per running job).
   */
  latestColumnPresent: single<[], number>(`select count(*) from pragma_table_info('jobs_job') where name = 'debounce_key'`),
  dataVersion: single<[], number>(`pragma data_version`),
  /** The main database's file: '' for one in memory. */
  mainFile: statement<[], string>(`select file from pragma_database_list where name = 'main'`, { pluck: true }),

  /** Adds one job unless its id is taken or the queue holds `maxWaiting` jobs waiting or scheduled. */
  insertJobIfRoom: statement<[NewJob], never>(`${insertJobWith()}
    where ${HAS_ROOM}
    on conflict (queue, id) do nothing`),
  insertJob: statement<
    [NewJob],
    never
  >(`insert into jobs_job (queue, id, grp, value, state, priority, attempts, max_attempts, run_at, created_at, trace_context, engine_writes)
    values (@queue, @id, @grp, @value, @state, @priority, 0, @maxAttempts, @runAt, @now, @traceContext, 1)
    on conflict (queue, id) do nothing`),
  /**
   * Adds one job with a unique key (JOB-25) unless its id is taken, its key is held (jobs_job_unique) or the queue
   * holds `maxWaiting` jobs waiting or scheduled: a conflict on either index does nothing.
   */
  insertUniqueJobIfRoom: statement<[UniqueJob], never>(`${insertJobWith('unique_key, unique_states', '@uniqueKey, @uniqueStates')}
    where ${HAS_ROOM}
    on conflict do nothing`),
  /**
   * Adds one job with a debounce id (JOB-26), or gives the job of the queue that holds that id, waiting or scheduled
   * (jobs_job_debounce), this one's value, run_at and state; answers the id of the job added or given them. A full
   * queue adds nothing, but still merges. The merge leaves engine_writes as it was: the counting triggers count the
   * state it may move the job to.
   */
  upsertDebouncedJob: statement<[DebouncedJob], string>(
    `${insertJobWith('debounce_key', '@debounceKey')}
    where ${HAS_ROOM}
      or exists (select 1 from jobs_job where queue = @queue and debounce_key = @debounceKey and ${RUNNABLE})
    on conflict (queue, debounce_key) where debounce_key is not null and ${RUNNABLE}
    do update set value = excluded.value, run_at = excluded.run_at, state = excluded.state
    returning id`,
    { pluck: true },
  ),
  /** The job of @queue with @id, or else the one that holds @uniqueKey in a state that holds it (jobs_job_unique). */
  jobHolder: statement<[{ queue: string; id: string; uniqueKey: string | null }], JobHolder>(`select id, matched from (
      select id, 'id' as matched, 0 as rank from jobs_job where queue = @queue and id = @id
      union all
      select id, 'unique', 1 from jobs_job where queue = @queue and unique_key = @uniqueKey and ${holdsKey('jobs_job')}
    ) order by rank limit 1`),
  /**
   * Adds jobs given as rows of bound parameters, `[id, grp, value, state, priority, runAt]` each, in their
   * order, in groups of 100, 10 and 1 (insertJobRows); answers the seqs of the jobs it added, a taken id
   * adding nothing.
   */
  insertJobs100: insertJobRows(100),
  insertJobs10: insertJobRows(10),
  insertJobs1: insertJobRows(1),
  /** The ids of the jobs of @seqs, a JSON array. */
  jobIdsBySeq: statement<[{ seqs: string }], string>(`select id from jobs_job where seq ${IN_SEQS}`, { pluck: true }),
  jobExists: statement<[queue: string, id: string], 1>(`select 1 from jobs_job where queue = ? and id = ?`, { pluck: true }),
  queueCountWaiting: statement<[queue: string], number>(`select waiting + scheduled from jobs_queue where name = ?`, { pluck: true }),
  /**
   * Adds the engine's own state changes of one transaction to a queue's counters (each argument a
   * change, negative for jobs that left a state), creating the queue's row on its first job.
   */
  shiftCounts: statement<
    [{ queue: string } & Record<JobState, number>],
    never
  >(`insert into jobs_queue (name, waiting, scheduled, running, done, failed, canceled)
    values (@queue, @waiting, @scheduled, @running, @done, @failed, @canceled)
    on conflict (name) do update set waiting = waiting + excluded.waiting, scheduled = scheduled + excluded.scheduled,
      running = running + excluded.running, done = done + excluded.done, failed = failed + excluded.failed,
      canceled = canceled + excluded.canceled`),

  /**
   * What a worker reads before it takes the write lock: is there anything it may claim, under the stored limit? Read
   * from the queue's counters (`waiting` and `scheduled` as whether there are any, 0 or 1, as every driver answers
   * them: Claimable) and the first scheduled job (jobs_job_scheduled). A queue with no row answers as unpaused,
   * unlimited and empty.
   */
  queueGetClaimable: statement<[{ queue: string }], Claimable>(`select coalesce(q.paused, 0) as paused,
      coalesce(q.running, 0) as running, coalesce(q.waiting > 0, 0) as waiting, coalesce(q.scheduled > 0, 0) as scheduled,
      q.concurrency, (select min(run_at) from jobs_job where queue = @queue and state = 'scheduled') as nextScheduled
    from (select 1) one left join jobs_queue q on q.name = @queue`),
  /**
   * The queue's policy as a flush reads it for the engine's plan, under the write lock: the pause flag, the runs under way, the limits in force (JOB-19),
   * and the first due job that must run alone (jobs_job_abandoned). The runs that the transaction ended (@ended) are
   * taken off the counter, which counts them as the transaction ends. A queue with no row reads as unlimited.
   */
  queueClaimLimits: statement<
    [{ queue: string; ended: number; now: number }],
    Omit<ClaimLimits, 'rateNow'>
  >(`select coalesce(q.paused, 0) as paused,
      coalesce(q.running, 0) - @ended as running, q.concurrency, q.concurrency_per_group as perGroup,
      q.rate_limit as rateLimit, q.rate_per as ratePer, q.rate_per_group as ratePerGroup, q.rate_starts as rateStarts,
      q.claim_waiters as claimWaiters, a.seq as aloneSeq, a.run_at as aloneRunAt
    from (select 1) one
    left join jobs_queue q on q.name = @queue
    left join (select seq, run_at from jobs_job indexed by jobs_job_abandoned
               where queue = @queue and abandoned = 1 and ${RUNNABLE} and run_at <= @now
               order by priority, run_at, seq limit 1) a`),
  /** The limits a queue holds, and when a worker stored them (null: never). */
  queueLimits: statement<[queue: string], StoredLimits>(`select concurrency, concurrency_per_group as perGroup, limits_set_at as setAt,
      rate_limit as rateLimit, rate_per as ratePer, rate_per_group as ratePerGroup
    from jobs_queue where name = ?`),
  /** Stores a queue's limits, replacing any others: the worker started last wins. */
  storeQueueLimits: statement<
    [StoreLimitsParams],
    never
  >(`insert into jobs_queue (name, concurrency, concurrency_per_group, limits_set_at, rate_limit, rate_per, rate_per_group)
    values (@queue, @total, @perGroup, @now, @rateLimit, @ratePer, @ratePerGroup)
    on conflict (name) do update set concurrency = excluded.concurrency, concurrency_per_group = excluded.concurrency_per_group,
      limits_set_at = excluded.limits_set_at, rate_limit = excluded.rate_limit, rate_per = excluded.rate_per, rate_per_group = excluded.rate_per_group`),
  /** Writes back a rated queue's log of recent starts (engine/rate.ts), in the claim's transaction. */
  storeRateStarts: statement<[{ queue: string; starts: string }], never>(`update jobs_queue set rate_starts = @starts where name = @queue`),
  /** Writes back the workers waiting for a share of a queue's concurrency (engine/fair-share.ts), in the claim's transaction. */
  storeClaimWaiters: statement<[{ queue: string; waiters: string | null }], never>(
    `update jobs_queue set claim_waiters = @waiters where name = @queue`,
  ),
  /**
   * Runnable jobs in claim order (priority, run_at, seq — JOB-17), with what a claim answers: a claim with no cap
   * per group (the flush's) is this select, then markRunning for the jobs read, inside the write transaction
   * that keeps what was read true: two set-wise statements cost less than one UPDATE … RETURNING.
   */
  claimCandidates: statement<
    [{ queue: string; now: number; limit: number }],
    ClaimedJob
  >(`select ${CLAIMED} from jobs_job where queue = @queue and ${RUNNABLE} and run_at <= @now
    order by priority, run_at, seq ${LIMIT}`),
  /** Like claimCandidates, leaving out the jobs that must run alone. */
  claimCandidatesNotAbandoned: statement<
    [{ queue: string; now: number; limit: number }],
    ClaimedJob
  >(`select ${CLAIMED} from jobs_job where queue = @queue and ${RUNNABLE} and run_at <= @now and abandoned = 0
    order by priority, run_at, seq ${LIMIT}`),
  /**
   * A claim's candidates under caps per group (the flush's), in claim order: the first @window runnable jobs but
   * for groups already at @perGroup (null: no cap) and, with @skipAbandoned, the jobs that must run alone. The claim
   * counts each group's jobs against its caps as it walks them, in its own process.
   */
  claimCandidatesByGroup: statement<
    [{ queue: string; now: number; window: number; skipAbandoned: 0 | 1; perGroup: number | null }],
    { seq: number; grp: string | null }
  >(`select seq, grp from jobs_job
    where queue = @queue and ${RUNNABLE} and run_at <= @now
      and (@skipAbandoned = 0 or abandoned = 0)
      and (@perGroup is null or grp is null or grp not in (
        select grp from jobs_job indexed by jobs_job_running where queue = @queue and state = 'running' and grp is not null
        group by grp having count(*) >= @perGroup))
    order by priority, run_at, seq limit @window + 0`),
  /** Runs under way per group of a queue, in one pass over its running jobs (jobs_job_running). */
  groupsRunning: statement<[queue: string], { grp: string; running: number }>(
    `select grp, count(*) as running from jobs_job indexed by jobs_job_running where queue = ? and state = 'running' and grp is not null group by grp`,
  ),
  /** What a claim answers of the jobs @seqs (a JSON array), in claim order, read before they are marked running. */
  claimedOf: statement<[{ seqs: string }], ClaimedJob>(`select ${CLAIMED} from jobs_job where seq ${IN_SEQS} and ${RUNNABLE}
    order by priority, run_at, seq`),
  /**
   * Claims jobs read by a claim's select in this transaction for the worker @owner, counting their attempt
   * (JOB-04): the job's owner and attempts are the run's lease, so a claim is one update. It comes in two
   * forms, as the step statements below: for one job (`@seq`) and for several (`@seqs`, a JSON array):
   * json_each costs about 3 µs a statement, while one statement for many jobs saves about 5 µs a job over
   * one statement each.
   */
  markRunning: statement<[{ seq: number; owner: string }], never>(markRunning(ONE)),
  markRunningAll: statement<[{ seqs: string; owner: string }], never>(markRunning(ALL)),

  /** Ends a run behind the fence, with a rescue's expiry (Executor.jobEndMany, which writes several with endRunsAlike). */
  endRun: statement<[RunEndParams & LeaseParams & ExpiredBy], number>(
    `update jobs_job set state = @state, ${PARKED_SET}, finished_at = @finishedAt,
      result = @result, error = @error, error_stack = @errorStack, attempts = attempts - @refund, abandoned = @abandoned,
      owner = null, engine_writes = engine_writes + 1
    where seq = @seq and ${fence('jobs_job', '@attempt', 'rescue')}
    returning seq`,
    { pluck: true },
  ),
  /**
   * endRun for several runs of @owner whose ends differ only in when they finished and what they returned: `@runs` is
   * a JSON array of [seq, attempt, finishedAt, result]. Answers the jobs it ended. SQLite reads JSON for each column
   * it sets from it, so ends that differ in more (another state, another error) are written a statement a kind of end
   * (Executor.jobEndMany): in-process, a statement more costs less than reading every column of every end from JSON.
   */
  endRunsAlike: statement<[Omit<RunEndParams, 'finishedAt' | 'result'> & ExpiredBy & { owner: string; runs: string }], number>(
    `update jobs_job set state = @state, ${PARKED_SET}, finished_at = r.value ->> 2,
      result = r.value ->> 3, error = @error, error_stack = @errorStack, attempts = attempts - @refund, abandoned = @abandoned,
      owner = null, engine_writes = engine_writes + 1
    from json_each(@runs) r
    where jobs_job.seq = r.value ->> 0 and ${fence('jobs_job', '(r.value ->> 1)', 'rescue')}
    returning jobs_job.seq`,
    { pluck: true },
  ),
  deleteSteps: statement<[{ seq: number }], never>(`delete from jobs_step where job = @seq`),
  deleteStepsOfAll: statement<[{ seqs: string }], never>(`delete from jobs_step where job ${IN_SEQS}`),

  /**
   * Renews a worker's row until @expiresAt, or writes it again, with its host and pid, if it is gone (deleted while
   * the worker was stalled: its jobs were taken back already, and the fence keeps its old runs from writing).
   */
  workerRenew: statement<[WorkerLease], never>(`insert into jobs_lease (owner, host, pid, expires_at, channel)
    values (@owner, @host, @pid, @expiresAt, @channel)
    on conflict (owner) do update set expires_at = max(expires_at, excluded.expires_at), channel = excluded.channel`),
  workerDelete: statement<[owner: string], never>(`delete from jobs_lease where owner = ?`),
  /** The first row of a worker expired by @now that holds no run: a worker that died idle, or whose runs were taken back. */
  workerExpired: statement<[{ now: number }], 1>(`select 1 from jobs_lease where expires_at <= @now and ${HOLDS_NO_RUN} limit 1`, {
    pluck: true,
  }),
  /** Deletes the rows of workers expired by @now that hold no run: a worker that comes back writes its row again. */
  workerDeleteExpired: statement<[{ now: number }], never>(`delete from jobs_lease where expires_at <= @now and ${HOLDS_NO_RUN}`),
  /** The runs a worker holds: a run missing here had its lease taken (a cancel, a rescue). */
  heldRuns: statement<[owner: string], HeldRun>(
    `select seq as job, attempts as attempt from jobs_job indexed by jobs_job_running where state = 'running' and owner = ?`,
  ),
  /**
   * Runs of a queue, not the asking worker's own, whose worker's row has expired or is gone, or whose worker is one of
   * the given dead ones (a JSON array), with until when the row held them (null: gone).
   */
  abandonedLeases: statement<
    [{ queue: string; self: string; now: number; deadOwners: string; limit: number }],
    AbandonedLease
  >(`select j.seq, j.owner, j.attempts as attempt, w.expires_at as expiresAt, j.attempts, j.max_attempts as maxAttempts
    from jobs_job j indexed by jobs_job_running left join jobs_lease w on w.owner = j.owner
    where j.queue = @queue and j.state = 'running' and j.owner is not null and j.owner <> @self
      and (w.owner is null or w.expires_at <= @now or j.owner in (select value from json_each(@deadOwners)))
    ${LIMIT}`),
  /** How many running jobs of a queue name no worker (written so by another program). */
  unleasedCount: single<[{ queue: string }], number>(
    `select count(*) from jobs_job indexed by jobs_job_running where queue = @queue and state = 'running' and owner is null`,
  ),
  /** Running jobs of a queue that name no worker. */
  unleasedRuns: statement<
    [{ queue: string; limit: number }],
    UnleasedRun
  >(`select seq, attempts, max_attempts as maxAttempts from jobs_job indexed by jobs_job_running
    where queue = @queue and state = 'running' and owner is null ${LIMIT}`),
  /** Ends a run that names no worker, as endRun ends one of a worker: only while it still names none. */
  endUnleased: statement<
    [RunEndParams & { seq: number }],
    never
  >(`update jobs_job set state = @state, ${PARKED_SET}, finished_at = @finishedAt,
      result = @result, error = @error, error_stack = @errorStack, attempts = attempts - @refund, abandoned = @abandoned,
      engine_writes = engine_writes + 1
    where seq = @seq and state = 'running' and owner is null`),
  jobState: statement<[seq: number], JobRow['state']>(`select state from jobs_job where seq = ?`, { pluck: true }),
  runningOwners: statement<[queue: string], string>(
    `select distinct owner from jobs_job indexed by jobs_job_running where queue = ? and state = 'running' and owner is not null`,
    { pluck: true },
  ),

  /**
   * Renews the row of a run's worker until @expiresAt, behind the fence, only if the run still holds its job: a run
   * asks before it calls a step's function. A row deleted meanwhile is written again, with its host and pid.
   */
  leaseRenewIfHeld: statement<
    [LeaseParams & Pick<WorkerLease, 'host' | 'pid' | 'expiresAt'>],
    never
  >(`insert into jobs_lease (owner, host, pid, expires_at)
    select @owner, @host, @pid, @expiresAt from jobs_job where seq = @seq and ${fence('jobs_job', '@attempt')}
    on conflict (owner) do update set expires_at = max(expires_at, excluded.expires_at)`),
  readStep: statement<[seq: number, name: string], StepRow['answer']>(`select answer from jobs_step where job = ? and name = ?`, {
    pluck: true,
  }),
  /** Keeps a step's answer, behind the fence (JOB-06, JOB-16). */
  writeStep: statement<
    [LeaseParams & { name: string; answer: string | null }],
    never
  >(`insert into jobs_step (job, name, answer) select @seq, @name, @answer from jobs_job where seq = @seq and ${fence('jobs_job', '@attempt')}
    on conflict (job, name) do nothing`),

  /** A run's look for event @name of its job (Executor.eventGet). */
  eventLook: statement<[{ seq: number; name: string }], EventLook>(
    `select j.signals, e.state, e.payload, e.deadline from jobs_job j left join jobs_event e on e.job = j.seq and e.name = @name
    where j.seq = @seq`,
  ),
  /** Marks a run's wait for an event, behind the fence, where the event has no row. */
  eventWait: statement<[LeaseParams & { name: string; deadline: number | null; now: number }], never>(
    `insert into jobs_event (job, name, state, deadline, at) select @seq, @name, 'waiting', @deadline, @now
    from jobs_job where seq = @seq and ${fence('jobs_job', '@attempt')}
    on conflict (job, name) do nothing`,
  ),
  /** Ends a run's wait for an event as timed out, behind the fence, where no signal took it. */
  eventTimeOut: statement<[LeaseParams & { name: string; now: number }], never>(
    `update jobs_event set state = 'timed_out', at = @now
    where job = @seq and name = @name and state = 'waiting'
      and exists (select 1 from jobs_job where seq = @seq and ${fence('jobs_job', '@attempt')})`,
  ),
  /** The job a signal is for. */
  signalTarget: statement<[{ queue: string; id: string }], { seq: number; state: JobState; waitsFor: string | null }>(
    `select seq, state, waits_for as waitsFor from jobs_job where queue = @queue and id = @id`,
  ),
  /** Keeps a signal's event where the job has no row of that name but a wait's. */
  signalSend: statement<[{ seq: number; name: string; payload: string; now: number }], never>(
    `insert into jobs_event (job, name, state, payload, at) values (@seq, @name, 'sent', @payload, @now)
    on conflict (job, name) do update set state = 'sent', payload = excluded.payload, deadline = null, at = excluded.at
      where jobs_event.state = 'waiting'`,
  ),
  /** Bumps a signalled job's signals, and makes it due at once where its run is parked waiting for the event (@wake). */
  signalJob: statement<[{ seq: number; now: number; wake: 0 | 1 }], never>(
    `update jobs_job set signals = signals + 1, run_at = iif(@wake, @now, run_at), waits_for = iif(@wake, null, waits_for)
    where seq = @seq`,
  ),

  firstPrunable: statement<[{ queue: string; state: EndedState; before: number }], 1>(
    `select 1 from jobs_job where queue = @queue and ${ENDED} and state = @state and finished_at < @before limit 1`,
  ),
  /**
   * Deletes the events of the jobs pruneEnded deletes next, read by the same query (in the same transaction, so the
   * same jobs): SQLite keeps foreign keys only where the connection turns them on, and a seq it gives again must find
   * no event.
   */
  pruneEvents: statement<[{ queue: string; state: EndedState; before: number; limit: number }], never>(
    `delete from jobs_event where job in (select seq from jobs_job
    where queue = @queue and ${ENDED} and state = @state and finished_at < @before ${LIMIT})`,
  ),
  /** Deletes up to @limit jobs of a queue that ended in @state before @before. */
  pruneEnded: statement<
    [{ queue: string; state: EndedState; before: number; limit: number }],
    never
  >(`delete from jobs_job where seq in (select seq from jobs_job
    where queue = @queue and ${ENDED} and state = @state and finished_at < @before ${LIMIT})`),
} as const

/**
 * Triggers of earlier versions whose programs name a table since dropped, or its columns (jobs_lease of one row per
 * running job, whose `job` column today's jobs_lease lacks): SQLite compiles a table's triggers into every statement
 * that writes it, so none of the engine's statements would prepare while one is there. A connection that may write
 * drops them before it prepares (the install then makes the new ones).
 */
export const OBSOLETE_TRIGGERS = ['jobs_job_protocol_v1'] as const
export const TRIGGER_PRESENT = statement<[name: string], 1>(`select 1 from sqlite_master where type = 'trigger' and name = ?`, {
  pluck: true,
})

/** How many triggers the engine installs; fewer present means some are to be created. */
export const TRIGGER_COUNT = 5

const KNOWN_STATES = `(${STATES.map((state) => `'${state}'`).join(', ')})`
const ENDED_STATES = `('done', 'failed', 'canceled')`
const NOW_MS = `cast((julianday('now') - 2440587.5) * 86400000 as integer)`

/** For the row `r`: why the job must fail at once (an unknown state, or a column that breaks the protocol), or null. */
const mustFail = (r: string) =>
  `(case when ${r}.state not in ${KNOWN_STATES} then 'the job was written in the unknown state ''' || ${r}.state || '''; known states: ${STATES.join(', ')}'
    else ${protocolBreak(r)} end)`

/**
 * The triggers that keep `jobs_queue`'s counters right whoever writes `jobs_job`, in any language, and
 * that fail at once a job written or set in a state the engine does not know, or that may run but whose
 * columns break the table protocol (a run_at that is text, say: protocol.ts), saying why in its error.
 * The engine's own adds, claims and ends bump `engine_writes` and count themselves (shiftCounts, once
 * per transaction): run per row, these triggers cost a claim and an end about 5 µs each, a third of a
 * batched job's whole cost. A write that leaves `engine_writes` as it was is counted here; deletes
 * always are. One trigger per event: each costs about a microsecond per row even when it does nothing.
 *
 * SQLite sets up a trigger's program for every statement that fires it, at a cost that grows with its
 * size, so the protocol's checks live in a trigger of their own that the engine never fires: the
 * counting triggers touch `id` (which the engine never updates) of a row another writer left unended, and
 * that fires jobs_job_protocol_v2. The update trigger then counts the state the job was left in, since
 * SQLite does not fire it again for the protocol trigger's update while it runs; the insert trigger's
 * touch does fire it. A job failed here keeps no lease and no step.
 *
 * A `jobs_queue` row that another program deletes while its queue has jobs is made again at once,
 * counted from them (jobs_queue_counts_kept_v1): the counters live in that row only, and would be lost.
 */
export const COUNTER_TRIGGERS = `
drop trigger if exists jobs_job_counts_insert_v1;
drop trigger if exists jobs_job_counts_update_v1;
drop trigger if exists jobs_job_queue_row_v1;
drop trigger if exists jobs_job_unknown_state_insert_v1;
drop trigger if exists jobs_job_unknown_state_update_v1;
drop trigger if exists jobs_job_counts_insert_v2;
drop trigger if exists jobs_job_counts_update_v2;
drop trigger if exists jobs_job_counts_insert_v3;
drop trigger if exists jobs_job_counts_update_v3;
drop trigger if exists jobs_job_protocol_v1;
create trigger if not exists jobs_job_protocol_v2 after update of id on jobs_job when new.state not in ${ENDED_STATES} begin
  update jobs_job set state = 'failed', finished_at = ${NOW_MS}, error = f.why, owner = null
  from (select ${mustFail('new')} as why) f where jobs_job.seq = new.seq and f.why is not null;
  delete from jobs_step where job = new.seq and (select state from jobs_job where seq = new.seq) = 'failed';
end;
create trigger if not exists jobs_job_counts_insert_v4 after insert on jobs_job when new.engine_writes = 0 begin
  insert into jobs_queue (name) select new.queue where not exists (select 1 from jobs_queue where name = new.queue);
  update jobs_queue set
    waiting = waiting + (new.state = 'waiting'), scheduled = scheduled + (new.state = 'scheduled'),
    running = running + (new.state = 'running'), done = done + (new.state = 'done'),
    failed = failed + (new.state = 'failed'), canceled = canceled + (new.state = 'canceled')
  where name = new.queue;
  update jobs_job set id = id where seq = new.seq and new.state not in ${ENDED_STATES};
end;
create trigger if not exists jobs_job_counts_update_v4
after update of state, run_at, created_at, priority, attempts, max_attempts, grp, queue on jobs_job
when new.engine_writes = old.engine_writes and (old.state is not new.state or new.state not in ${ENDED_STATES}) begin
  update jobs_job set id = id where seq = new.seq and new.state not in ${ENDED_STATES};
  update jobs_queue set
    waiting = waiting - (old.state = 'waiting') + (j.state = 'waiting'),
    scheduled = scheduled - (old.state = 'scheduled') + (j.state = 'scheduled'),
    running = running - (old.state = 'running') + (j.state = 'running'),
    done = done - (old.state = 'done') + (j.state = 'done'),
    failed = failed - (old.state = 'failed') + (j.state = 'failed'),
    canceled = canceled - (old.state = 'canceled') + (j.state = 'canceled')
  from (select state from jobs_job where seq = new.seq) j where name = new.queue;
end;
create trigger if not exists jobs_job_counts_delete_v1 after delete on jobs_job begin
  update jobs_queue set
    waiting = waiting - (old.state = 'waiting'), scheduled = scheduled - (old.state = 'scheduled'),
    running = running - (old.state = 'running'), done = done - (old.state = 'done'),
    failed = failed - (old.state = 'failed'), canceled = canceled - (old.state = 'canceled')
  where name = old.queue;
end;
create trigger if not exists jobs_queue_counts_kept_v1 after delete on jobs_queue begin
  insert into jobs_queue (name, waiting, scheduled, running, done, failed, canceled)
  select old.name, sum(state = 'waiting'), sum(state = 'scheduled'), sum(state = 'running'), sum(state = 'done'),
    sum(state = 'failed'), sum(state = 'canceled')
  from jobs_job where queue = old.name having count(*) > 0;
end;`

/**
 * Run when the triggers had to be (re)created: fails the jobs that were written before the triggers were
 * there and that they would have failed, then recounts every queue's counters from its jobs.
 */
export const RECOUNT_QUEUES = `
update jobs_job set state = 'failed', finished_at = ${NOW_MS}, error = ${mustFail('jobs_job')}, owner = null
where ${mustFail('jobs_job')} is not null;
delete from jobs_step where job in (select seq from jobs_job where state = 'failed');
insert into jobs_queue (name) select distinct queue from jobs_job where true on conflict (name) do nothing;
update jobs_queue set
  waiting = (select count(*) from jobs_job where queue = jobs_queue.name and state = 'waiting'),
  scheduled = (select count(*) from jobs_job where queue = jobs_queue.name and state = 'scheduled'),
  running = (select count(*) from jobs_job where queue = jobs_queue.name and state = 'running'),
  done = (select count(*) from jobs_job where queue = jobs_queue.name and state = 'done'),
  failed = (select count(*) from jobs_job where queue = jobs_queue.name and state = 'failed'),
  canceled = (select count(*) from jobs_job where queue = jobs_queue.name and state = 'canceled');`

/** The statements of one connection of a `K` client. */
export type Statements<K extends Kind = Kind> = PreparedStatements<K, typeof SQL>

/**
 * Runs a statement pair's form for one job (`@seq`) or for several (`@seqs`, as JSON) over `seqs`,
 * with the other parameters `params`. @internal
 */
export function runForJobs<K extends Kind, P extends object>(
  one: Prepared<K, [{ seq: number } & P], never>,
  all: Prepared<K, [{ seqs: string } & P], never>,
  seqs: readonly number[],
  params: P,
): Result<K, RunResult> {
  return seqs.length === 1 ? one.run({ ...params, seq: seqs[0]! }) : all.run({ ...params, seqs: JSON.stringify(seqs) })
}

/**
 * Adds the jobs of `batch` with the fewest statements of insertJobs100, insertJobs10 and insertJobs1: one
 * call into SQLite per 100 jobs, where a statement per job would cost one per job. Answers the ids it
 * added. A group whose every job was added answers the ids it was given; only one where some id was taken
 * reads the ids back, by seq, so the common case makes no string per job.
 * @internal
 */
export function* insertJobsInGroups(sql: Statements, { jobs, ...shared }: NewJobs): Program<string[]> {
  const added: string[] = []
  for (let from = 0; from < jobs.length; ) {
    const left = jobs.length - from
    const [size, insert] = left >= 100 ? [100, sql.insertJobs100] : left >= 10 ? [10, sql.insertJobs10] : [1, sql.insertJobs1]
    const params: JobParam[] = []
    for (let i = from; i < from + size; i++) params.push(...jobs[i]!)
    const seqs = yield* ask(insert.all(shared, ...params))
    if (seqs.length === size) for (let i = from; i < from + size; i++) added.push(jobs[i]![0])
    else if (seqs.length > 0) added.push(...(yield* ask(sql.jobIdsBySeq.all({ seqs: JSON.stringify(seqs) }))))
    from += size
  }
  return added
}
