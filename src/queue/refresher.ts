/**
 * The one refresher of a connection's watchers: it finds what changed and
 * hands each watcher its job's fresh row, and `ahead` when that is due.
 *
 * Rows. A change this process commits says which jobs it wrote when it knows
 * (wake.ts: a claim, the ends of runs, an add): only the watchers of those
 * jobs are read again. A worker's claims and ends say what they wrote, too
 * (engine/written.ts): their watchers take those rows as the change hands
 * them, unread, when their last row is the one the change was made from. A
 * claim is read at once, synchronously after its commit; other changes are
 * gathered until the end of the current job of the event loop and read
 * together. A change that does not say (an admin action)
 * has every watcher of its queue read again. Other processes' commits are
 * found by one `PRAGMA data_version` check per poll interval, and then every
 * watcher of the connection is read again. One statement reads all the rows
 * of a refresh.
 *
 * `ahead`. Every change may move a queue's line, and with it the `ahead` of
 * each of its waiting jobs; a drain moves it with every claim. So `ahead`
 * alone is counted again at most once per watcher's interval (250 ms by
 * default): one walk down the line, in one read with the rows, for all the
 * watchers of a queue whose count is due (watched-queue.ts). One timer per
 * connection brings the next due walk. A watcher whose row changed more than
 * that (a job back to waiting, say) gets a fresh count with it, so that a
 * snapshot's `ahead` never contradicts its state.
 */
import { andThen, ask, type Answer, type Connection, type Executor, type Program, type SnapshotRow } from '../dialect/index.js'
import { listenToOthers, onJobsChanged, type ChangeKind } from '../engine/wake.js'
import type { Written } from '../engine/written.js'
import { JobsError } from '../errors.js'
import { BUSY_RETRY_MS, DEFAULT_POLL_INTERVAL_MS } from '../limits.js'
import { countAheadOfMany, sameRun } from './read.js'
import { WatchedQueue, type Entry, type Watcher } from './watched-queue.js'

/** Watchers, and connections with a refresher, in this process. @internal for tests that check a watch frees everything. */
export function activeWatchers(): { watchers: number; connections: number } {
  let watchers = 0
  for (const watched of watchedConnections) watchers += watched.size
  return { watchers, connections: watchedConnections.size }
}

const refreshers = new WeakMap<Connection, WatchedConnection>()
const watchedConnections = new Set<WatchedConnection>()

/** The refresher of a connection's watchers, started if need be. @internal */
export function watchedConnection(connection: Connection): WatchedConnection {
  let watched = refreshers.get(connection)
  if (!watched) refreshers.set(connection, (watched = new WatchedConnection(connection)))
  return watched
}

/** The one refresher of a connection's watchers. @internal */
export class WatchedConnection {
  private readonly byQueue = new Map<string, WatchedQueue>()
  private readonly bySeq = new Map<number, Entry[]>()
  private readonly entries = new Map<Watcher, Entry>()
  /** Watchers whose rows a change wrote, to read again. */
  private readonly dirty = new Set<Entry>()
  /** Queues any of whose jobs may have changed: every watcher of them is read again. */
  private readonly dirtyQueues = new Set<string>()
  private allDirty = false
  /** Line moves seen, on any queue: a count of `ahead` is stale when its queue moved after it. */
  private moves = 0
  private deferred = false
  /** A refresh is queued for the end of the current job of the event loop. */
  private soon = false
  /** A refresh under way on an asynchronous connection: another one waits for it. */
  private refreshing = false
  private lastDataVersion: number | null = null
  private pollTimer: NodeJS.Timeout | null = null
  private aheadTimer: NodeJS.Timeout | null = null
  private aheadTimerAt = Infinity
  private unsubscribe: (() => void) | null = null
  private stopListening: (() => void) | null = null

  constructor(readonly connection: Connection) {
    this.start()
  }

  get size(): number {
    return this.entries.size
  }

  /** The count of line moves now: taken before a watcher's first read, and handed back to `add`. */
  get lineMoves(): number {
    return this.moves
  }

