/**
 * Slot arithmetic for schedules: which instants a cron expression names in a
 * time zone, and which of them are due after a pause. Cron parsing comes from
 * croner (zero dependencies, maintained, 5- and 6-field expressions), read on
 * a wall clock with no clock changes; the zone's offsets come from the IANA
 * database through Intl (wall-clock.ts), and the rule for the days the clocks
 * change is this module's, the same for a single time, a list, a range or a
 * step:
 *
 * - A wall-clock time that does not exist (02:30 in Europe/Paris on the last
 *   Sunday of March, when 02:00 becomes 03:00) runs once, at the moment it
 *   would have been had the clocks not changed: moved on by the gap (03:30).
 *   Distinct times in the gap stay distinct (02:00, 02:20 and 02:40 run at
 *   03:00, 03:20 and 03:40); a time moved onto one the expression names after
 *   the gap (02:00 of `0 2-3 * * *`, onto 03:00) makes one slot with it.
 * - A wall-clock time that occurs twice (02:30 on the last Sunday of October)
 *   runs once, at its first occurrence; but an expression whose hours are
 *   every hour (`0 * * * *`, `*\/20 * * * *`) runs on the real clock, at both:
 *   25 hourly slots on the long day, 23 on the short one.
 *
 * Every slot is one instant, and the instants are strictly ascending: no slot
 * runs twice, and every time named runs, two that fall on one instant as one.
 */
import { Cron, CronPattern } from 'croner'
import { JobsError } from '../errors.js'
import { MAX_BACKFILL_SLOTS } from '../limits.js'
import { WallClock } from './wall-clock.js'

/** A cron expression read in a time zone. */
export interface SlotRule {
  readonly cron: string
  readonly tz: string
  /** The first slot strictly after `after` (ms), or null when the expression names no later time. */
  next(after: number): number | null
  /** Up to `count` slots strictly before `before` (ms) and not before `notBefore` (50 years before `before` by default), the latest first. */
  previous(count: number, before: number, notBefore?: number): number[]
}

/** Parsed rules by zone and expression: parsing costs about 0.25 ms, a look-up nothing. */
const rules = new Map<string, SlotRule>()
const MAX_CACHED_RULES = 1_000
const DAY_MS = 86_400_000
/** How far back `previous` looks when it is given no bound. */
const PREVIOUS_REACH_MS = 50 * 366 * DAY_MS
/** The first span `previous` reads, doubled until it holds enough slots. */
const PREVIOUS_FIRST_SPAN_MS = 2_000
/** Stretches of one offset a look for the next slot crosses before it gives up: a slot beyond them all is none. */
const MAX_STRETCHES = 10_000

/**
 * The rule of `cron` read in `tz`. Throws INVALID_OPTION naming the expression or the zone when croner refuses
 * it, or when the expression names no time after `now` (the 30th of February, say).
 */
export function slotRule(cron: string, tz: string, now = Date.now()): SlotRule {
  const key = `${tz}\n${cron}`
  const known = rules.get(key)
  if (known) return known
  let walls: Cron
  let everyHour: boolean
  try {
    walls = new Cron(cron, { utcOffset: 0, paused: true, mode: '5-or-6-parts' })
    everyHour = new CronPattern(cron, undefined, { mode: '5-or-6-parts' }).hour.every((hour) => hour === 1)
  } catch (error) {
    throw new JobsError('INVALID_OPTION', `cron: '${cron}' is not a cron expression of 5 or 6 fields (${(error as Error).message})`, {
      cause: error,
    })
  }
  let clock: WallClock
  try {
    clock = new WallClock(tz)
  } catch (error) {
    throw new JobsError('INVALID_OPTION', `tz: '${tz}' is not an IANA time zone (such as 'Europe/Paris' or 'UTC')`, { cause: error })
  }
  const rule = new ZonedSlots(cron, tz, walls, clock, everyHour)
  if (rule.next(now) === null) throw new JobsError('INVALID_OPTION', `cron: '${cron}' names no time after now in ${tz}`)
  if (rules.size >= MAX_CACHED_RULES) rules.delete(rules.keys().next().value!)
  rules.set(key, rule)
  return rule
}

/**
 * The slots of an expression in a zone. A wall-clock time is written as the ms it would be in UTC; a stretch is
 * a time between two changes of the zone's offset, where wall time and instant differ by that offset.
 */
