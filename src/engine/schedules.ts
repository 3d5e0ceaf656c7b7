/**
 * The schedule protocol (JOB-21), written once over the Executor. A worker's
 * pass reads the earliest next slot of its queue's schedules (one look-up);
 * when one is due, it reads the due schedules, works out their slots
 * (slots.ts), and in one write transaction, for each schedule, moves its
 * `next_at` past them by a compare-and-set on what it read, then adds the job
 * of each slot, with an id made of the schedule's name and the slot. A pass
 * whose compare-and-set fails (another process moved it first) adds nothing,
 * and jobs_job's unique (queue, id) would refuse a second job of a slot
 * anyway: one slot makes exactly one job, however many processes race.
 */
import { startSend } from '../telemetry/trace.js'
import { JobsError } from '../errors.js'
import { ask, type Connection, type Executor, type Program, type ScheduleRow } from '../dialect/index.js'
import { MAX_TIME_MS, SCHEDULE_BATCH_SIZE } from '../limits.js'
import type { QueueDefinition } from './definition.js'
import { counting, shift } from './counts.js'
import { dueSlots, slotJobId, slotRule, type DueSlots } from './slots.js'
import { jobsChanged, notifyOthers } from './wake.js'

/** What a queue's definition gives the jobs of its schedules. */
export type ScheduleQueue = Pick<QueueDefinition, 'name' | 'attempts' | 'maxWaiting'>

/** One due schedule and what a pass does with it. */
export interface SlotPlan {
  row: ScheduleRow
  due: DueSlots & { nextAt: number }
}

/** A schedule a pass could not read (a cron or a zone another program stored, say): it is left as it is. */
export interface BrokenSchedule {
  row: ScheduleRow
  error: unknown
}

/** The plans of the due schedules `rows` at `now`; those whose cron or zone no longer parse are set apart. */
export function planSlots(rows: readonly ScheduleRow[], now: number): { plans: SlotPlan[]; broken: BrokenSchedule[] } {
  const plans: SlotPlan[] = []
  const broken: BrokenSchedule[] = []
  for (const row of rows) {
    try {
      const due = dueSlots(slotRule(row.cron, row.tz, now), row.nextAt, now, row.backfill)
      if (due.nextAt === null || due.nextAt > MAX_TIME_MS)
        throw new Error(`cron '${row.cron}' names no slot after ${new Date(now).toISOString()}`)
      plans.push({ row, due: { slots: due.slots, nextAt: due.nextAt } })
    } catch (error) {
      broken.push({ row, error })
    }
  }
  return { plans, broken }
}

/**
 * Adds the jobs of the planned slots, inside the caller's transaction: each schedule's next_at moves by a
 * compare-and-set first, and its jobs are added only when it moved. Answers the ids of the jobs added.
 * A slot's job is due at its slot and is added whatever the queue's maxWaiting: a schedule adds one job a slot.
 */
export function addSlotJobs(db: Executor, queue: ScheduleQueue, plans: readonly SlotPlan[], now: number): Program<string[]> {
  return counting(db, queue.name, function* (moved) {
    const added: string[] = []
    for (const { row, due } of plans) {
      const advanced = yield* ask(
        db.scheduleAdvance({
          queue: row.queue,
          name: row.name,
          seenNextAt: row.nextAt,
          seenUpdatedAt: row.updatedAt,
          nextAt: due.nextAt,
          lastSlot: due.slots.at(-1) ?? null,
        }),
      )
      if (!advanced) continue
      for (const slot of due.slots) {
        const id = slotJobId(row.name, slot)
        // Each slot is a trace of its own: no request added it.
        const send = startSend(queue.name, { id, count: 1, root: true })
        const job = {
          queue: queue.name,
          id,
          grp: null,
          value: row.value,
          state: 'waiting' as const,
          priority: 0,
          maxAttempts: queue.attempts,
          runAt: Math.min(slot, now),
          now,
          maxWaiting: queue.maxWaiting,
          traceContext: send.traceContext,
        }
        const inserted = yield* ask(db.jobInsert(job))
        send.end()
        if (!inserted) continue
        shift(moved, null, 'waiting')
        added.push(id)
      }
    }
    if (added.length > 0) yield* notifyOthers(db, queue.name, 'added')
    return added
  })
}

