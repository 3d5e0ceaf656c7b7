/**
 * Recurring schedules (JOB-21): store one with `schedule`, remove it with
 * `unschedule`, list them with `listSchedules`. Any running worker of the
 * queue adds the job of each due slot (engine/schedules.ts).
 */
import { answer, connectionOf, runOn, type AnswerOf, type Database } from '../dialect/open.js'
import { andThen, ask, type Connection, type Program, type ScheduleRow } from '../dialect/index.js'
import { describe, toMs, type Duration } from '../duration.js'
import { JobsError } from '../errors.js'
import { checkName, encodeJson } from '../json.js'
import { MAX_SCHEDULE_NAME_BYTES, MAX_VALUE_BYTES } from '../limits.js'
import { checkKnownOptions } from '../options.js'
import { checkQueue, type Queue } from '../queue/define.js'
import { queueNameOf, type QueueRef } from '../queue/ref.js'
import { slotJobId, slotRule } from '../engine/slots.js'
import { scheduleTableMissing, schedulesChanged } from '../engine/schedules.js'
import { parseStoredValue, StoredColumns } from '../stored.js'
import type { JobState } from '../types.js'

/** The options of {@link schedule}. */
export interface ScheduleOptions<T> {
  /** A cron expression of 5 fields (minute hour day month weekday) or 6 (seconds first), as croner reads it. */
  cron: string
  /** The IANA time zone the expression is read in. Defaults to `'UTC'`. */
  tz?: string
  /** The value of each job it adds. */
  value: T
  /**
   * After downtime, how far back missed slots are added, oldest first (at most 1,000 per schedule: the latest).
   * Defaults to none: only the latest missed slot is added.
   */
  backfill?: Duration
}

/** A schedule as {@link listSchedules} shows it. */
export interface ScheduleInfo {
  queue: string
  name: string
  cron: string
  tz: string
  /** The value of each job it adds; a value that is not JSON (written by hand) is given as its text. */
  value: unknown
  /** How far back missed slots are added, in ms, or null for the latest missed slot only. */
  backfill: number | null
  /** The next slot not yet added: an invalid Date when the stored next_at is not a time (see `malformed`). */
  nextAt: Date
  /** The last slot whose job was added, or null; an invalid Date when the stored last_slot is not a time (see `malformed`). */
  lastSlot: Date | null
  /** The job of the last slot: its id, and its state, or null once it was pruned. Null before the first slot. */
  lastJob: { id: string; state: JobState | null } | null
  /** When the schedule was last created or changed. */
  updatedAt: Date
  /**
   * The columns whose stored values are not times a Date holds (another program wrote `infinity`, or a time
   * past the year 275760), by column name (`next_at`, `last_slot`), each with its value as stored; null while
   * none is (JOB-18).
   */
  malformed: Readonly<Record<string, string>> | null
}

const SCHEDULE_OPTIONS = new Set(['cron', 'tz', 'value', 'backfill'])

/**
 * schedule stores a recurring schedule named `name` on `queue`: a worker of
 * the queue, in any process, adds a job of `value` at each slot that `cron`
 * names in `tz`, within moments of the slot. The job's id is the name and the
 * slot in ISO 8601, UTC (`daily-digest@2026-12-03T07:00:00.000Z`), so a slot
 * makes exactly one job however many workers run (JOB-21). After downtime
 * only the latest missed slot is added, unless `backfill` says how far back
 * to add them all (oldest first, at most 1,000).
 *
 * An upsert, to call at every start: with the same arguments it changes
 * nothing (nor `updatedAt` nor the next slot); with others it replaces the
 * schedule and recomputes its next slot from now. Answers whether it wrote.
 * Synchronous on SQLite, a promise on PostgreSQL.
 *
 * Throws, writing nothing: INVALID_OPTION naming a bad cron expression, time
 * zone, backfill, option, name or queue; INVALID_VALUE or TOO_LARGE for a
 * value that is not JSON or over 1 MiB, TOO_LARGE for a name over 999 bytes;
 * SCHEMA_MISSING when the tables were not migrated.
 *
 * @example
 * schedule(db, digests, 'daily-digest', { cron: '0 8 * * *', tz: 'Europe/Paris', value: { kind: 'daily' } })
 */
export function schedule<T, D extends Database = Database>(
  db: D,
  queue: Queue<T>,
  name: string,
  options: ScheduleOptions<NoInfer<T>>,
): AnswerOf<D, boolean>
export function schedule<T>(db: Database, queue: Queue<T>, name: string, options: ScheduleOptions<NoInfer<T>>): boolean | Promise<boolean> {
  const connection = connectionOf(db)
  return withScheduleTable(connection, () => {
    const definition = checkQueue(queue)
    checkScheduleName(name)
    if (typeof options !== 'object' || options === null || Array.isArray(options))
      throw new JobsError('INVALID_OPTION', `schedule options: expected { cron, tz?, value, backfill? }, got ${describe(options)}`)
    checkKnownOptions(options, SCHEDULE_OPTIONS, 'schedule')
    if (typeof options.cron !== 'string')
      throw new JobsError('INVALID_OPTION', `cron: expected a cron expression such as '0 8 * * *', got ${describe(options.cron)}`)
    const tz = options.tz ?? 'UTC'
    if (typeof tz !== 'string' || tz === '')
      throw new JobsError('INVALID_OPTION', `tz: expected an IANA time zone such as 'Europe/Paris', got ${describe(tz)}`)
    const backfill = options.backfill === undefined ? null : toMs(options.backfill, 'backfill')
    const value = encodeJson(options.value, 'value', MAX_VALUE_BYTES) as string
    const now = Date.now()
    const nextAt = slotRule(options.cron, tz, now).next(now)!
    const row = { queue: definition.name, name, cron: options.cron, tz, value, backfill, nextAt, now }
    return andThen(
      connection.write((db) => upsert(db.scheduleUpsert(row))),
      (wrote) => written(connection, definition.name, wrote),
    )
  })
}