  /** Adds a watcher whose `ahead` was counted at `countedAt` (performance.now()), when `lineMoves` was `countedAtMove`. */
  add(watcher: Watcher, countedAt: number, countedAtMove: number): void {
    const entry: Entry = { watcher, countedAt, countedAtMove }
    let queue = this.byQueue.get(watcher.queue)
    // A queue no watcher followed kept no count of its moves: any move since the read may have been one of it.
    if (!queue) this.byQueue.set(watcher.queue, (queue = new WatchedQueue(this.moves)))
    queue.add(entry)
    this.entries.set(watcher, entry)
    const same = this.bySeq.get(watcher.seq)
    if (same) same.push(entry)
    else this.bySeq.set(watcher.seq, [entry])
    this.start()
    this.armAheadTimer()
  }

  remove(watcher: Watcher): void {
    const entry = this.entries.get(watcher)
    if (entry) {
      this.entries.delete(watcher)
      this.dirty.delete(entry)
      if (this.byQueue.get(watcher.queue)?.remove(entry)) this.byQueue.delete(watcher.queue)
      const same = this.bySeq.get(watcher.seq)
      if (same) {
        same.splice(same.indexOf(entry), 1)
        if (same.length === 0) this.bySeq.delete(watcher.seq)
      }
    }
    this.releaseIfIdle()
  }

  /** With no watcher left, stops polling and listening. */
  releaseIfIdle(): void {
    if (this.size > 0) return
    if (this.pollTimer) clearInterval(this.pollTimer)
    if (this.aheadTimer) clearTimeout(this.aheadTimer)
    this.unsubscribe?.()
    this.stopListening?.()
    this.stopListening = null
    this.pollTimer = null
    this.aheadTimer = null
    this.aheadTimerAt = Infinity
    this.unsubscribe = null
    watchedConnections.delete(this)
    refreshers.delete(this.connection)
  }

  private start(): void {
    if (this.pollTimer) return
    watchedConnections.add(this)
    refreshers.set(this.connection, this)
    this.lastDataVersion = null
    this.poll()
    this.pollTimer = setInterval(() => this.poll(), DEFAULT_POLL_INTERVAL_MS)
    this.unsubscribe = onJobsChanged(this.connection.key, (queue, kind, seqs, written) => this.changed(queue, kind, seqs, written))
    // Other processes' notices, where the dialect carries them, arrive as this process's own changes do.
    this.stopListening = listenToOthers(this.connection)
  }

  /**
   * A change this process committed: the watchers of the jobs it wrote are read again, and the queue's line
   * moved. A claim is read at once, before its handlers start, so that a watcher follows the run's progress
   * from its first value; other changes are gathered until the end of the current job of the event loop and
   * read together (a worker's flush ends runs, then claims). A change that says what it wrote (`written`: a
   * claim, the ends of runs) hands its rows at once instead, to the watchers whose last row is the one it was
   * made from; not while a read is under way (on an asynchronous connection), whose older rows would follow.
   */
  private changed(name: string, kind: ChangeKind, seqs: readonly number[] | undefined, written: Written | undefined): void {
    const queue = this.byQueue.get(name)
    if (!queue) return
    if (seqs === undefined) {
      this.dirtyQueues.add(name)
    } else {
      const making = written !== undefined && !this.refreshing && !this.allDirty && !this.dirtyQueues.has(name)
      for (let index = 0; index < seqs.length; index++) {
        const entries = this.bySeq.get(seqs[index]!)
        if (!entries) continue
        // From the last: a watcher handed its ended row lets go of its place in `entries`.
        for (let i = entries.length - 1; i >= 0; i--) {
          const entry = entries[i]!
          if (entry.watcher.queue !== name) continue
          const row = making && !(this.dirty.size > 0 && this.dirty.has(entry)) ? written(index, entry.watcher.row) : undefined
          if (row === undefined) this.dirty.add(entry)
          else entry.watcher.update(row, null)
        }
      }
    }
    // After the rows handed: a watcher no longer waiting has no `ahead` to count again.
    queue.moved(++this.moves)
    if (kind === 'claimed') this.refresh()
    else this.refreshSoon()
  }

  private refreshSoon(): void {
    if (this.soon) return
    this.soon = true
    queueMicrotask(() => {
      this.soon = false
      if (this.size > 0) this.refresh()
    })
  }

  private poll(): void {
    let version: Answer<number>
    try {
      version = this.connection.executor.dataVersion()
    } catch (error) {
      return this.pollFailed(error)
    }
    andThen(
      version,
      (answered) => this.polled(answered),
      (error) => this.pollFailed(error),
    )
  }

