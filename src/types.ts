/** The states a job can be in. `waiting` and `scheduled` are runnable once `run_at` has come. */
export type JobState = 'waiting' | 'scheduled' | 'running' | 'done' | 'failed' | 'canceled'

/** The states a job ends in. */
export type EndedState = 'done' | 'failed' | 'canceled'

/** @internal */
export const ENDED_STATES: readonly EndedState[] = ['done', 'failed', 'canceled']

/** What `enqueue` answers: the job's id, and whether this call added it (false: the queue held that id already). */
export interface Enqueued {
  id: string
  added: boolean
}

/** A job as `getJob` and `watch` show it. */
export interface JobSnapshot<Result = unknown> {
  id: string
  queue: string
  group: string | null
  state: JobState
  /** For a waiting job, how many jobs of its queue are claimed before it (up to 10,000); otherwise null. */
  ahead: number | null
  /** The running attempt's live progress, or null. Never stored on disk. */
  progress: unknown
  /** Attempts counted so far (1-based once it has run). */
  attempt: number
  /** Attempts the job gets before it fails for good. */
  attempts: number
  /** When it may run (a waiting job: since when). Null only when the stored run_at is not a time: see `malformed`. */
  runAt: Date | null
  /** When it was added. Null only when the stored created_at is not a time: see `malformed`. */
  createdAt: Date | null
  /** When it ended; null while it has not (and when the stored finished_at is not a time: see `malformed`). */
  finishedAt: Date | null
  error: string | null
  result: Result | null
  /**
   * The columns whose stored values break the table protocol, by column name, each with its value written as
   * an SQL literal (`'soon'`, `-1`, `X'00FF'`); null when the row keeps the protocol, as every row the engine
   * writes does. Only another program writing the tables by hand leaves such values. The field of such a
   * column holds null (a time), the stored number or NaN when it is no number (a count), or the literal (a text).
   */
  malformed: Readonly<Record<string, string>> | null
}
