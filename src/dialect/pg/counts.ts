/**
 * How PostgreSQL keeps a queue's counts by state without a row that every writer updates.
 *
 * - Three statement-level AFTER triggers on jobs_job (insert, update, delete), with transition tables,
 *   append one row to jobs_count per statement and queue whose jobs changed state: the change of each
 *   state's count. They fire for every writer alike (the engine, the admin API, another program's plain
 *   SQL, psql), so nothing in the engine keeps counts. Writers only insert into jobs_count, so claimers
 *   and adders of one queue never wait on one another for its counts.
 * - The workers' maintenance folds a queue's rows into its jobs_queue row (FOLD), and every reader of
 *   counts reads the row plus the sum of the rows not folded yet (UNFOLDED), in one statement.
 * - A writer installs the triggers before its first write (connection.ts), with a recount of every
 *   queue from its jobs when they were missing; a reader installs nothing.
 */
import { pgStatement } from './statement.js'
import { INSTALL_PROTOCOL, PROTOCOL_TRIGGER } from './protocol.js'

const STATES = ['waiting', 'scheduled', 'running', 'done', 'failed', 'canceled'] as const

/** The trigger that keeps a deleted jobs_queue row's counts: the one trigger the install puts on jobs_queue. */
const KEPT_TRIGGER = 'jobs_queue_counts_kept_v1'

/**
 * The triggers' names: the version is in the name, so that a later version installs its own beside a dropped older
 * one. With the counting triggers: the table protocol's (protocol.ts), and jobs_queue_counts_kept_v1, which keeps the
 * counts of a jobs_queue row deleted by hand as changes not folded yet, so that the next fold puts them back.
 */
export const COUNT_TRIGGERS = [
  'jobs_job_counts_insert_v1',
  'jobs_job_counts_update_v1',
  'jobs_job_counts_delete_v1',
  PROTOCOL_TRIGGER,
  KEPT_TRIGGER,
] as const

/** The triggers present, of those the engine installs, on jobs_job and jobs_queue. */
const PRESENT = `select count(*) from pg_trigger where tgrelid in (to_regclass('jobs_job'), to_regclass('jobs_queue'))
    and tgname in (${COUNT_TRIGGERS.map((name) => `'${name}'`).join(', ')})`

/** Per state, the jobs of `rows` (a transition table) in it, times `sign`, per queue: one row per queue. */
const perState = (rows: string, sign: '' | '-') =>
  `select queue, ${STATES.map((state) => `${sign}(state = '${state}')::int as ${state}`).join(', ')} from ${rows}`

/** Appends to jobs_count the sums of `changes` (rows of queue and one column per state) per queue, leaving out queues whose counts did not move. */
const appendChanges = (changes: string) => `insert into jobs_count (queue, ${STATES.join(', ')})
    select queue, ${STATES.map((state) => `sum(${state})`).join(', ')} from (${changes}) c
    group by queue having ${STATES.map((state) => `sum(${state}) <> 0`).join(' or ')}`

/**
 * jobs_job's lock for an install, taken before it by a statement of its own while the installer holds nothing else:
 * it waits for every write under way and holds back every other until the installing transaction ends, so that two
 * installers take turns and no job is written between the recount and the triggers' start.
 */
export const LOCK_FOR_INSTALL = pgStatement('lockForInstall', `lock table jobs_job in share row exclusive mode`)

/**
 * The same lock, taken only where it is free at once, in a block that passes over its refusal (lock_not_available),
 * so that nothing fails and the server logs no error: INSTALL_LOOK then says whether it is held. The install inside
 * the app's transaction takes it so, and never waits for it (connection.ts says why).
 */
export const TRY_LOCK_FOR_INSTALL = pgStatement(
  'tryLockForInstall',
  `do $lock$
begin
  lock table jobs_job in share row exclusive mode nowait;
exception when lock_not_available then
  null;
end $lock$`,
)

