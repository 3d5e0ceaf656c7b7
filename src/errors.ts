/**
 * The codes a {@link JobsError} can carry. The set is closed and stable:
 * code against these, not against messages.
 */
export type JobsErrorCode =
  | 'INVALID_OPTION'
  | 'INVALID_VALUE'
  | 'TOO_LARGE'
  | 'QUEUE_FULL'
  | 'NOT_FOUND'
  | 'LEASE_LOST'
  | 'TIMEOUT'
  | 'SCHEMA_MISSING'
  | 'UNIQUE_KEY_HELD'

/**
 * JobsError is the one error class drizzle-jobs throws on purpose. Its `code`
 * says what went wrong; its message says what to do about it; `cause` holds
 * the underlying error where there is one.
 */
export class JobsError extends Error {
  override readonly name = 'JobsError'
  readonly code: JobsErrorCode

  constructor(code: JobsErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.code = code
  }
}

/** Tells whether `error` is a JobsError, optionally with the given code. */
export function isJobsError(error: unknown, code?: JobsErrorCode): error is JobsError {
  return error instanceof JobsError && (code === undefined || error.code === code)
}
