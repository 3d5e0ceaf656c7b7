/**
 * The table protocol's rules on PostgreSQL, for jobs that other programs write with plain SQL. The columns'
 * types already refuse most careless values (a run_at that is text, a priority that is no whole number); what
 * they let through would hang a job or stop its queue: a run_at of 'infinity' is never due, an attempts of
 * 2147483647 cannot be counted once more (the claim of every job of its queue would fail with "integer out
 * of range"), and a negative attempts, a max_attempts below 1 or attempts above max_attempts make runs the
 * job was never given. A trigger fails such a job at once as it is written, keeping as its error the column
 * and the value it holds, as SQLite's triggers do (../sqlite/protocol.ts).
 *
 * It fires only for a row written waiting or scheduled that breaks a rule, tested in its WHEN clause: the
 * engine's own writes of those states never break one, so they cost that test and no call.
 * @internal
 */
import { MAX_STORED_INT, MAX_TIME_MS } from '../../limits.js'

/**
 * The trigger's name (and its function's), with its version: a later version installs its own, and drops the ones
 * before it. v2 clears the failed job's worker, where v1 deleted the job's row of jobs_lease as it was then (one row
 * per running job, by its `job` column).
 */
export const PROTOCOL_TRIGGER = 'jobs_job_protocol_v2'

/** The versions before PROTOCOL_TRIGGER, dropped by its install. */
const PROTOCOL_TRIGGERS_BEFORE = ['jobs_job_protocol_v1'] as const

/** The latest time a Date holds, as a timestamptz: a time past it is read as no time. */
const LATEST = `to_timestamp(${MAX_TIME_MS / 1000})`

/** A time column of the row `r` that is not a time a Date holds (PostgreSQL stores none before a Date's earliest). */
const notATime = (r: string, column: string) => `(not isfinite(${r}.${column}) or ${r}.${column} > ${LATEST})`

/** The rules, each a condition on the row `r` that breaks it and the error that says so. */
const RULES = (r: string): Array<[string, string]> => [
  [notATime(r, 'run_at'), breaks(`quote_literal(${r}.run_at::text)`, 'run_at', 'a time within the range of a Date')],
  [notATime(r, 'created_at'), breaks(`quote_literal(${r}.created_at::text)`, 'created_at', 'a time within the range of a Date')],
  [`${r}.attempts < 0`, breaks(`${r}.attempts`, 'attempts', 'a count of runs (a whole number from 0)')],
  [`${r}.max_attempts < 1`, breaks(`${r}.max_attempts`, 'max_attempts', 'a number of runs (a whole number from 1)')],
  [
    `${r}.attempts > ${r}.max_attempts`,
    breaks(`${r}.attempts`, 'attempts', `a count of runs within max_attempts (' || ${r}.max_attempts || ')`),
  ],
  [
    `${r}.attempts >= ${MAX_STORED_INT}`,
    breaks(`${r}.attempts`, 'attempts', `a count of runs that one more run fits (below ${MAX_STORED_INT})`),
  ],
]

/** The error of a rule: the column, its value as `shown` writes it (a time quoted, a number bare), and what it should hold. */
function breaks(shown: string, column: string, expected: string): string {
  return `'${column} holds ' || ${shown} || ', not ${expected}: the row breaks the table protocol'`
}

/** The condition under which a row written waiting or scheduled breaks the protocol. */
const BROKEN = (r: string) =>
  `${r}.state in ('waiting', 'scheduled') and (${RULES(r)
    .map(([when]) => when)
    .join(' or ')})`

/**
 * Drops an earlier version's trigger and function where they exist, in PL/pgSQL: `drop … if exists` would send a
 * notice ("does not exist, skipping") on every database that never had them, which postgres.js prints unless the
 * app passes its own `onnotice`. Dropping a trigger takes jobs_job's exclusive lock, which any reader holds up: the
 * install asks for it with NOWAIT, as it waits for nothing once it holds jobs_job's lock (counts.ts).
 */
const dropBefore = (name: string) => `if exists (select from pg_trigger where tgrelid = to_regclass('jobs_job') and tgname = '${name}') then
    lock table jobs_job in access exclusive mode nowait;
    drop trigger ${name} on jobs_job;
  end if;
  if to_regprocedure('${name}()') is not null then
    drop function ${name}();
  end if;`

/**
 * The trigger's function and the trigger, for the counters' install (counts.ts: the body of its PL/pgSQL block),
 * which also fails the jobs written before it, and drops the triggers of earlier versions: a job failed here names
 * no worker and keeps no step. A job written before that another transaction holds (another program's `for update`)
 * is passed over, not waited for, as the install waits for nothing once it holds jobs_job's lock (counts.ts): a later
 * write that leaves it waiting or scheduled meets the trigger.
 */
export const INSTALL_PROTOCOL = `
  ${PROTOCOL_TRIGGERS_BEFORE.map(dropBefore).join('\n  ')}
  create or replace function ${PROTOCOL_TRIGGER}() returns trigger language plpgsql as $f$
  begin
    new.error := case ${RULES('new')
      .map(([when, why]) => `when ${when} then ${why}`)
      .join(' ')} end;
    new.state := 'failed';
    new.finished_at := now();
    new.owner := null;
    if tg_op = 'UPDATE' then
      delete from jobs_step where job = new.seq;
    end if;
    return new;
  end $f$;
  create or replace trigger ${PROTOCOL_TRIGGER} before insert or update on jobs_job
    for each row when (${BROKEN('new')}) execute function ${PROTOCOL_TRIGGER}();
  update jobs_job set state = state where seq in (select seq from jobs_job where ${BROKEN('jobs_job')} for no key update skip locked);`