/** What an installer sees once it asked for jobs_job's lock: how many of the triggers are in place, and whether it holds the lock. */
export const INSTALL_LOOK = pgStatement<Record<never, never>, { present: number; locked: boolean }>(
  'installLook',
  `select (${PRESENT})::int as present, exists (select from pg_locks where locktype = 'relation' and relation = to_regclass('jobs_job')
      and pid = pg_backend_pid() and mode = 'ShareRowExclusiveLock' and granted) as locked`,
)

/** Each queue's kept counts (its row's, and those not folded yet), negated: rows of queue and one column per state. */
const KEPT_NEGATED = `select name as queue, ${STATES.map((state) => `-${state} as ${state}`).join(', ')} from jobs_queue
    union all select queue, ${STATES.map((state) => `-${state}`).join(', ')} from jobs_count`

/**
 * Installs the triggers and recounts every queue, in the installer's transaction, which holds jobs_job's lock
 * (LOCK_FOR_INSTALL or TRY_LOCK_FOR_INSTALL) and found the triggers missing once it held it (INSTALL_LOOK). Holding
 * that lock, it waits for nothing, so that no transaction that waits for the lock is waited for in turn:
 * - a lock it needs beyond that one is asked for with NOWAIT (jobs_queue's, for its trigger, only where the trigger
 *   is missing; jobs_job's exclusive one, to drop an earlier version's trigger, only where there is one): where
 *   another transaction holds it, the install fails with lock_not_available, having changed nothing;
 * - the recount writes no row that another transaction may hold: it appends to jobs_count, per queue, the difference
 *   between its jobs and its kept counts, where it would otherwise clear jobs_count and rewrite the jobs_queue rows,
 *   which a claim of a limited queue, a fold or the app's own `for update` may hold. No job changes meanwhile (the
 *   lock), and a fold that commits meanwhile moves counts from jobs_count to the row, leaving their sum as it was;
 * - the protocol's check of the jobs written before passes over a job another transaction holds (protocol.ts).
 */
export const INSTALL_COUNTERS = pgStatement(
  'installCounters',
  `do $install$
begin
  create or replace function jobs_job_counts_added_v1() returns trigger language plpgsql as $f$
  begin
    ${appendChanges(perState('jobs_counts_new', ''))};
    return null;
  end $f$;
  create or replace function jobs_job_counts_moved_v1() returns trigger language plpgsql as $f$
  begin
    ${appendChanges(`${perState('jobs_counts_new', '')} union all ${perState('jobs_counts_old', '-')}`)};
    return null;
  end $f$;
  create or replace function jobs_job_counts_deleted_v1() returns trigger language plpgsql as $f$
  begin
    ${appendChanges(perState('jobs_counts_old', '-'))};
    return null;
  end $f$;
  create or replace trigger jobs_job_counts_insert_v1 after insert on jobs_job
    referencing new table as jobs_counts_new for each statement execute function jobs_job_counts_added_v1();
  create or replace trigger jobs_job_counts_update_v1 after update on jobs_job
    referencing old table as jobs_counts_old new table as jobs_counts_new for each statement execute function jobs_job_counts_moved_v1();
  create or replace trigger jobs_job_counts_delete_v1 after delete on jobs_job
    referencing old table as jobs_counts_old for each statement execute function jobs_job_counts_deleted_v1();
  create or replace function ${KEPT_TRIGGER}() returns trigger language plpgsql as $f$
  begin
    insert into jobs_count (queue, ${STATES.join(', ')}) values (old.name, ${STATES.map((state) => `old.${state}`).join(', ')});
    return null;
  end $f$;
  if not exists (select from pg_trigger where tgrelid = to_regclass('jobs_queue') and tgname = '${KEPT_TRIGGER}') then
    lock table jobs_queue in share row exclusive mode nowait;
    create trigger ${KEPT_TRIGGER} after delete on jobs_queue
      for each row when (${STATES.map((state) => `old.${state} <> 0`).join(' or ')}) execute function ${KEPT_TRIGGER}();
  end if;
  ${INSTALL_PROTOCOL}
  ${appendChanges(`${perState('jobs_job', '')} union all ${KEPT_NEGATED}`)};
end $install$`,
)

