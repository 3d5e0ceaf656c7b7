/**
 * A time zone's wall clock, as the platform's Intl reads it from the IANA
 * database: the offset in force at an instant, and the instants where it
 * changes (the clock changes of daylight saving, and any other). Instants are
 * ms since the epoch; an offset is what to add to an instant to read the wall
 * clock as if it were UTC (Europe/Paris in summer: 2 h).
 */
const DAY_MS = 86_400_000

export class WallClock {
  private readonly format: Intl.DateTimeFormat

  /** Throws a RangeError when `tz` is not a zone Intl knows. */
  constructor(readonly tz: string) {
    this.format = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      era: 'short',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
  }

  /** The offset in force at the instant `at`, in ms (whole seconds: zones change on a second). */
  offset(at: number): number {
    const second = Math.floor(at / 1_000) * 1_000
    const fields = { era: 'AD', year: 0, month: 1, day: 1, hour: 0, minute: 0, second: 0 }
    for (const part of this.format.formatToParts(second)) {
      if (part.type === 'era') fields.era = part.value
      else if (part.type in fields) (fields as Record<string, number | string>)[part.type] = Number(part.value)
    }
    const wall = new Date(0)
    wall.setUTCFullYear(fields.era === 'BC' ? 1 - fields.year : fields.year, fields.month - 1, fields.day)
    wall.setUTCHours(fields.hour, fields.minute, fields.second, 0)
    const offset = wall.getTime() - second
    // Beyond the range of a Date the wall clock cannot be read: the offset is taken as none.
    return Number.isFinite(offset) ? offset : 0
  }

  /**
   * The first instant in (`from`, `until`] whose offset is not the one in force at `from`, or null. It looks a
   * day at a time, so two changes within one day that undo each other are not seen (no zone has had any).
   */
  changeAfter(from: number, until: number): number | null {
    const offset = this.offset(from)
    for (let a = from; a < until; ) {
      const b = Math.min(a + DAY_MS, until)
      if (this.offset(b) !== offset) return this.firstOther(a, b, offset)
      a = b
    }
    return null
  }

  /** The last change in (`since`, `at`]: the instant the offset in force at `at` began, or null when it began before `since`. */
  changeBefore(at: number, since: number): number | null {
    const offset = this.offset(at)
    for (let b = at; b > since; ) {
      const a = Math.max(b - DAY_MS, since)
      const earlier = this.offset(a)
      if (earlier !== offset) return this.firstOther(a, b, earlier)
      b = a
    }
    return null
  }

  /** The first instant in (`a`, `b`] whose offset is not `offset`, the offset at `a`, given that the one at `b` is not. */
  private firstOther(a: number, b: number, offset: number): number {
    while (b - a > 1) {
      const mid = Math.floor((a + b) / 2)
      if (this.offset(mid) === offset) a = mid
      else b = mid
    }
    return b
  }
}