class ZonedSlots implements SlotRule {
  constructor(
    readonly cron: string,
    readonly tz: string,
    private readonly walls: Cron,
    private readonly clock: WallClock,
    private readonly everyHour: boolean,
  ) {}

  next(after: number): number | null {
    return this.slotAfter(after, Infinity)
  }

  previous(count: number, before: number, notBefore = before - PREVIOUS_REACH_MS): number[] {
    // Read forward over a span before `before`, doubled until it holds `count` slots or reaches `notBefore`.
    for (let span = PREVIOUS_FIRST_SPAN_MS; ; span *= 2) {
      const from = Math.max(notBefore, before - span)
      const slots: number[] = []
      for (let slot = this.slotAfter(from - 1, before); slot !== null && slot < before; slot = this.slotAfter(slot, before))
        slots.push(slot)
      if (slots.length >= count || from === notBefore) return slots.slice(-count).reverse()
    }
  }

  /** The first wall-clock time strictly after `wall`, or null. */
  private wallAfter(wall: number): number | null {
    return this.walls.nextRun(new Date(wall))?.getTime() ?? null
  }

  /**
   * The first slot strictly after `after`. A caller that wants only the slots up to `until` may get, in place of
   * one beyond it, another instant beyond it: the offsets are then read only up to `until`.
   */
  private slotAfter(after: number, until: number): number | null {
    const clock = this.clock
    let offset = clock.offset(after)
    // The stretch that holds `after` began at `start`, a change within the day before (else null), from `prior`.
    let start = clock.changeBefore(after, after - DAY_MS)
    let prior = start === null ? offset : clock.offset(start - 1)
    let best: number | null = null
    // After a gap, the stretch before it still has the gap's wall times, moved on by the gap: those after `after`.
    if (start !== null && prior < offset) {
      const wall = this.wallAfter(after + prior)
      if (wall !== null && wall < start + offset) best = wall - prior
    }
    // The first wall time this stretch may run: past a change back, the second occurrences are passed over.
    let fromWall = after + offset
    for (let stretches = 0; stretches < MAX_STRETCHES; stretches++) {
      if (start !== null && prior > offset && !this.everyHour) fromWall = Math.max(fromWall, start + prior - 1)
      const wall = this.wallAfter(fromWall)
      if (wall === null) return best
      const slot = wall - offset
      const from = start !== null && start > after ? start : after
      const change = clock.changeAfter(from, Math.min(slot, until))
      if (change === null) return earliest(best, slot)
      const next = clock.offset(change)
      if (wall < change + Math.max(offset, next)) {
        // A wall time of the gap at `change`, moved on by it: the next stretch's first slot may come first.
        const first = this.wallAfter(change + next - 1)
        return earliest(earliest(best, slot), first === null ? null : first - next)
      }
      prior = offset
      offset = next
      start = change
      fromWall = change + next - 1
    }
    return best
  }
}

function earliest(a: number | null, b: number | null): number | null {
  if (a === null) return b
  if (b === null) return a
  return Math.min(a, b)
}

/** What a pass does with one schedule: the slots whose jobs it adds, oldest first, and the schedule's next slot after them. */
export interface DueSlots {
  slots: number[]
  nextAt: number | null
}

/**
 * The slots of a schedule due at `now` whose next slot not yet added is `nextAt`: none before `nextAt`.
 * The latest slot at or before `now` is always due; with `backfillMs`, so are the earlier ones within
 * `backfillMs` before `now`, at most MAX_BACKFILL_SLOTS in all (the latest ones). The next slot is the first
 * after `now`.
 */
export function dueSlots(rule: SlotRule, nextAt: number, now: number, backfillMs: number | null): DueSlots {
  if (nextAt > now) return { slots: [], nextAt }
  const from = Math.max(nextAt, backfillMs === null ? now : now - backfillMs)
  const count = backfillMs === null ? 1 : MAX_BACKFILL_SLOTS
  const latestFirst = rule.previous(count, now + 1, nextAt)
  const slots: number[] = []
  for (const slot of latestFirst) {
    if (slot < nextAt) break
    if (slots.length > 0 && slot < from) break
    slots.push(slot)
  }
  return { slots: slots.reverse(), nextAt: rule.next(now) }
}

/** A slot's job id: the schedule's name and the slot in ISO 8601, UTC (`daily-digest@2026-12-03T07:00:00.000Z`). */
export function slotJobId(name: string, slot: number): string {
  return `${name}@${new Date(slot).toISOString()}`
}