/** How many of the counting triggers are in place: all of them, or the writer installs them. */
export const COUNT_TRIGGERS_PRESENT = pgStatement<Record<never, never>, { present: number }>(
  'countTriggersPresent',
  `select (${PRESENT})::int as present`,
)

/**
 * The counts of the queue @queue not folded yet, as a from clause `unfolded` of one row: `rows` (how many)
 * and one sum per state. Walks the queue's entries of jobs_count_queue: as many as writes since the last fold.
 */
export const UNFOLDED = `(select count(*) as rows, ${STATES.map((state) => `coalesce(sum(${state}), 0) as ${state}`).join(', ')}
    from jobs_count where queue = @queue::text) unfolded`

/** Every queue's counts not folded yet, as a from clause `unfolded` of one row per queue. */
export const UNFOLDED_ALL = `(select queue, ${STATES.map((state) => `sum(${state}) as ${state}`).join(', ')} from jobs_count group by queue) unfolded`

/**
 * A per-state count as readers answer it: the queue's row (`q`, perhaps missing) plus what is not folded.
 */
export const kept = (state: (typeof STATES)[number]) => `(coalesce(q.${state}, 0) + coalesce(unfolded.${state}, 0))::float8`

/**
 * Folds the queue's rows of jobs_count into its jobs_queue row, in one statement run on its own (no transaction
 * around it), so that no lock it takes outlives it, whatever the process that sent it does next (a handler that
 * blocks the event loop, say): the rows deleted are exactly the ones added to the row. Safe beside writers and
 * readers, and waits for none of them:
 * - folders of one queue take turns (a transaction-scoped advisory lock, which ends with the statement): the
 *   second passes, so two never delete the same rows, in whatever order their scans met them, and never deadlock;
 * - a queue row that another transaction has locked (a claim of a limited queue, the app's own `for update`) is
 *   passed over (`skip locked`): the fold waits for nobody, and the next one folds what this one left;
 * - the delete takes only the rows committed when it starts; a writer's row committed later is left for
 *   the next fold, never lost nor counted twice;
 * - the delete and the row's update commit together, so a reader's statement (one snapshot) sees each
 *   change either in jobs_count or in the row, never in both nor in neither;
 * - the update adds to the row as it is once locked, so a fold never undoes another's, nor a limit or pause set
 *   meanwhile.
 * A queue without a jobs_queue row (jobs written with plain SQL only) gets one.
 */
export const FOLD = pgStatement<{ queue: string }, { rows: number }>(
  'foldCounts',
  `with turn as materialized (
    select pg_try_advisory_xact_lock(hashtext('drizzle_jobs_fold'), hashtext(@queue::text)) as turn
  ), queue_row as materialized (
    select name from jobs_queue where name = @queue::text and (select turn from turn) for no key update skip locked
  ), free as materialized (
    select (select turn from turn)
      and (exists (select 1 from queue_row) or not exists (select 1 from jobs_queue where name = @queue::text)) as go
  ), folded as (
    delete from jobs_count where queue = @queue::text and (select go from free) returning ${STATES.join(', ')}
  ), sums as (
    select count(*) as rows, ${STATES.map((state) => `coalesce(sum(${state}), 0) as ${state}`).join(', ')} from folded
  ), kept as (
    insert into jobs_queue (name, ${STATES.join(', ')}) select @queue::text, ${STATES.join(', ')} from sums where rows > 0
    on conflict (name) do update set ${STATES.map((state) => `${state} = jobs_queue.${state} + excluded.${state}`).join(', ')}
    returning 1
  )
  select rows::int as rows from sums`,
)

/** Whether the queue has counts not folded yet: one probe of jobs_count_queue. */
export const HAS_UNFOLDED = pgStatement<{ queue: string }, { found: 1 }>(
  'hasUnfolded',
  `select 1 as found from jobs_count where queue = @queue::text limit 1`,
)