  /** The first look only takes note: the watchers' own first reads came after it. */
  private polled(version: number): void {
    const first = this.lastDataVersion === null
    if (version === this.lastDataVersion) return
    this.lastDataVersion = version
    if (first || this.size === 0) return
    this.allDirty = true
    for (const queue of this.byQueue.values()) queue.moved(++this.moves)
    this.refresh()
  }

  private pollFailed(error: unknown): void {
    if (!this.connection.isBusy(error)) this.failAll(error)
  }

  /** Reads the rows of the watchers that changed, and counts the `ahead` of those whose count is due, in one read transaction. */
  private refresh(): void {
    // Inside a transaction of this connection the reads would see uncommitted rows (an enqueue that may yet roll back): wait for its end.
    if (this.connection.inTransaction()) return this.refreshLater()
    if (this.refreshing) return this.refreshLater(BUSY_RETRY_MS)
    const now = performance.now()
    // Nothing to read (a worker's change handed every row it wrote): only the timer of the next walk, which a move may bring forward.
    if (this.dirty.size === 0 && !this.allDirty && this.dirtyQueues.size === 0 && !this.anyWalkDue(now)) return this.armAheadTimer()
    const read = new Set<Entry>(this.dirty)
    const due = new Set<Entry>()
    for (const [name, queue] of this.byQueue) {
      if (this.allDirty || this.dirtyQueues.has(name)) for (const entry of queue.entries) read.add(entry)
      const walk = queue.nextWalk()
      if (walk !== null && walk <= now) queue.takeDue(now, due)
    }
    this.allDirty = false
    this.dirtyQueues.clear()
    this.dirty.clear()
    if (read.size > 0 || due.size > 0) this.readAndCount(read, due)
    this.armAheadTimer()
  }

  /**
   * Reads the rows of the watchers `read`, and counts `ahead` for the waiting ones among them whose count is
   * due or whose row changed more than that, and for the watchers `due` whose rows are not read: their rows
   * stand, since any change to them comes with a notice or is found by the poll, which reads them.
   */
  private readAndCount(read: Set<Entry>, due: ReadonlySet<Entry>): void {
    const moves = this.moves
    const seqs = new Set<number>()
    for (const entry of read) seqs.add(entry.watcher.seq)
    // A watcher whose job's row is read anyway takes it.
    const countOnly: Entry[] = []
    for (const entry of due) {
      if (seqs.has(entry.watcher.seq)) read.add(entry)
      else countOnly.push(entry)
    }
    const counts = (entry: Entry, row: SnapshotRow): boolean => due.has(entry) || needsFreshAhead(entry.watcher.row, row)
    const toCount = (rows: ReadonlyMap<number, SnapshotRow>): SnapshotRow[] => {
      const counted: SnapshotRow[] = []
      for (const entry of read) {
        const row = rows.get(entry.watcher.seq)
        if (row?.state === 'waiting' && counts(entry, row)) counted.push(row)
      }
      for (const { watcher } of countOnly) counted.push(watcher.row)
      return counted
    }
    let answer: Answer<Watched>
    try {
      answer = this.connection.read((db) => readWatched(db, [...seqs], toCount))
    } catch (error) {
      return this.readFailed(read, due, error)
    }
    const hand = ({ rows, aheads }: Watched): void => {
      // A count's interval runs from when the watcher is handed it, not from when its read began: on an
      // asynchronous connection a slow read would otherwise hand two counts closer together than the interval.
      const handedAt = performance.now()
      for (const entry of read) {
        const { watcher } = entry
        // Removed meanwhile (on an asynchronous connection): it takes nothing more.
        if (this.entries.get(watcher) !== entry) continue
        const row = rows.get(watcher.seq)
        if (!row || row.id !== watcher.id || row.queue !== watcher.queue) {
          watcher.fail(new JobsError('NOT_FOUND', `job '${watcher.id}' of queue '${watcher.queue}' was deleted while watched`))
        } else if (row.state !== 'waiting') {
          watcher.update(row, null)
        } else if (counts(entry, row) && aheads.has(row.seq)) {
          this.counted(entry, handedAt, moves)
          watcher.update(row, aheads.get(row.seq))
        } else {
          watcher.update(row, undefined)
        }
      }
      for (const entry of countOnly) {
        const { watcher } = entry
        if (this.entries.get(watcher) !== entry || watcher.row.state !== 'waiting' || !aheads.has(watcher.seq)) continue
        this.counted(entry, handedAt, moves)
        watcher.update(watcher.row, aheads.get(watcher.seq))
      }
      this.armAheadTimer()
    }
    // Another refresh waits while this read is under way (on an asynchronous connection; one that answers at once is done here).
    this.refreshing = true
    andThen(
      answer,
      (answered) => {
        this.refreshing = false
        hand(answered)
      },
      (error: unknown) => {
        this.refreshing = false
        this.readFailed(read, due, error)
      },
    )
  }

