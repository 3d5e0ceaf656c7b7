/**
 * The part of docs/benchmarks.md that `npm run bench -- --docs` rewrites:
 * the last run's machine, table, notes, method and configurations, between
 * two markers. Everything outside the markers is left as it was.
 */

export const LAST_RUN_BEGIN = '<!-- bench: last run, written by `npm run bench -- --docs` -->'
export const LAST_RUN_END = '<!-- bench: end of the last run -->'

export interface LastRun {
  /** The machine, as Markdown list lines. */
  description: string
  /** The table of medians (no target column), its legend and its notes. */
  body: string
  method: string
  configurations: string
}

/** The Markdown that goes between the markers, the markers excluded. */
export function lastRunSection(run: LastRun): string {
  return [
    'On a shared machine whose other work adds noise:',
    '',
    run.description,
    '',
    run.body,
    '',
    '### How each figure is measured',
    '',
    run.method,
    '',
    '### Configurations',
    '',
    run.configurations,
  ].join('\n')
}

/**
 * Answers `page` with what lies between the markers replaced by `section`.
 * Throws when the markers are missing, repeated or out of order, rather than
 * guess where the section goes.
 */
export function spliceLastRun(page: string, section: string): string {
  const begin = page.indexOf(LAST_RUN_BEGIN)
  const end = page.indexOf(LAST_RUN_END)
  const once = (marker: string, at: number): boolean => at !== -1 && page.indexOf(marker, at + marker.length) === -1
  if (!once(LAST_RUN_BEGIN, begin) || !once(LAST_RUN_END, end) || end < begin) {
    throw new Error(`docs/benchmarks.md: expected the markers ${LAST_RUN_BEGIN} and ${LAST_RUN_END}, once each and in that order`)
  }
  return `${page.slice(0, begin + LAST_RUN_BEGIN.length)}\n\n${section.trim()}\n\n${page.slice(end)}`
}
