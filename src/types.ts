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
  runAt: Date
  createdAt: Date
  finishedAt: Date | null
  error: string | null
  result: Result | null
}