  /** Whether some queue's walk for due counts of `ahead` has come by `now`. */
  private anyWalkDue(now: number): boolean {
    for (const queue of this.byQueue.values()) {
      const walk = queue.nextWalk()
      if (walk !== null && walk <= now) return true
    }
    return false
  }

  /** Notes a count made at `now`, when the connection had seen `moves` line moves. */
  private counted(entry: Entry, now: number, moves: number): void {
    entry.countedAt = now
    entry.countedAtMove = moves
    this.byQueue.get(entry.watcher.queue)?.counted(entry)
  }

  /** Busy: the same rows and counts are read again shortly. */
  private readFailed(entries: Iterable<Entry>, due: Iterable<Entry>, error: unknown): void {
    if (!this.connection.isBusy(error)) return this.failAll(error)
    for (const entry of entries) if (this.entries.get(entry.watcher) === entry) this.dirty.add(entry)
    for (const entry of due) this.byQueue.get(entry.watcher.queue)?.retry(entry)
    this.refreshLater(BUSY_RETRY_MS)
  }

  /** Arms the connection's one timer for the first due count of a stale `ahead`. */
  private armAheadTimer(): void {
    let first = Infinity
    for (const queue of this.byQueue.values()) first = Math.min(first, queue.nextWalk() ?? Infinity)
    if (first === Infinity || (this.aheadTimer && this.aheadTimerAt <= first)) return
    if (this.aheadTimer) clearTimeout(this.aheadTimer)
    this.aheadTimerAt = first
    this.aheadTimer = setTimeout(
      () => {
        this.aheadTimer = null
        this.aheadTimerAt = Infinity
        if (this.size > 0) this.refresh()
      },
      Math.max(0, Math.ceil(first - performance.now())),
    )
  }

  private refreshLater(ms = 0): void {
    if (this.deferred) return
    this.deferred = true
    const retry = (): void => {
      this.deferred = false
      if (this.size > 0) this.refresh()
    }
    if (ms === 0) setImmediate(retry)
    else setTimeout(retry, ms)
  }

  private failAll(error: unknown): void {
    for (const watcher of [...this.entries.keys()]) watcher.fail(error)
  }
}

/** A row that shows more than a new `ahead` (back to waiting, a new attempt…) comes with a fresh count. */
function needsFreshAhead(previous: SnapshotRow, row: SnapshotRow): boolean {
  return previous.state !== 'waiting' || !sameRun(previous, row)
}

/** The rows of watched jobs by seq, and `ahead` of the waiting ones it was asked for. */
interface Watched {
  rows: Map<number, SnapshotRow>
  aheads: Map<number, number>
}

/** The rows of the jobs `seqs` in one statement, and `ahead` for the waiting rows `toCount` picks given them, one walk per queue. */
function* readWatched(
  db: Executor,
  seqs: readonly number[],
  toCount: (rows: ReadonlyMap<number, SnapshotRow>) => SnapshotRow[],
): Program<Watched> {
  const rows = new Map<number, SnapshotRow>()
  if (seqs.length > 0) for (const row of yield* ask(db.jobGetSnapshots(seqs))) rows.set(row.seq, row)
  const aheads = new Map<number, number>()
  const waiting = toCount(rows)
  if (waiting.length === 0) return { rows, aheads }
  // By queue, each job once (two watchers may follow one job).
  const byQueue = new Map<string, Map<number, SnapshotRow>>()
  for (const row of waiting) {
    const ofQueue = byQueue.get(row.queue)
    if (ofQueue) ofQueue.set(row.seq, row)
    else byQueue.set(row.queue, new Map([[row.seq, row]]))
  }
  for (const ofQueue of byQueue.values()) {
    for (const [seq, ahead] of yield* countAheadOfMany(db, [...ofQueue.values()])) aheads.set(seq, ahead)
  }
  return { rows, aheads }
}
