/**
 * SQL terms the engine's, the readers' and the admin statements share on
 * PostgreSQL: the state terms the partial indexes are written with, and the
 * conversions between the tables' types (timestamptz, jsonb, bigint,
 * boolean) and what the engine reads and writes (ms numbers, JSON text,
 * numbers, 0/1).
 */

/** Literal state terms, written exactly as the partial indexes' own conditions, so that the planner sees it may use them. */
export const RUNNABLE = `state in ('waiting', 'scheduled')`
export const ENDED = `state in ('done', 'failed', 'canceled')`

/**
 * The job of row `j` (its table's name or alias) holds its unique key in its state (JOB-25): the condition of
 * jobs_job_unique, written as the index writes it, with the key compared by `=`, so that the planner sees it may use it.
 */
export function holdsKey(j: string): string {
  return `strpos(${j}.unique_states, ',' || ${j}.state || ',') > 0`
}

/** A timestamptz column (or expression) as whole ms since the epoch, read as a JavaScript number; null stays null. */
export function ms(column: string): string {
  return `round(extract(epoch from ${column}) * 1000)::float8`
}

/** A parameter of ms since the epoch as a timestamptz; null stays null, ±Infinity are ±infinity. */
export function at(param: string): string {
  return `to_timestamp(${param}::float8 / 1000)`
}

/**
 * `column` is one of the seqs of a parameter that holds them as a JSON array's text. Written as `= any(array(…))`,
 * which the planner looks up in the primary key, one probe per seq: `in (select …)` is planned as a hash join
 * over the whole table.
 */
export function inSeqs(column: string, param: string): string {
  return `${column} = any(array(select value::bigint from jsonb_array_elements_text(${param}::jsonb)))`
}

/**
 * Claim order (priority, run_at, seq — JOB-17), the order of jobs_job_claim. Qualified: a statement that
 * answers `seq::float8 as seq` would otherwise sort by that output column, which no index serves.
 */
export const CLAIM_ORDER = `jobs_job.priority, jobs_job.run_at, jobs_job.seq`

/**
 * The fence of every write a run makes (JOB-16), written once: the runs of `runs` (a select of `seq` and `attempt`)
 * whose job is running that attempt for the worker @owner, as the CTEs `fence_runs`, `fence_jobs` and `fenced(seq)`.
 * With `rescue`, the fence of a rescue's end adds the worker's row: the runs are taken only if @owner's row in
 * jobs_lease is gone or expired by @expiredBy (ms), as the rescuer read it, so that a worker that renewed its row
 * since keeps its runs; a null @expiredBy (a worker whose process is gone, or the run's own end) takes them whatever
 * the row says, and locks no row of jobs_lease.
 *
 * Each job row is locked, in seq order, then the worker's row, as every transaction of the engine takes them (an end
 * writes job rows only; a claim, a rescue and a run's renewal take the job rows, then the worker's row), and the job
 * rows are all locked before the worker's: `fence_worker` counts `fence_jobs` whole before it reads its row. Under
 * READ COMMITTED a lock that had to wait re-checks the newest version of its row, and answers that version, so a
 * run whose job was taken over while this statement waited (rescued, claimed again, canceled) fails the fence, and
 * a rescue sees a renewal that committed while it waited on the worker's row; a subquery would read the statement's
 * snapshot, older than what it waited for, and let a rescue of attempt N end attempt N+1, or take the runs of a
 * worker that renewed its row. So the conditions sit in the locking CTEs, and the expiry is tested on the version
 * `fence_worker` locked, not in its WHERE: a row that fails it must still tell "expired" from "gone". A job taken
 * over is always written (state, owner, attempts), so the re-check sees it whatever the clocks say.
 *
 * The expiry rule: a run whose worker's row expired, but that nobody took, still holds its jobs: its own writes
 * never test the expiry, and its renewal (the worker's, or leaseRenewIfHeld) makes the row current again. A rescue
 * takes the runs only if the row it locks is still the expired one it read (or is gone): a renewal that committed
 * after the rescuer's read makes the rescue change nothing.
 */
export function fence(runs: string, options: { rescue?: boolean } = {}): string {
  const jobs = `fence_runs as materialized (${runs}),
  fence_jobs as materialized (
    select j.seq from jobs_job j join fence_runs r on j.seq = r.seq
    where ${runningFor('j', 'r.attempt')}
    order by j.seq for no key update of j
  )`
  if (!options.rescue)
    return `${jobs},
  fenced as materialized (select seq from fence_jobs)`
  return `${jobs},
  fence_worker as materialized (
    select w.expires_at from jobs_lease w
    where w.owner = @owner::text and @expiredBy::float8 is not null and (select count(*) from fence_jobs) > 0
    for update of w
  ),
  fenced as materialized (
    select seq from fence_jobs
    where @expiredBy::float8 is null or coalesce((select expires_at <= ${at('@expiredBy')} from fence_worker), true)
  )`
}

/**
 * The fence's test of one job row `j`: it is running attempt `attempt` for the worker @owner. Every column it tests is
 * the job row's own, so an UPDATE of `j` whose WHERE holds it needs no lock taken before: under READ COMMITTED an
 * update that waited for another transaction's write re-checks its WHERE on the newest version of the row. A worker's
 * own ends (a flush's) are written so; a rescue, whose fence also tests the worker's row, takes `fence`'s locks.
 */
export function runningFor(j: string, attempt: string): string {
  return `${j}.state = 'running' and ${j}.owner = @owner::text and ${j}.attempts = ${attempt}`
}

/** `fence`'s runs for one run: @seq at @attempt. */
export const ONE_RUN = `select @seq::bigint as seq, @attempt::int as attempt`

/**
 * The distinct queue names of jobs_job, one index probe each (a loose index scan of jobs_job_queue_id), for
 * the queues that a program writing plain SQL filled without a jobs_queue row: a recursive query's
 * `job_queues`, whose null row ends the walk.
 */
export const JOB_QUEUES = `job_queues(name) as (
    select min(queue) from jobs_job
    union all
    select (select min(queue) from jobs_job where queue > job_queues.name) from job_queues where job_queues.name is not null
  )`

/**
 * The earliest run_at among the runnable jobs of the queue `@queue`, or null: the first entry of the claim
 * index for each distinct priority, one index probe per priority, however many jobs the queue holds. A
 * scalar subquery.
 */
export const EARLIEST_RUNNABLE = `(with recursive priorities(priority) as (
      select (select min(priority) from jobs_job where queue = @queue::text and ${RUNNABLE})
      union all
      select (select priority from jobs_job where queue = @queue::text and ${RUNNABLE} and priority > priorities.priority
              order by priority limit 1)
      from priorities where priorities.priority is not null
    )
    select min((select run_at from jobs_job where queue = @queue::text and ${RUNNABLE} and priority = priorities.priority
                order by run_at limit 1))
    from priorities where priority is not null)`

/** The earliest time a timestamptz holds (4714-11-24 BC), in ms: a bound before it is -infinity. */
const MIN_TIME_MS = -210_866_803_200_000
/** The latest (294276 AD), in ms: a bound after it is infinity. */
const MAX_TIME_MS = 9_224_318_016_000_000

/**
 * A time that only bounds a comparison (a retention's cut-off, a listing's key), in ms: beyond the range of
 * timestamptz it is ±Infinity, which compares as the bound means, where the time itself would not convert.
 */
export function timeBound(ms: number): number {
  if (ms < MIN_TIME_MS) return -Infinity
  if (ms > MAX_TIME_MS) return Infinity
  return ms
}
