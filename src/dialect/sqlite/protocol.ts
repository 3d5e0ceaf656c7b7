/**
 * The table protocol's rules for the columns of a job that may run, as SQL.
 * Other programs write `jobs_job` with plain SQL; a row whose run_at is
 * text, whose counts are negative, whose priority is not a whole number
 * would never be claimed, or be claimed and misread. The triggers fail such
 * a job at once, keeping as its error the column and the value it holds.
 * Readers apply the same rules when they show a row (stored.ts).
 * @internal
 */
import { MAX_TIME_MS, SHOWN_CHARS } from '../../limits.js'

/** The largest whole number JavaScript holds exactly: counts beyond it would be read as other numbers. */
const MAX_COUNT = Number.MAX_SAFE_INTEGER
const MAX_DOUBLE = '1.7976931348623157e308'

/** A column's value as an error shows it: SQLite's own literal for it (`'soon'`, `1.5`, `X'00FF'`), cut short. */
function shown(column: string): string {
  return `(case when length(quote(${column})) > ${SHOWN_CHARS} then substr(quote(${column}), 1, ${SHOWN_CHARS - 1}) || '…' else quote(${column}) end)`
}

function breaks(column: string, expected: string): string {
  return `'${column.slice(column.indexOf('.') + 1)} holds ' || ${shown(column)} || ', not ${expected}: the row breaks the table protocol'`
}

export function protocolBreak(r: string): string {
  const time = (column: string) => `not (typeof(${r}.${column}) = 'integer' and ${r}.${column} between -${MAX_TIME_MS} and ${MAX_TIME_MS})`
  const count = (column: string, min: number) =>
    `not (typeof(${r}.${column}) = 'integer' and ${r}.${column} between ${min} and ${MAX_COUNT})`
  const priority = `${r}.priority`
  return `(case
    when ${r}.state not in ('waiting', 'scheduled', 'running') then null
    when ${time('run_at')} then ${breaks(`${r}.run_at`, 'a time (whole ms since the epoch, within the range of a Date)')}
    when ${time('created_at')} then ${breaks(`${r}.created_at`, 'a time (whole ms since the epoch, within the range of a Date)')}
    when not (typeof(${priority}) = 'integer' or (typeof(${priority}) = 'real' and ${priority} = round(${priority}) and abs(${priority}) <= ${MAX_DOUBLE}))
      then ${breaks(priority, 'a whole number')}
    when ${count('attempts', 0)} then ${breaks(`${r}.attempts`, 'a count of runs (a whole number from 0)')}
    when ${count('max_attempts', 1)} then ${breaks(`${r}.max_attempts`, 'a number of runs (a whole number from 1)')}
    when not (${r}.grp is null or typeof(${r}.grp) = 'text') then ${breaks(`${r}.grp`, 'text or null')}
    when typeof(${r}.queue) <> 'text' then ${breaks(`${r}.queue`, 'text')}
    when typeof(${r}.id) <> 'text' then ${breaks(`${r}.id`, 'text')}
  end)`
}
