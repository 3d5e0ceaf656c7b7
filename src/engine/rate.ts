/**
 * A queue's rate (JOB-22): run starts across every worker of every process
 * never exceed `limit` in any window of `per` ms, and, with `perGroup`, the
 * starts of one group never exceed `perGroup` in such a window.
 *
 * The state it needs lives in `jobs_queue.rate_starts`: a sliding log of the
 * most recent starts (ms since the epoch), `{ "starts": [t, …], "groups":
 * { "<grp>": [t, …] } }`, each list ascending, at most `limit` overall and
 * `perGroup` per group, and none older than the window. A claim, under the
 * queue's write lock, reads it, may start `limit − starts in the window`
 * jobs (a group at its own cap is passed over), appends the starts it makes
 * and writes the log back in the same transaction. The starts are stamped
 * as the log is written, not as the claim began: on PostgreSQL the claim's
 * statements after the decision take round trips, and a stamp taken early
 * would let the window reopen before the handlers' calls leave it. This
 * module is the arithmetic alone: no database, no clock of its own.
 *
 * A start stays in the log for `per` plus a slack of at most 100 ms (a
 * tenth of `per` when that is less): a start is stamped as its claim writes
 * the log, a few ms before its handler is called (the commit, the event
 * loop), and the slack keeps the starts as handlers see them within the
 * limit too, whatever the scheduling of each process adds between the two.
 * It costs a rate of 10 per second about a tenth of its throughput, and one
 * of 60 per minute a six-hundredth. A worker that could not call a handler
 * within the slack of the stamp (a commit that took long, a process that was
 * not scheduled) hands the job back unstarted, its attempt refunded: the log
 * keeps counting the start, so the window it would have broken stays full.
 * Where the database keeps the clock, the slack is counted from the worker's
 * ask for it, not from its answer, which a busy process may read late
 * (claim.ts): so every handler is called within the slack after its stamp,
 * and no window of `per` holds more than `limit` calls.
 */
import { RATE_SLACK_MS } from '../limits.js'

/** A queue's rate as stored in `jobs_queue`. */
export interface Rate {
  readonly limit: number
  readonly perMs: number
  /** Starts of one group per window, or null for no cap per group. */
  readonly perGroup: number | null
}

/** The stored rate columns of a queue, as read: a rate when they make one, else null (no rate, or values another program broke). */
export function rateOf(row: { rateLimit: number | null; ratePer: number | null; ratePerGroup: number | null } | undefined): Rate | null {
  if (!row || !isCount(row.rateLimit) || !isCount(row.ratePer)) return null
  return { limit: row.rateLimit, perMs: row.ratePer, perGroup: isCount(row.ratePerGroup) ? row.ratePerGroup : null }
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1
}

/** How long a start counts against the rate: `per`, plus the slack that covers the gap between a claim and its handler's call. */
export function rateWindowMs(rate: Rate): number {
  return rate.perMs + rateSlackMs(rate)
}

/** How long after its start is stamped a run may still begin: a run its worker cannot begin by then is handed back unstarted. */
export function rateSlackMs(rate: Rate): number {
  return Math.min(RATE_SLACK_MS, Math.floor(rate.perMs / 10))
}

/**
 * The recent starts of one queue, as a claim reads them, adds to them and writes them back. `now` is the
 * claim's time, on the clock the log is written with (the worker's on SQLite, the server's on PostgreSQL).
 */
export class RateLog {
  private readonly windowMs: number
  private readonly starts: number[]
  private readonly groups = new Map<string, number[]>()
  /** The groups of the starts this claim made (null: no group). */
  private readonly added: Array<string | null> = []
  private stampedAt: number

  /** Reads a stored log (JSON text or an object, as the driver answers it); anything else is read as no starts, which the next claim overwrites. */
  constructor(
    readonly rate: Rate,
    stored: unknown,
    readonly now: number,
  ) {
    this.windowMs = rateWindowMs(rate)
    this.stampedAt = now
    const log = parseLog(stored)
    this.starts = this.recent(log.starts)
    for (const [grp, times] of Object.entries(log.groups)) {
      const recent = this.recent(times)
      if (recent.length > 0) this.groups.set(grp, recent)
    }
  }

  /** How many more runs may start now. */
  room(): number {
    return Math.max(0, this.rate.limit - this.starts.length - this.added.length)
  }

  /** Whether a job of `grp` may start now as far as its group's cap goes (a job with no group always may). */
  groupHasRoom(grp: string | null): boolean {
    if (this.rate.perGroup === null || grp === null) return true
    return this.inGroup(grp).length < this.rate.perGroup
  }

  /**
   * How many more runs of each group may start now by the rate's cap per group: the groups with starts in the
   * window (`listed`), and any other group (`other`); null when the rate has no cap per group.
   */
  groupRooms(): { listed: Record<string, number>; other: number } | null {
    const perGroup = this.rate.perGroup
    if (perGroup === null) return null
    // No prototype: a group may be named like one of Object's own properties.
    const listed: Record<string, number> = Object.create(null)
    const named = new Set([...this.groups.keys(), ...this.added.filter((grp): grp is string => grp !== null)])
    for (const grp of named) listed[grp] = Math.max(0, perGroup - this.inGroup(grp).length)
    return { listed, other: perGroup }
  }

