/**
 * SQL terms the engine's, the readers' and the admin statements share.
 */

/** Literal state terms, written exactly as the partial indexes' own conditions, so that SQLite sees it may use them. */
export const RUNNABLE = `state in ('waiting', 'scheduled')`
export const ENDED = `state in ('done', 'failed', 'canceled')`

/**
 * The job of row `j` (its table's name or alias) holds its unique key in its state (JOB-25): the condition of
 * jobs_job_unique, written as the index writes it, with the key compared by `=`, so that SQLite sees it may use it.
 */
export function holdsKey(j: string): string {
  return `instr(${j}.unique_states, ',' || ${j}.state || ',') > 0`
}

/*
 * The statements over running jobs name jobs_job_running (`indexed by`): with no statistics, SQLite may otherwise
 * walk every job of a queue by jobs_job_queue_id, or the whole table for a worker's runs, where the partial index
 * holds only the runs under way (at most the slots of every worker).
 */

/**
 * A row limit bound per call. Not `limit @limit`: SQLite (3.53, as better-sqlite3 12 bundles it) reads
 * a bare bound LIMIT while planning, and so marks the statement to be compiled again every time that parameter is
 * bound, that is on every run — measured here at 6 µs for a one-table select and 60 µs for the claim
 * update with its triggers. `+ 0` makes the limit an expression the planner does not read; the plans
 * are the same (each walks an index in the order asked).
 */
export const LIMIT = `limit @limit + 0`

/**
 * The fence of every write a run makes (JOB-16), written once: the job `seq` is running attempt `attempt` for @owner
 * (and, for a rescue, meets `RESCUABLE`). A write transaction holds SQLite's one write lock from its start, so what
 * the fence reads is what the write changes: a run whose job was taken over (rescued, claimed again, canceled)
 * fails it, since each of those clears or replaces the job's owner or counts another attempt.
 */
export function fence(job: string, attempt: string, rescue?: 'rescue'): string {
  return `${job}.state = 'running' and ${job}.owner = @owner and ${job}.attempts = ${attempt}${rescue ? ` and ${RESCUABLE}` : ''}`
}

/**
 * The further condition of a rescue's fence, on the row of the worker @owner: the worker's row had expired by
 * @expiredBy (ms), as the rescuer read it, or is gone, so that a worker that renewed its row since keeps its jobs;
 * null (an owner whose process is gone) takes them whatever the expiry. A run whose worker's row expired but that
 * nobody took still holds its job: the expiry alone changes nothing.
 */
const RESCUABLE = `(@expiredBy is null or coalesce((select expires_at from jobs_lease where owner = @owner), -1e308) <= @expiredBy)`