/** What one pass did: the jobs it added, the schedules it could not read, and the earliest next slot left (null: none). */
export interface PassResult {
  added: string[]
  broken: BrokenSchedule[]
  earliest: number | null
}

/**
 * One pass over the schedules of `queue` at `now`: when none is due it costs one read (the earliest next_at);
 * otherwise it adds the due slots' jobs, a batch of schedules per transaction, and tells this process's workers.
 * Throws the database's busy error when another writer holds the lock.
 */
export async function runSchedulePass(connection: Connection, queue: ScheduleQueue, now: number): Promise<PassResult> {
  const result: PassResult = { added: [], broken: [], earliest: await connection.executor.scheduleGetEarliest(queue.name) }
  while (result.earliest !== null && result.earliest <= now) {
    const rows = await connection.executor.scheduleListDue({ queue: queue.name, now, limit: SCHEDULE_BATCH_SIZE })
    const { plans, broken } = planSlots(rows, now)
    result.broken.push(...broken)
    if (plans.length > 0) {
      const added = await connection.write((db) => addSlotJobs(db, queue, plans, now))
      if (added.length > 0) jobsChanged(connection.key, queue.name, 'added', [])
      result.added.push(...added)
    }
    result.earliest = await connection.executor.scheduleGetEarliest(queue.name)
    // A full batch leaves more due schedules; otherwise what is still due is broken, and waits for its fix.
    if (rows.length < SCHEDULE_BATCH_SIZE) break
  }
  return result
}

/**
 * Adds the job of a schedule's next slot now, as a pass would once it is due, and moves next_at past it: for
 * tests (drizzle-jobs/testing's runSchedule). The job is due now. Answers its id, or undefined when no such
 * schedule exists; `added` false when the slot's job was there already.
 */
export function* fireNextSlot(
  db: Executor,
  queue: ScheduleQueue,
  name: string,
  now: number,
): Program<{ id: string; added: boolean } | undefined> {
  const row = yield* ask(db.scheduleGet(queue.name, name))
  if (!row) return undefined
  const nextAt = slotRule(row.cron, row.tz, now).next(row.nextAt)
  if (nextAt === null) return undefined
  const plan: SlotPlan = { row, due: { slots: [row.nextAt], nextAt } }
  const added = yield* addSlotJobs(db, queue, [plan], now)
  return { id: slotJobId(name, row.nextAt), added: added.length > 0 }
}

/** Listeners per database of the schedules changed in this process: a worker of the queue reads them again at once. */
const listeners = new Map<string, Set<(queue: string) => void>>()

/** Calls `listener` with the queue of each schedule stored or removed in this process on the database `key`; answers the stop. */
export function onSchedulesChanged(key: string, listener: (queue: string) => void): () => void {
  let set = listeners.get(key)
  if (!set) listeners.set(key, (set = new Set()))
  set.add(listener)
  return () => {
    set.delete(listener)
    if (set.size === 0) listeners.delete(key)
  }
}

/** Tells this process's workers on the database `key` that a schedule of `queue` changed. */
export function schedulesChanged(key: string, queue: string): void {
  for (const listener of listeners.get(key) ?? []) listener(queue)
}

/**
 * The SCHEMA_MISSING error for a database error that says jobs_schedule is missing (tables migrated by an
 * older version), or undefined for any other error.
 */
export function scheduleTableMissing(error: unknown): JobsError | undefined {
  const message = error instanceof Error ? error.message : ''
  const missing =
    /no such table: jobs_schedule/.test(message) || ((error as { code?: unknown })?.code === '42P01' && message.includes('jobs_schedule'))
  if (!missing) return undefined
  return new JobsError(
    'SCHEMA_MISSING',
    "table jobs_schedule is missing (the tables are an older version's): run `drizzle-kit generate` and `drizzle-kit migrate`",
    { cause: error },
  )
}
