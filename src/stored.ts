/**
 * Reading a job's columns as they are stored. Other programs write the
 * tables with plain SQL, and a row may break the protocol: a time that is
 * text or out of the range of a Date, a count that is negative or no number
 * at all, a blob where text belongs. Readers show such a row as it is stored
 * and never throw: each such column is listed in `malformed`, with its value
 * written as SQLite writes a literal, and its field holds null (a time), the
 * stored number or NaN (a count, a priority), or that literal (a text). The
 * rules are those for which the triggers fail a job that may run
 * (dialect/sqlite/protocol.ts, dialect/pg/protocol.ts).
 * @internal
 */
import { MAX_TIME_MS, SHOWN_CHARS } from './limits.js'
import { STATES, type JobState, type JobWait } from './types.js'

/** A stored value as SQLite writes it as a literal (`'soon'`, `1.5`, `X'00FF'`, `NULL`), cut at 100 characters. */
export function sqlLiteral(value: unknown): string {
  let text: string
  if (value === null || value === undefined) text = 'NULL'
  else if (typeof value === 'string') text = `'${value.replaceAll("'", "''")}'`
  else if (Buffer.isBuffer(value)) text = `X'${value.toString('hex', 0, SHOWN_CHARS).toUpperCase()}'`
  else text = String(value)
  return text.length > SHOWN_CHARS ? `${text.slice(0, SHOWN_CHARS - 1)}…` : text
}

/** Reads the columns of one row, collecting those whose stored values break the protocol. */
/** The columns of a job's row that {@link StoredColumns.runFields} reads, as the read statements name them. */
export interface RunColumns {
  attempts: unknown
  maxAttempts: unknown
  runAt: unknown
  createdAt: unknown
  finishedAt: unknown
  error: unknown
}

export class StoredColumns {
  /** The columns that break the protocol, by name, each with its stored value as an SQL literal; null while none does. */
  malformed: Record<string, string> | null = null

  /** A time: whole ms since the epoch within the range of a Date, or null where null is stored. */
  time(value: unknown, column: string): Date | null {
    if (typeof value === 'number' && Number.isInteger(value) && Math.abs(value) <= MAX_TIME_MS) return new Date(value)
    if (value !== null) this.note(column, value)
    return null
  }

  /** A count: a whole number from `min`, that JavaScript holds exactly. */
  count(value: unknown, column: string, min: number): number {
    if (typeof value === 'number' && Number.isInteger(value) && value >= min && value <= Number.MAX_SAFE_INTEGER) return value
    this.note(column, value)
    return typeof value === 'number' ? value : Number.NaN
  }

  /** A whole number, however large (a priority). */
  wholeNumber(value: unknown, column: string): number {
    if (Number.isInteger(value)) return value as number
    this.note(column, value)
    return typeof value === 'number' ? value : Number.NaN
  }

  text(value: unknown, column: string): string {
    if (typeof value === 'string') return value
    this.note(column, value)
    return sqlLiteral(value)
  }

  optionalText(value: unknown, column: string): string | null {
    return value === null ? null : this.text(value, column)
  }

  /** A state, as stored: one the engine does not know is kept as it is, and listed. */
  state(value: unknown): JobState {
    if (typeof value === 'string' && (STATES as readonly string[]).includes(value)) return value as JobState
    this.note('state', value)
    return (typeof value === 'string' ? value : sqlLiteral(value)) as JobState
  }

  /** JSON text, parsed; text that is not JSON (written by another program) is given as it is. */
  json(value: unknown, column: string): unknown {
    if (value === null) return null
    if (typeof value !== 'string') return this.text(value, column)
    try {
      return JSON.parse(value)
    } catch {
      return value
    }
  }

  /**
   * What a parked run waits for: `jobs_job.waits_for` as the readers read it, only while the job is scheduled (null
   * otherwise), until the job's run_at (a wait for an event until the end of time has no timeout). A value that is
   * neither `sleep:<step>` nor `event:<name>` is listed, and the job shows no wait; nor does it while its run_at is
   * not a time (listed as such).
   */
  wait(value: unknown, runAt: Date | null): JobWait | null {
    if (value === null) return null
    if (typeof value === 'string' && value.startsWith('sleep:')) {
      return runAt === null ? null : { kind: 'sleep', step: value.slice('sleep:'.length), until: new Date(runAt.getTime()) }
    }
    if (typeof value === 'string' && value.startsWith('event:')) {
      if (runAt === null) return null
      const until = runAt.getTime() >= MAX_TIME_MS ? null : new Date(runAt.getTime())
      return { kind: 'event', name: value.slice('event:'.length), until }
    }
    this.note('waits_for', value)
    return null
  }

  /** The attempt counts, times and error of a job's row, as snapshots and records show them. */
  runFields(row: RunColumns): {
    attempt: number
    attempts: number
    runAt: Date | null
    createdAt: Date | null
    finishedAt: Date | null
    error: string | null
  } {
    return {
      attempt: this.count(row.attempts, 'attempts', 0),
      attempts: this.count(row.maxAttempts, 'max_attempts', 1),
      runAt: this.time(row.runAt, 'run_at'),
      createdAt: this.time(row.createdAt, 'created_at'),
      finishedAt: this.time(row.finishedAt, 'finished_at'),
      error: this.optionalText(row.error, 'error'),
    }
  }

  private note(column: string, value: unknown): void {
    ;(this.malformed ??= {})[column] = sqlLiteral(value)
  }
}

/**
 * A claimed job's value, parsed for its handler; for a value that is not JSON text (another program wrote
 * it), the error its job fails with, naming the column and the value.
 */
export function parseStoredValue(stored: unknown): { ok: true; value: unknown } | { ok: false; error: string } {
  let why = 'not JSON text'
  if (typeof stored === 'string') {
    try {
      return { ok: true, value: JSON.parse(stored) }
    } catch (error) {
      why = `not JSON (${(error as Error).message})`
    }
  }
  return { ok: false, error: `value holds ${sqlLiteral(stored)}, ${why}: it was written by something other than enqueue` }
}
