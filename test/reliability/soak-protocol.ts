/** What the crash soak's worker processes and the soak itself share: the queue's limits and the side log's records. */

export const SOAK_QUEUE = {
  name: 'soak',
  concurrency: { total: 6, perGroup: 1 },
  backoff: { initial: '20ms', max: '200ms' },
} as const

/** The databases a soak runs on. */
export type SoakDialect = 'sqlite' | 'postgres'

/** The application_name of the worker processes' PostgreSQL connections: the soak ends some of them, never its own. */
export const SOAK_WORKER_APP = 'drizzle-jobs-soak-worker'

/** A soak job's value. */
export interface SoakJob {
  n: number
  poison?: boolean
}

/** One line of the side log, as the worker processes append them. */
export type SoakLogRecord =
  | { t: 'ready'; pid: number; at: number }
  | { t: 'run'; job: string; grp: string | null; attempt: number; pid: number; at: number }
  | { t: 'step'; job: string; name: string; attempt: number; pid: number; at: number }
  | { t: 'kept'; job: string; name: string; attempt: number; pid: number }
  | { t: 'insert'; job: string; changes: number; attempt: number; pid: number }
  | { t: 'end'; job: string; attempt: number; pid: number; at: number }
  /** The handler threw (a step's error, say): never in a soak where every promise holds. */
  | { t: 'threw'; job: string; attempt: number; pid: number; message: string; code: string | null }
  /** The process is about to kill itself (the poisoned job). */
  | { t: 'death'; pid: number; at: number }
  | { t: 'error'; pid: number; message: string; code: string | null }