  /** Counts a start made by this claim; it is stamped when the claim writes the log (`stamp`). */
  add(grp: string | null): void {
    this.added.push(grp)
  }

  /**
   * Stamps the starts this claim made with the time it writes the log, as late as the claim can tell: the later the
   * stamp, the nearer the handlers' calls, which follow the claim's commit. Never before `now`.
   */
  stamp(at: number): void {
    this.stampedAt = Math.max(at, this.now)
  }

  /** When the next run may start: now when there is room, else when the oldest start that fills the window leaves it. */
  opensAt(): number {
    return opening([...this.starts, ...this.added.map(() => this.stampedAt)], this.rate.limit, this.windowMs, this.now)
  }

  /** When the next run of `grp` may start, its group's cap and the queue's both counted. */
  groupOpensAt(grp: string | null): number {
    const queue = this.opensAt()
    if (this.rate.perGroup === null || grp === null) return queue
    return Math.max(queue, opening(this.inGroup(grp), this.rate.perGroup, this.windowMs, this.now))
  }

  /** The log as stored: the most recent `limit` starts, and the most recent `perGroup` of each group, ascending. */
  toJSON(): { starts: number[]; groups: Record<string, number[]> } {
    const starts = inOrder([...this.starts, ...this.added.map(() => this.stampedAt)])
    const groups: Record<string, number[]> = Object.create(null)
    if (this.rate.perGroup !== null) {
      const named = new Set([...this.groups.keys(), ...this.added.filter((grp): grp is string => grp !== null)])
      for (const grp of named) groups[grp] = this.inGroup(grp).slice(-this.rate.perGroup)
    }
    return { starts: starts.slice(-this.rate.limit), groups }
  }

  /** A group's starts in the window, this claim's among them, ascending. */
  private inGroup(grp: string): number[] {
    const added = this.added.filter((one) => one === grp).map(() => this.stampedAt)
    return inOrder([...(this.groups.get(grp) ?? []), ...added])
  }

  /** The starts that still count, ascending. A start stamped after now (a clock set back) counts until it leaves the window. */
  private recent(times: readonly number[]): number[] {
    const after = this.now - this.windowMs
    return inOrder(times.filter((time) => time > after))
  }
}

/** `times` ascending: as a log is stored, it is already, and is then only checked (a log of 10,000 starts costs a sort 1 ms). */
function inOrder(times: number[]): number[] {
  for (let i = 1; i < times.length; i++) if (times[i]! < times[i - 1]!) return times.sort((a, b) => a - b)
  return times
}

/** When fewer than `cap` of `times` (ascending, all in the window) remain in a window that ends at that moment. */
function opening(times: readonly number[], cap: number, windowMs: number, now: number): number {
  if (times.length < cap) return now
  return times[times.length - cap]! + windowMs
}

/** A stored log, read leniently: a log another program broke counts as no starts, never as an error. */
function parseLog(stored: unknown): { starts: number[]; groups: Record<string, number[]> } {
  let value = stored
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value)
    } catch {
      value = null
    }
  }
  // No prototype: a group may be named like one of Object's own properties (`__proto__`), and must keep its starts.
  const log = { starts: [] as number[], groups: Object.create(null) as Record<string, number[]> }
  if (typeof value !== 'object' || value === null) return log
  const { starts, groups } = value as { starts?: unknown; groups?: unknown }
  log.starts = times(starts)
  if (typeof groups === 'object' && groups !== null && !Array.isArray(groups)) {
    for (const [grp, list] of Object.entries(groups)) log.groups[grp] = times(list)
  }
  return log
}

function times(list: unknown): number[] {
  return Array.isArray(list) ? list.filter((time): time is number => typeof time === 'number' && Number.isFinite(time)) : []
}

/**
 * When a waiting job's queue rate next lets a run of its group start, if the window is full now (ms since the
 * epoch), else null: the snapshot's `rateLimitedUntil`. `row.rateNow` is the clock the log is kept with, when the
 * database keeps it (PostgreSQL's); else `now`.
 */
export function rateLimitedUntil(
  row: {
    state: unknown
    grp: unknown
    rateLimit: number | null
    ratePer: number | null
    ratePerGroup: number | null
    rateStarts: unknown
    rateNow: number | null
  },
  now: number,
): number | null {
  if (row.state !== 'waiting') return null
  const rate = rateOf(row)
  if (rate === null) return null
  const log = new RateLog(rate, row.rateStarts, row.rateNow ?? now)
  const opensAt = log.groupOpensAt(typeof row.grp === 'string' ? row.grp : null)
  return opensAt > log.now ? opensAt : null
}
