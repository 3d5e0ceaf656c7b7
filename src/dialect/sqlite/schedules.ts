/**
 * The schedule statements on SQLite (JOB-21), prepared on a connection's first
 * use of a schedule, so that a worker of a queue without schedules prepares
 * only the one look-up its pass makes.
 */
import type { Kind, NewSchedule, ScheduleAdvance, ScheduleRequests, ScheduleRow } from '../index.js'
import { changedOne, single, statement, type PreparedStatements, type SqliteClient } from './statement.js'
import { LIMIT } from './terms.js'

const SCHEDULE = `queue, name, cron, tz, value, backfill, next_at as nextAt, last_slot as lastSlot, updated_at as updatedAt`

export const SCHEDULE_SQL = {
  /**
   * Creates a schedule, or replaces one that differs in cron, tz, value or backfill (its next slot
   * recomputed, its last slot kept); one that is the same is left as it is, updated_at and next_at too.
   */
  upsert: statement<
    [NewSchedule],
    never
  >(`insert into jobs_schedule (queue, name, cron, tz, value, backfill, next_at, last_slot, updated_at)
    values (@queue, @name, @cron, @tz, @value, @backfill, @nextAt, null, @now)
    on conflict (queue, name) do update set cron = excluded.cron, tz = excluded.tz, value = excluded.value,
      backfill = excluded.backfill, next_at = excluded.next_at, updated_at = excluded.updated_at
    where jobs_schedule.cron is not excluded.cron or jobs_schedule.tz is not excluded.tz
      or jobs_schedule.value is not excluded.value or jobs_schedule.backfill is not excluded.backfill`),
  remove: statement<[queue: string, name: string], never>(`delete from jobs_schedule where queue = ? and name = ?`),
  get: statement<[queue: string, name: string], ScheduleRow>(`select ${SCHEDULE} from jobs_schedule where queue = ? and name = ?`),
  /** The earliest next slot of a queue's schedules: a walk of the primary key's entries for the queue. */
  earliest: single<[queue: string], number | null>(`select min(next_at) from jobs_schedule where queue = ?`),
  listDue: statement<[{ queue: string; now: number; limit: number }], ScheduleRow>(`select ${SCHEDULE} from jobs_schedule
    where queue = @queue and next_at <= @now order by next_at ${LIMIT}`),
  /** The compare-and-set on next_at (and updated_at, which moves when the schedule is replaced) that claims its due slots. */
  advance: statement<[ScheduleAdvance], never>(`update jobs_schedule set next_at = @nextAt, last_slot = coalesce(@lastSlot, last_slot)
    where queue = @queue and name = @name and next_at = @seenNextAt and updated_at = @seenUpdatedAt`),
  listAll: statement<[], ScheduleRow>(`select ${SCHEDULE} from jobs_schedule order by queue, name`),
  listOfQueue: statement<[queue: string], ScheduleRow>(`select ${SCHEDULE} from jobs_schedule where queue = ? order by name`),
} as const

/** The schedule requests of one connection, each statement prepared on its first use. @internal */
export function sqliteScheduleRequests<K extends Kind>(client: SqliteClient<K>): ScheduleRequests<K> {
  let prepared: PreparedStatements<K, typeof SCHEDULE_SQL> | undefined
  const sql = () => (prepared ??= client.prepareAll(SCHEDULE_SQL))
  return {
    scheduleUpsert: (schedule) => changedOne(sql().upsert.run(schedule)),
    scheduleDelete: (queue, name) => changedOne(sql().remove.run(queue, name)),
    scheduleGet: (queue, name) => sql().get.get(queue, name),
    scheduleGetEarliest: (queue) => sql().earliest.get(queue),
    scheduleListDue: (find) => sql().listDue.all(find),
    scheduleAdvance: (advance) => changedOne(sql().advance.run(advance)),
    scheduleList: (queue) => (queue === null ? sql().listAll.all() : sql().listOfQueue.all(queue)),
  }
}
