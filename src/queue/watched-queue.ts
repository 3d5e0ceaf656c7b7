/**
 * The watchers of one queue on one connection, and when each one's `ahead`
 * may be counted again. A count goes stale when the queue's line moves (any
 * change to its jobs may move it); a stale count falls due once its
 * watcher's `aheadInterval` has passed since it was made, and the due ones
 * are counted together, in one walk down the line, at most once per
 * AHEAD_WALK_GAP_MS (or the shortest interval, when shorter), so that
 * watchers started at different times share walks.
 * @internal
 */
import type { SnapshotRow } from '../dialect/index.js'
import { AHEAD_WALK_GAP_MS } from '../limits.js'

/** What the refresher needs of a watch. @internal */
export interface Watcher {
  readonly seq: number
  readonly id: string
  readonly queue: string
  /** The least time, in ms, between two counts of its `ahead` alone. */
  readonly aheadIntervalMs: number
  /** The row it last got. */
  readonly row: SnapshotRow
  /** A fresh row, with `ahead` counted in the same read, or undefined when it was not counted (the last count stands). */
  update(row: SnapshotRow, ahead: number | null | undefined): void
  /** Ends the watch with an error. */
  fail(error: unknown): void
}

/** A watcher's place in the refresher, with when its `ahead` was last counted. @internal */
export interface Entry {
  readonly watcher: Watcher
  /** performance.now() when its `ahead` was last counted. */
  countedAt: number
  /** The connection's count of line moves when its `ahead` was last counted. */
  countedAtMove: number
}

/** @internal */
export class WatchedQueue {
  readonly entries = new Set<Entry>()
  /** The entries counted since the line last moved: the next move makes their counts stale. */
  private readonly fresh = new Set<Entry>()
  /** When the first stale count falls due (performance.now()); null when none is stale. */
  private dueAt: number | null = null
  /** When the line was last walked for due counts (performance.now()). */
  private walkedAt = -Infinity
  private shortestIntervalMs = Infinity

  /** `movedAt`: the connection's count of line moves at the queue's last move. */
  constructor(private movedAt: number) {}

  /** Adds an entry whose count was made as its fields say. */
  add(entry: Entry): void {
    this.entries.add(entry)
    this.shortestIntervalMs = Math.min(this.shortestIntervalMs, entry.watcher.aheadIntervalMs)
    this.counted(entry)
  }

  /** Removes an entry; answers whether the queue has none left. */
  remove(entry: Entry): boolean {
    this.fresh.delete(entry)
    this.entries.delete(entry)
    return this.entries.size === 0
  }

  /** The line moved (the connection's `move`-th move): every count is stale now, and the fresh ones' due times join the queue's. */
  moved(move: number): void {
    this.movedAt = move
    for (const entry of this.fresh) if (entry.watcher.row.state === 'waiting') this.due(dueAt(entry))
    this.fresh.clear()
  }

  /** After a count: fresh until the line moves, or, when it moved meanwhile, due in its turn. */
  counted(entry: Entry): void {
    if (this.isStale(entry)) this.due(dueAt(entry))
    else this.fresh.add(entry)
  }

  /** A count that could not be read: it falls due again at once. */
  retry(entry: Entry): void {
    this.due(dueAt(entry))
    this.walkedAt = -Infinity
  }

  /** When the line is next walked for due counts: once the first is due, but not sooner than a gap after the last walk; null for never. */
  nextWalk(): number | null {
    if (this.dueAt === null) return null
    return Math.max(this.dueAt, this.walkedAt + Math.min(AHEAD_WALK_GAP_MS, this.shortestIntervalMs))
  }

  /** Adds to `due` the entries whose count is stale and due by `now`; the queue's next due count is the first of the others'. */
  takeDue(now: number, due: Set<Entry>): void {
    let next = Infinity
    let shortest = Infinity
    for (const entry of this.entries) {
      shortest = Math.min(shortest, entry.watcher.aheadIntervalMs)
      if (!this.isStale(entry)) continue
      const at = dueAt(entry)
      if (at <= now) due.add(entry)
      else next = Math.min(next, at)
    }
    this.dueAt = next === Infinity ? null : next
    this.walkedAt = now
    this.shortestIntervalMs = shortest
  }

  /** Whether the entry's job waits and the line moved since its `ahead` was counted. */
  private isStale(entry: Entry): boolean {
    return entry.watcher.row.state === 'waiting' && entry.countedAtMove < this.movedAt
  }

  private due(at: number): void {
    this.dueAt = Math.min(this.dueAt ?? Infinity, at)
  }
}

/** When the entry's `ahead` may be counted again. */
function dueAt(entry: Entry): number {
  return entry.countedAt + entry.watcher.aheadIntervalMs
}