/**
 * unschedule removes the schedule `name` of `queue`: no slot after it is
 * added. Jobs its slots added stay, whatever their state. Answers whether it
 * removed one (false: there was none).
 *
 * Throws INVALID_OPTION or TOO_LARGE for a bad queue or name, SCHEMA_MISSING
 * when the tables were not migrated.
 *
 * @example
 * unschedule(db, digests, 'daily-digest')
 */
export function unschedule<D extends Database>(db: D, queue: QueueRef, name: string): AnswerOf<D, boolean>
export function unschedule(db: Database, queue: QueueRef, name: string): boolean | Promise<boolean> {
  const connection = connectionOf(db)
  return withScheduleTable(connection, () => {
    const queueName = queueNameOf(queue)
    checkScheduleName(name)
    return andThen(
      connection.write((db) => upsert(db.scheduleDelete(queueName, name))),
      (wrote) => written(connection, queueName, wrote),
    )
  })
}

/**
 * listSchedules answers every schedule, or those of one queue, by queue then
 * name: its cron, zone and value, its next and last slots, and the job of the
 * last slot with its state.
 *
 * Throws INVALID_OPTION or TOO_LARGE for a bad queue name, SCHEMA_MISSING
 * when the tables were not migrated.
 *
 * @example
 * for (const s of listSchedules(db, digests)) console.log(s.name, s.nextAt.toISOString(), s.lastJob?.state)
 */
export function listSchedules<D extends Database>(db: D, queue?: QueueRef): AnswerOf<D, ScheduleInfo[]>
export function listSchedules(db: Database, queue?: QueueRef): ScheduleInfo[] | Promise<ScheduleInfo[]> {
  const connection = connectionOf(db)
  return withScheduleTable(connection, () => readSchedules(connection, queue === undefined ? null : queueNameOf(queue)))
}

/** The schedules of `queue` (null: all) with the states of their last jobs, on any connection: the CLI and the dashboard read them so. @internal */
export function readSchedules(connection: Connection, queue: string | null): ScheduleInfo[] | Promise<ScheduleInfo[]> {
  return runOn(connection, schedulesWithLastJobs(connection, queue))
}

function* schedulesWithLastJobs(connection: Connection, queue: string | null): Program<ScheduleInfo[]> {
  const db = connection.executor
  const rows: ScheduleRow[] = yield* ask(db.scheduleList(queue))
  const infos: ScheduleInfo[] = []
  for (const row of rows) {
    const stored = new StoredColumns()
    const nextAt = stored.time(row.nextAt, 'next_at')
    const lastSlot = stored.time(row.lastSlot, 'last_slot')
    let lastJob: ScheduleInfo['lastJob'] = null
    if (lastSlot !== null) {
      const id = slotJobId(row.name, lastSlot.getTime())
      const job = yield* ask(db.jobFind(row.queue, id))
      lastJob = { id, state: job?.state ?? null }
    }
    const value = parseStoredValue(row.value)
    infos.push({
      queue: row.queue,
      name: row.name,
      cron: row.cron,
      tz: row.tz,
      value: value.ok ? value.value : row.value,
      backfill: row.backfill,
      nextAt: nextAt ?? new Date(Number.NaN),
      lastSlot: row.lastSlot === null ? null : (lastSlot ?? new Date(Number.NaN)),
      lastJob,
      updatedAt: new Date(row.updatedAt),
      malformed: stored.malformed,
    })
  }
  return infos
}

/** Answers as `answer` does, with a missing jobs_schedule table (an older version's migrations) told as SCHEMA_MISSING. */
function withScheduleTable<T>(connection: Connection, call: () => T | Promise<T>): T | Promise<T> {
  return answer(connection, call, (error): never => {
    throw scheduleTableMissing(error) ?? error
  })
}

function* upsert(write: boolean | Promise<boolean>): Program<boolean> {
  return yield* ask(write)
}

function written(connection: Connection, queue: string, wrote: boolean): boolean {
  if (wrote) schedulesChanged(connection.key, queue)
  return wrote
}

function checkScheduleName(name: unknown): void {
  checkName(name, 'schedule name')
  const bytes = Buffer.byteLength(name as string, 'utf8')
  if (bytes > MAX_SCHEDULE_NAME_BYTES)
    throw new JobsError(
      'TOO_LARGE',
      `schedule name is ${bytes} bytes; the limit is ${MAX_SCHEDULE_NAME_BYTES}, so that a slot's job id (name@slot) fits 1,024`,
    )
}
