/**
 * What the engine asks of a database for schedules (JOB-21), kept apart from
 * the job requests of executor.ts: every Executor answers these too. The
 * rows are `jobs_schedule`'s, with times in ms and the value as JSON text.
 */
import type { Kind, Result } from './executor.js'

/** A `jobs_schedule` row as the engine reads it. */
export interface ScheduleRow {
  queue: string
  name: string
  cron: string
  tz: string
  /** The value of each job it adds, as JSON text (as another program stored it, on SQLite). */
  value: string
  backfill: number | null
  nextAt: number
  lastSlot: number | null
  updatedAt: number
}

/** A schedule to store. */
export type NewSchedule = Omit<ScheduleRow, 'lastSlot' | 'updatedAt'> & { now: number }

/** Moves a schedule's next slot, if it is still as the pass read it (a compare-and-set on next_at and updated_at). */
export interface ScheduleAdvance {
  queue: string
  name: string
  seenNextAt: number
  seenUpdatedAt: number
  nextAt: number
  lastSlot: number | null
}

/** The schedule requests of one connection. */
export interface ScheduleRequests<K extends Kind> {
  /** Creates a schedule, or replaces one whose cron, tz, value or backfill differ; answers whether it wrote (false: the same one was there). */
  scheduleUpsert(schedule: NewSchedule): Result<K, boolean>
  /** Deletes a schedule; answers whether it was there. */
  scheduleDelete(queue: string, name: string): Result<K, boolean>
  scheduleGet(queue: string, name: string): Result<K, ScheduleRow | undefined>
  /** The earliest next slot among a queue's schedules, or null: one look-up in the primary key. */
  scheduleGetEarliest(queue: string): Result<K, number | null>
  /** A queue's schedules due by `now`, the earliest first. */
  scheduleListDue(find: { queue: string; now: number; limit: number }): Result<K, ScheduleRow[]>
  /** The compare-and-set that claims a schedule's due slots: answers whether it moved next_at (false: another pass did, or the schedule changed). */
  scheduleAdvance(advance: ScheduleAdvance): Result<K, boolean>
  /** Every schedule, or a queue's, by queue then name. */
  scheduleList(queue: string | null): Result<K, ScheduleRow[]>
}
