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
