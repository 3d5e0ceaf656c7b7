/**
 * Fair shares of a queue's concurrency across workers (JOB-07). The limit
 * alone holds across processes, but not who gets the slots: a worker that
 * ends a run claims the freed slot in its next transaction, at once, while
 * the others only see it free on their next poll, so one process would run
 * nearly every job.
 *
 * So the workers that want more runs than the limit lets them have say so
 * in `jobs_queue.claim_waiters`, `{ "<owner>": expiresAtMs }`, and, while
 * others wait, a claim takes no more than the claimer's share: the
 * concurrency divided among the claimer and the other waiters, rounded up,
 * less what the claimer already holds. With no other waiter (one process,
 * or a queue the limit does not bind) nothing changes.
 *
 * An entry counts until it expires, a few poll intervals after it was
 * written: a worker that stopped, crashed or got what it wanted stops
 * counting by itself. A waiter writes its entry again only when less than
 * half of that time remains, so a busy queue writes the column seldom; an
 * entry is written in a claim's transaction, under the queue's write lock,
 * where the expired entries are dropped too. The entries are read with the
 * clock the claim's transaction keeps (the worker's on SQLite, the server's
 * on PostgreSQL). This module is the arithmetic alone: no database, no clock.
 */

/** The workers waiting for a share of one queue's concurrency, as a claim reads them and may write them back. */
export class ClaimWaiters {
  /** The entries that still count, by owner: the others (expired, or unreadable) are dropped when the value is written. */
  private readonly fresh = new Map<string, number>()

  /** Reads a stored value (JSON text or an object, as the driver answers it); anything else counts as no waiters. */
  constructor(
    stored: unknown,
    readonly now: number,
  ) {
    for (const [owner, expiresAt] of Object.entries(parse(stored))) {
      if (typeof expiresAt === 'number' && expiresAt > now) this.fresh.set(owner, expiresAt)
    }
  }

  /** How many more runs `owner` may hold while the others wait: its share of `total` less the `held` ones; unbounded when no other waits. */
  room(owner: string, total: number, held: number): number {
    const others = this.fresh.size - (this.fresh.has(owner) ? 1 : 0)
    if (others === 0) return Infinity
    return Math.max(0, Math.ceil(total / (1 + others)) - held)
  }

  /**
   * The value to store after `owner`'s claim, or undefined to leave it as it is: whether it waits (wanted more than
   * the limit let it have), for `waitMs` from now. A waiter whose entry has more than half its time left writes nothing.
   */
  next(owner: string, waits: boolean, waitMs: number): string | null | undefined {
    const mine = this.fresh.get(owner)
    if (waits) {
      if (mine !== undefined && mine - this.now > waitMs / 2) return undefined
      this.fresh.set(owner, this.now + waitMs)
    } else {
      if (mine === undefined) return undefined
      this.fresh.delete(owner)
    }
    return this.fresh.size === 0 ? null : JSON.stringify(Object.fromEntries(this.fresh))
  }

  /** How long `owner`'s entry still counts, in ms: 0 when it has none. */
  remaining(owner: string): number {
    const mine = this.fresh.get(owner)
    return mine === undefined ? 0 : mine - this.now
  }
}

/** A stored value, read leniently: a value another program broke counts as no waiters, never as an error. */
function parse(stored: unknown): Record<string, unknown> {
  let value = stored
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value)
    } catch {
      return {}
    }
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {}
}
