/**
 * Ids and groups as the operator's calls look them up. A row that another
 * program wrote need not keep the limits an add keeps: its id may be empty or
 * longer than 1,024 bytes (JOB-18), and every row must stay reachable, to be
 * inspected, listed, canceled or retried. So a lookup takes any text a row can
 * hold, and refuses only what no row can: a value that is not a string, and
 * text holding U+0000 or a lone surrogate, which PostgreSQL cannot store.
 * @internal
 */
import { JobsError } from './errors.js'

/** `value` as text to look up, or INVALID_OPTION naming `what` when no row can hold it. */
export function lookupText(value: unknown, what: string): string {
  if (typeof value !== 'string')
    throw new JobsError('INVALID_OPTION', `${what} must be a string, got ${value === null ? 'null' : typeof value}`)
  if (!(value as string & { isWellFormed(): boolean }).isWellFormed()) {
    throw new JobsError('INVALID_OPTION', `${what} holds a lone surrogate (half of a UTF-16 pair), which no row holds`)
  }
  if (value.includes('\u0000')) throw new JobsError('INVALID_OPTION', `${what} holds the character U+0000, which no row holds`)
  return value
}
