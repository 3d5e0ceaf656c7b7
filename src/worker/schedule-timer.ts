/**
 * A worker's schedule passes (JOB-21): one on each maintenance tick, one when
 * a schedule of its queue changes in this process, and one on a timer armed
 * for the earliest next slot of its queue's schedules, so that a slot's job
 * is added within moments of the slot, not on the next tick. A pass when
 * nothing is due costs one read (engine/schedules.ts).
 */
import type { Connection } from '../dialect/index.js'
import { BUSY_RETRY_MS, MAX_TIMER_MS } from '../limits.js'
import { runSchedulePass, scheduleTableMissing, type BrokenSchedule, type ScheduleQueue } from '../engine/schedules.js'

export interface ScheduleTimerOptions {
  connection: Connection
  queue: ScheduleQueue
  clock: () => number
  onError: (error: unknown) => void
  stopping: () => boolean
  /** Hands a pass started by the timer to the worker, whose `stop` waits for it. */
  track: (task: Promise<void>) => void
}

/** How long after a busy database a pass is tried again. */
const BUSY_PASS_RETRY_MS = 10 * BUSY_RETRY_MS

export class ScheduleTimer {
  private timer: NodeJS.Timeout | null = null
  private current: Promise<void> | null = null
  private again = false
  /** Set when jobs_schedule is missing (an older version's migrations): reported once, and no pass is made again. */
  private off = false
  /** The broken schedules already reported, by queue, name and update time: each is reported once. */
  private readonly reported = new Set<string>()

  constructor(private readonly options: ScheduleTimerOptions) {}

  /** Runs a pass now, or right after the one under way; then arms the timer for the earliest next slot. */
  pass(): Promise<void> {
    if (this.current) {
      this.again = true
      return this.current
    }
    this.current = this.passes().finally(() => {
      this.current = null
    })
    return this.current
  }

  /** Clears the timer: the worker stops. */
  cancel(): void {
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
  }

  private async passes(): Promise<void> {
    do {
      this.again = false
      await this.once()
    } while (this.again && !this.options.stopping())
  }

  private async once(): Promise<void> {
    const { connection, queue, clock, onError, stopping } = this.options
    if (stopping() || this.off) return
    if (connection.inTransaction()) return this.arm(BUSY_PASS_RETRY_MS)
    let earliest: number | null
    const now = clock()
    try {
      const result = await runSchedulePass(connection, queue, now)
      this.report(result.broken)
      earliest = result.earliest
    } catch (error) {
      const missing = scheduleTableMissing(error)
      if (missing) {
        this.off = true
        return onError(missing)
      }
      if (!connection.isBusy(error)) onError(error)
      return this.arm(BUSY_PASS_RETRY_MS)
    }
    // A schedule still due after a pass is broken: the maintenance tick reads it again, no timer spins on it.
    // Broken is what was due at the pass's own time: a timer may fire a moment before the slot (the event loop's clock
    // is not Date.now()), and the pass then finds it not yet due; the timer goes again at once, not on the next tick.
    if (earliest === null || earliest <= now) return this.cancel()
    this.arm(earliest - clock())
  }

  private arm(delayMs: number): void {
    this.cancel()
    if (this.options.stopping()) return
    this.timer = setTimeout(
      () => {
        this.timer = null
        this.options.track(this.pass())
      },
      Math.min(Math.max(0, delayMs), MAX_TIMER_MS),
    )
  }

  private report(broken: readonly BrokenSchedule[]): void {
    for (const { row, error } of broken) {
      const key = `${row.queue}\n${row.name}\n${row.updatedAt}`
      if (this.reported.has(key)) continue
      this.reported.add(key)
      this.options.onError(
        new Error(
          `drizzle-jobs: schedule '${row.name}' of queue '${row.queue}' cannot be read, so no slot of it is added until it is stored again: ${(error as Error)?.message ?? String(error)}`,
          { cause: error },
        ),
      )
    }
  }
}
