/**
 * The command-line tool's exit codes, which scripts may rely on, and the
 * error that carries one.
 */

export const EXIT = {
  /** It did what was asked. */
  OK: 0,
  /** Something unexpected: a bug, a disk error. The message and stack are on stderr. */
  FAILURE: 1,
  /** The command line is wrong: an unknown command or option, a missing argument, a bad value. */
  USAGE: 2,
  /** The database cannot be used: no such file, not SQLite, or the jobs_* tables are not migrated (on SQLite or PostgreSQL). */
  DATABASE: 3,
  /** No job with that id (in that queue). */
  NOT_FOUND: 4,
  /**
   * The job's state does not allow the action (retry of a job that has not failed, cancel of an ended one), or another
   * job holds the unique key a retried job would hold again: nothing changed.
   */
  REFUSED: 5,
  /** The database URL cannot be read, or is not a PostgreSQL URL (postgres:// or postgresql://). */
  BAD_URL: 6,
  /** The PostgreSQL server refused the connection: nothing listens there, no such database, or the login failed. */
  UNREACHABLE: 7,
  /** The database's driver is not installed in the app: better-sqlite3 for a SQLite file, pg for a PostgreSQL URL. */
  DRIVER: 8,
} as const

export type ExitCode = (typeof EXIT)[keyof typeof EXIT]

/** What a command throws to end with a message and a given exit code. */
export class CliError extends Error {
  constructor(
    readonly exitCode: ExitCode,
    message: string,
    /** A stable word for `--json` output: usage, database, not_found, refused, bad_url, unreachable, driver, failure. */
    readonly kind: string,
  ) {
    super(message)
  }
}

export const usageError = (message: string) => new CliError(EXIT.USAGE, message, 'usage')
