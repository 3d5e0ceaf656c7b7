/** Text output of the command-line tool: aligned tables, ages, JSON with dates as ISO strings. @internal */
import { humanSpan } from '../duration.js'

/** Lays rows out in columns under a header, two spaces apart. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => (row[i] ?? '').length)))
  const line = (cells: readonly string[]) => cells.map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ').trimEnd()
  return [line(header), ...rows.map(line)].join('\n')
}

/** A span of milliseconds the way a person reads it: 850ms, 12s, 4m 05s, 3h 20m, 2d 4h. */
export const span = humanSpan

/** A time relative to now: "in 5s", "3m 02s ago"; for a stored value that is not a time, that value as stored. */
export function relative(date: Date | null, now: number, stored?: string): string {
  if (date === null) return stored === undefined ? '-' : `${stored} (not a time)`
  const ms = date.getTime() - now
  return ms > 0 ? `in ${span(ms)}` : `${span(-ms)} ago`
}

/** A time in full, and relative to now; for a stored value that is not a time, that value as stored. */
export function moment(date: Date | null, now: number, stored?: string): string {
  return date === null ? relative(date, now, stored) : `${date.toISOString()} (${relative(date, now)})`
}

/** A number as the row holds it: its stored value where that breaks the table protocol. */
export function number(value: number, stored?: string): string {
  return stored ?? String(value)
}

/** Cuts text to one line of at most `max` characters. */
export function oneLine(text: string | null, max: number): string {
  if (text === null) return ''
  const flat = text.replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 2)
}
