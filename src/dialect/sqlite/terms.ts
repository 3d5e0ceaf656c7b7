/**
 * SQL terms the engine's, the readers' and the admin statements share.
 */

/** Literal state terms, written exactly as the partial indexes' own conditions, so that SQLite sees it may use them. */
export const RUNNABLE = `state in ('waiting', 'scheduled')`
export const ENDED = `state in ('done', 'failed', 'canceled')`

/**
 * A row limit bound per call. Not `limit @limit`: SQLite (3.53, as better-sqlite3 12 bundles it) reads
 * a bare bound LIMIT while planning, and so marks the statement to be compiled again every time that parameter is
 * bound, that is on every run — measured here at 6 µs for a one-table select and 60 µs for the claim
 * update with its triggers. `+ 0` makes the limit an expression the planner does not read; the plans
 * are the same (each walks an index in the order asked).
 */
export const LIMIT = `limit @limit + 0`

/**
 * The fence of every write a run makes (JOB-16), written once: the job `seq` is running attempt `attempt`, and its
 * lease row names @owner and that attempt (and meets `lease`, a further condition on the lease row `fl`, if any).
 * A write transaction holds SQLite's one write lock from its start, so what the fence reads is what the write
 * changes: a run whose job was taken over (rescued, claimed again, canceled) fails it.
 */
export function fence(seq: string, attempt: string, lease?: string): string {
  return `exists (select 1 from jobs_job fj join jobs_lease fl on fl.job = fj.seq
    where fj.seq = ${seq} and fj.state = 'running' and fj.attempts = ${attempt}
      and fl.owner = @owner and fl.attempt = ${attempt}${lease ? ` and ${lease}` : ''})`
}

/**
 * The further condition of a rescue's fence: the lease has expired by @expiredBy (ms), as the rescuer read it, so a
 * lease renewed since is not taken; null (an owner whose process is gone) takes it whatever its expiry.
 */
export const RESCUABLE = `(@expiredBy is null or fl.expires_at <= @expiredBy)`
