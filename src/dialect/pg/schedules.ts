/**
 * The schedule statements on PostgreSQL (JOB-21). Times are compared as whole
 * ms (`ms(…)`), so that a compare-and-set matches a time another program wrote
 * with microseconds, or the default now() of updated_at.
 */
import type { NewSchedule, ScheduleAdvance, ScheduleRequests, ScheduleRow } from '../index.js'
import type { Queryable } from './driver.js'
import { all, get, one, pgStatement, some } from './statement.js'
import { at, ms } from './terms.js'

const SCHEDULE = `queue, name, cron, tz, value::text as value, backfill::float8 as backfill, ${ms('next_at')} as "nextAt",
  ${ms('last_slot')} as "lastSlot", ${ms('updated_at')} as "updatedAt"`

type Key = { queue: string; name: string }

export const SCHEDULE_SQL = {
  /**
   * Creates a schedule, or replaces one that differs in cron, tz, value or backfill (its next slot
   * recomputed, its last slot kept); one that is the same is left as it is, updated_at and next_at too.
   */
  upsert: pgStatement<NewSchedule, { written: 1 }>(
    'scheduleUpsert',
    `insert into jobs_schedule (queue, name, cron, tz, value, backfill, next_at, last_slot, updated_at)
    values (@queue::text, @name::text, @cron::text, @tz::text, @value::jsonb, @backfill::bigint, ${at('@nextAt')}, null, ${at('@now')})
    on conflict (queue, name) do update set cron = excluded.cron, tz = excluded.tz, value = excluded.value,
      backfill = excluded.backfill, next_at = excluded.next_at, updated_at = excluded.updated_at
    where (jobs_schedule.cron, jobs_schedule.tz, jobs_schedule.value, jobs_schedule.backfill)
      is distinct from (excluded.cron, excluded.tz, excluded.value, excluded.backfill)
    returning 1 as written`,
  ),
  remove: pgStatement<Key, { removed: 1 }>(
    'scheduleRemove',
    `delete from jobs_schedule where queue = @queue::text and name = @name::text returning 1 as removed`,
  ),
  get: pgStatement<Key, ScheduleRow>(
    'scheduleGet',
    `select ${SCHEDULE} from jobs_schedule where queue = @queue::text and name = @name::text`,
  ),
  /** The earliest next slot of a queue's schedules: a walk of the primary key's entries for the queue. */
  earliest: pgStatement<{ queue: string }, { nextAt: number | null }>(
    'scheduleGetEarliest',
    `select ${ms('min(next_at)')} as "nextAt" from jobs_schedule where queue = @queue::text`,
  ),
  listDue: pgStatement<{ queue: string; now: number; limit: number }, ScheduleRow>(
    'scheduleListDue',
    `select ${SCHEDULE} from jobs_schedule
    where queue = @queue::text and next_at <= ${at('@now')} order by next_at limit @limit::bigint`,
  ),
  /**
   * The compare-and-set on next_at (and updated_at, which moves when the schedule is replaced) that claims its
   * due slots. Two passes at once: the second waits on the row's lock, then finds next_at moved and writes nothing.
   */
  advance: pgStatement<ScheduleAdvance, { moved: 1 }>(
    'scheduleAdvance',
    `update jobs_schedule set next_at = ${at('@nextAt')},
      last_slot = coalesce(${at('@lastSlot')}, last_slot)
    where queue = @queue::text and name = @name::text
      and ${ms('next_at')} = @seenNextAt::float8 and ${ms('updated_at')} = @seenUpdatedAt::float8
    returning 1 as moved`,
  ),
  listAll: pgStatement<Record<never, never>, ScheduleRow>('scheduleListAll', `select ${SCHEDULE} from jobs_schedule order by queue, name`),
  listOfQueue: pgStatement<{ queue: string }, ScheduleRow>(
    'scheduleListOfQueue',
    `select ${SCHEDULE} from jobs_schedule where queue = @queue::text order by name`,
  ),
} as const

/** The schedule requests run on `q`. @internal */
export function pgScheduleRequests(q: Queryable): ScheduleRequests<'async'> {
  return {
    scheduleUpsert: (schedule) => some(q, SCHEDULE_SQL.upsert, schedule),
    scheduleDelete: (queue, name) => some(q, SCHEDULE_SQL.remove, { queue, name }),
    scheduleGet: (queue, name) => get(q, SCHEDULE_SQL.get, { queue, name }),
    scheduleGetEarliest: async (queue) => (await one(q, SCHEDULE_SQL.earliest, { queue })).nextAt,
    scheduleListDue: (find) => all(q, SCHEDULE_SQL.listDue, find),
    scheduleAdvance: (advance) => some(q, SCHEDULE_SQL.advance, advance),
    scheduleList: (queue) => (queue === null ? all(q, SCHEDULE_SQL.listAll, {}) : all(q, SCHEDULE_SQL.listOfQueue, { queue })),
  }
}
