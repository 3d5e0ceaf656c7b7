/** Text output of the command-line tool: aligned tables, ages, JSON with dates as ISO strings. */
import { humanSpan } from '../duration.js'
import { oneLine as cutToOneLine } from '../text.js'

/**
 * Characters a terminal acts on instead of showing: C0 controls (ESC starts
 * colours, titles and OSC 8 links), DEL, C1 controls (U+009B is a CSI of
 * its own), the line and paragraph separators, and the bidirectional marks
 * and overrides that make text read in another order than it is stored.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what it removes
const TERMINAL_CONTROLS = /[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

/**
 * Text stored by anyone (ids, queue names, groups, errors) as it can be
 * printed to a terminal: each character of {@link TERMINAL_CONTROLS}, line
 * breaks included, becomes an escape such as `\x1b` or `\u202e`, so the text
 * shows what it holds and cannot colour, retitle, link or reorder the
 * terminal, nor start a line of its own. Every human-readable output goes
 * through it.
 */
export function printable(text: string): string {
  return text.replace(TERMINAL_CONTROLS, (c) => {
    const code = c.charCodeAt(0)
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`
  })
}

/** {@link printable} for text of several lines, such as a stack: its line breaks are kept. */
export function printableLines(text: string): string {
  return text.split('\n').map(printable).join('\n')
}

/** Lays rows out in columns under a header, two spaces apart; each cell {@link printable}. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const cells = rows.map((row) => row.map(printable))
  const widths = header.map((title, i) => Math.max(title.length, ...cells.map((row) => (row[i] ?? '').length)))
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd()
  return [line(header), ...cells.map(line)].join('\n')
}

/** A span of milliseconds the way a person reads it: 850ms, 12s, 4m 05s, 3h 20m, 2d 4h. */
export const span = humanSpan

/** A time relative to now: "in 5s", "3m 02s ago"; for a stored value that is not a time, that value as stored. */
export function relative(date: Date | null, now: number, stored?: string): string {
  if (date === null) return stored === undefined ? '-' : `${printable(stored)} (not a time)`
  const ms = date.getTime() - now
  return ms > 0 ? `in ${span(ms)}` : `${span(-ms)} ago`
}

/** A time in full, and relative to now; for a stored value that is not a time, that value as stored. */
export function moment(date: Date | null, now: number, stored?: string): string {
  return date === null ? relative(date, now, stored) : `${date.toISOString()} (${relative(date, now)})`
}

/** A number as the row holds it: its stored value where that breaks the table protocol. */
export function number(value: number, stored?: string): string {
  return stored === undefined ? String(value) : printable(stored)
}

/** Cuts text to one line of at most `max` characters, {@link printable}. */
export function oneLine(text: string | null, max: number): string {
  return printable(cutToOneLine(text, max))
}

/**
 * JSON text, indented by `space`. Inside its strings, the characters of
 * {@link TERMINAL_CONTROLS} that JSON.stringify leaves raw (DEL, C1, the
 * separators, bidirectional marks) are written as `\u` escapes: the same
 * JSON value, safe to print.
 */
export function json(value: unknown, space = 2): string {
  const text = JSON.stringify(value, null, space) ?? 'undefined'
  return text.replace(TERMINAL_CONTROLS, (c) => (c === '\n' ? c : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`))
}
