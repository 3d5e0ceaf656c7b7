/**
 * Watching jobs: `watch` yields a job's snapshot now and on every change.
 *
 * All the watchers of one connection share one refresher (WatchedConnection):
 * in-process changes (wake.ts) refresh the watchers of their queue at once,
 * synchronously after the commit; other processes' commits are found by one
 * `PRAGMA data_version` check per connection per poll interval, and then
 * every watcher of the connection is refreshed with one statement for all
 * their rows plus the `ahead` counts of the waiting ones. Progress needs no
 * poll: watchers subscribe to the running attempt, in this process or
 * through its process's channel.
 */
import { connectionOf, type PgDatabase, type SyncDatabase } from '../dialect/open.js'
import { ask, type Connection, type Executor, type Program, type SnapshotRow } from '../dialect/index.js'
import { describe } from '../duration.js'
import { JobsError } from '../errors.js'
import { checkName } from '../json.js'
import { BUSY_RETRY_MS, DEFAULT_POLL_INTERVAL_MS } from '../limits.js'
import { isOwnChannel } from '../progress/channel.js'
import { subscribeRemoteProgress } from '../progress/remote.js'
import { ENDED_STATES, type EndedState, type JobSnapshot } from '../types.js'
import { subscribeProgress, type ProgressValue } from '../progress/store.js'
import { queueNameOf, type QueueRef, type ResultOf } from './ref.js'
import { countAheadOfMany, progressOf, readJob, runKeyOf, toSnapshot } from './read.js'
import { listenToOthers, onJobsChanged } from '../engine/wake.js'
import { checkKnownOptions } from '../options.js'

/** The options of {@link watch}. */
export interface WatchOptions {
  /** Ends the watch when aborted: the iterator returns, and everything it held is freed. */
  signal?: AbortSignal
}

const WATCH_OPTIONS = new Set(['signal'])

/** What {@link watch} answers: an async iterator of snapshots, to use with `for await`. */
export interface JobWatch<Result = unknown> extends AsyncIterableIterator<JobSnapshot<Result>> {
  /** Ends the watch now and frees what it held, as `break` in a `for await` does. */
  return(): Promise<IteratorResult<JobSnapshot<Result>, undefined>>
}

/**
 * watch follows the job of `queue` with this `id`: it yields the job as it
 * is now, then again each time it changes — its state, attempt, `ahead`,
 * progress, error — and ends after yielding an ended state (`done`,
 * `failed`, `canceled`) (JOB-11). Changes made in this process arrive at
 * once; changes made by other processes within the poll interval (50 ms),
 * found by one cheap check per connection, not per watcher. Progress set in
 * another process on this host arrives at once through its progress channel.
 *
 * A consumer that falls behind gets every change of state; of a run of
 * changes to `ahead` or progress alone it gets the latest. The queue is its
 * definition, whose result type the snapshots' `result` has, or its name
 * alone (a `result` of any JSON).
 *
 * Throws NOT_FOUND at once when the queue holds no such job (and the
 * iterator throws NOT_FOUND if the job is deleted while watched);
 * INVALID_OPTION for a bad id, queue name or option; SCHEMA_MISSING when
 * the tables were not migrated. An aborted `signal`, `break` or `return()`
 * ends it and frees everything it held.
 *
 * @example
 * for await (const job of watch(db, replies, `reply:${messageId}`, { signal })) {
 *   send({ state: job.state, ahead: job.ahead, progress: job.progress })
 * }
 */
export function watch<Q extends QueueRef>(db: SyncDatabase | PgDatabase, queue: Q, id: string, options: WatchOptions = {}): JobWatch<ResultOf<Q>> {
  const connection = connectionOf(db)
  const name = queueNameOf(queue)
  checkName(id, 'id')
  if (typeof options !== 'object' || options === null) throw new JobsError('INVALID_OPTION', `watch options: expected an object, got ${describe(options)}`)
  checkKnownOptions(options, WATCH_OPTIONS, 'watch')
  const signal = options.signal
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new JobsError('INVALID_OPTION', `signal: expected an AbortSignal, got ${describe(signal)}`)
  // The refresher reads data_version before the job is read, so a commit by another process in between is not missed.
  const watched = watchedConnection(connection)
  const found = (row: FirstRow): JobWatch<ResultOf<Q>> => {
    if (!row) {
      watched.releaseIfIdle()
      throw new JobsError('NOT_FOUND', `queue '${name}' holds no job with id '${id}'`)
    }
    return new JobWatcher<ResultOf<Q>>(watched, row.row, row.ahead, signal)
  }
  let first: FirstRow | Promise<FirstRow>
  try {
    first = connection.read((db) => readJob(db, name, id))
  } catch (error) {
    watched.releaseIfIdle()
    throw error
  }
  // On an asynchronous database the job is read as the watch starts: its first next() answers NOT_FOUND.
  return first instanceof Promise ? new StartingWatch(first.then(found, (error) => (watched.releaseIfIdle(), Promise.reject(error)))) : found(first)
}

type FirstRow = { row: SnapshotRow; ahead: number | null } | undefined

/** A watch whose job is still being read: it hands on to the watch proper once the read answers. */
class StartingWatch<Result> implements JobWatch<Result> {
  private closed = false

  constructor(private readonly started: Promise<JobWatch<Result>>) {
    // A watch dropped before its first next() still lets go of what it holds once the read answers.
    started.catch(() => {})
  }

  [Symbol.asyncIterator](): this {
    return this
  }

  async next(): Promise<IteratorResult<JobSnapshot<Result>, undefined>> {
    const watch = await this.started
    if (this.closed) {
      await watch.return()
      return { value: undefined, done: true }
    }
    return watch.next()
  }

  async return(): Promise<IteratorResult<JobSnapshot<Result>, undefined>> {
    this.closed = true
    try {
      await (await this.started).return()
    } catch {
      // The job was not found, or the read failed: there is nothing to let go of.
    }
    return { value: undefined, done: true }
  }
}

/** Watchers, and connections with a refresher, in this process. @internal for tests that check a watch frees everything. */
export function activeWatchers(): { watchers: number; connections: number } {
  let watchers = 0
  for (const watched of watchedConnections) watchers += watched.size
  return { watchers, connections: watchedConnections.size }
}

const refreshers = new WeakMap<Connection, WatchedConnection>()
const watchedConnections = new Set<WatchedConnection>()

function watchedConnection(connection: Connection): WatchedConnection {
  let watched = refreshers.get(connection)
  if (!watched) refreshers.set(connection, (watched = new WatchedConnection(connection)))
  return watched
}


/** The one refresher of a connection's watchers. */
class WatchedConnection {
  private readonly byQueue = new Map<string, Set<JobWatcher<unknown>>>()
  private readonly dirtyQueues = new Set<string>()
  private allDirty = false
  private deferred = false
  /** A refresh under way on an asynchronous connection: another one waits for it. */
  private refreshing = false
  private lastDataVersion: number | null = null
  private timer: NodeJS.Timeout | null = null
  private unsubscribe: (() => void) | null = null
  private stopListening: (() => void) | null = null
  size = 0

  constructor(readonly connection: Connection) {
    this.start()
  }

  add(watcher: JobWatcher<unknown>): void {
    let set = this.byQueue.get(watcher.queue)
    if (!set) this.byQueue.set(watcher.queue, (set = new Set()))
    set.add(watcher)
    this.size++
    this.start()
  }

  remove(watcher: JobWatcher<unknown>): void {
    const set = this.byQueue.get(watcher.queue)
    if (set?.delete(watcher)) {
      if (set.size === 0) this.byQueue.delete(watcher.queue)
      this.size--
    }
    this.releaseIfIdle()
  }

  /** With no watcher left, stops polling and listening. */
  releaseIfIdle(): void {
    if (this.size > 0) return
    if (this.timer) clearInterval(this.timer)
    this.unsubscribe?.()
    this.stopListening?.()
    this.timer = null
    this.unsubscribe = null
    this.stopListening = null
    watchedConnections.delete(this)
    refreshers.delete(this.connection)
  }

  private start(): void {
    if (this.timer) return
    watchedConnections.add(this)
    refreshers.set(this.connection, this)
    this.lastDataVersion = null
    this.poll()
    this.timer = setInterval(() => this.poll(), DEFAULT_POLL_INTERVAL_MS)
    this.unsubscribe = onJobsChanged(this.connection.key, (queue) => {
      if (!this.byQueue.has(queue)) return
      this.dirtyQueues.add(queue)
      this.refresh()
    })
    // Other processes' notices, where the dialect carries them, arrive as this process's own changes do.
    this.stopListening = listenToOthers(this.connection)
  }

  private poll(): void {
    let version: number | Promise<number>
    try {
      version = this.connection.executor.dataVersion()
    } catch (error) {
      return this.pollFailed(error)
    }
    if (version instanceof Promise) version.then((answered) => this.polled(answered), (error) => this.pollFailed(error))
    else this.polled(version)
  }

  /** The first look only takes note: the watchers' own first reads came after it. */
  private polled(version: number): void {
    const first = this.lastDataVersion === null
    if (version === this.lastDataVersion) return
    this.lastDataVersion = version
    if (first || this.size === 0) return
    this.allDirty = true
    this.refresh()
  }

  private pollFailed(error: unknown): void {
    if (!this.connection.isBusy(error)) this.failAll(error)
  }

  /** Reads every dirty watcher's job in one read transaction and hands each watcher its row. */
  private refresh(): void {
    // Inside a transaction of this connection the reads would see uncommitted rows (an enqueue that may yet roll back): wait for its end.
    if (this.connection.inTransaction()) return this.refreshLater()
    if (this.refreshing) return this.refreshLater(BUSY_RETRY_MS)
    const watchers: JobWatcher<unknown>[] = []
    for (const [queue, set] of this.byQueue) {
      if (this.allDirty || this.dirtyQueues.has(queue)) for (const watcher of set) watchers.push(watcher)
    }
    this.allDirty = false
    this.dirtyQueues.clear()
    if (watchers.length === 0) return
    let read: Watched | Promise<Watched>
    try {
      read = this.connection.read((db) => readWatched(db, watchers))
    } catch (error) {
      return this.readFailed(watchers, error)
    }
    if (!(read instanceof Promise)) return this.hand(watchers, read)
    this.refreshing = true
    read.then(
      (answered) => {
        this.refreshing = false
        this.hand(watchers, answered)
      },
      (error: unknown) => {
        this.refreshing = false
        this.readFailed(watchers, error)
      },
    )
  }

  private readFailed(watchers: readonly JobWatcher<unknown>[], error: unknown): void {
    if (!this.connection.isBusy(error)) return this.failAll(error)
    for (const watcher of watchers) this.dirtyQueues.add(watcher.queue)
    this.refreshLater(BUSY_RETRY_MS)
  }

  /** Hands each watcher its job's fresh row. */
  private hand(watchers: readonly JobWatcher<unknown>[], { rows, aheads }: Watched): void {
    for (const watcher of watchers) {
      const row = rows.get(watcher.seq)
      if (row && row.id === watcher.id && row.queue === watcher.queue) watcher.update(row, aheads.get(row.seq) ?? null)
      else watcher.fail(new JobsError('NOT_FOUND', `job '${watcher.id}' of queue '${watcher.queue}' was deleted while watched`))
    }
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
    for (const set of [...this.byQueue.values()]) for (const watcher of [...set]) watcher.fail(error)
  }
}

/** The rows of watched jobs by seq, and `ahead` of the waiting ones. */
interface Watched {
  rows: Map<number, SnapshotRow>
  aheads: Map<number, number>
}

/** The rows of the watchers' jobs in one statement, and `ahead` for the waiting ones, one walk per queue. */
function* readWatched(db: Executor, watchers: readonly JobWatcher<unknown>[]): Program<Watched> {
  const rows = new Map<number, SnapshotRow>()
  for (const row of yield* ask(db.jobGetSnapshots([...new Set(watchers.map((watcher) => watcher.seq))]))) rows.set(row.seq, row)
  const waitingByQueue = new Map<string, SnapshotRow[]>()
  for (const row of rows.values()) {
    if (row.state !== 'waiting') continue
    const list = waitingByQueue.get(row.queue)
    if (list) list.push(row)
    else waitingByQueue.set(row.queue, [row])
  }
  const aheads = new Map<number, number>()
  for (const list of waitingByQueue.values()) {
    for (const [seq, ahead] of yield* countAheadOfMany(db, list)) aheads.set(seq, ahead)
  }
  return { rows, aheads }
}

interface Buffered<Result> {
  snapshot: JobSnapshot<Result>
  /** Differs from the snapshot before it only in `ahead` or progress: a later such change may replace it. */
  minor: boolean
}

/** One watch: the job's last state, the progress subscription of its running attempt, and the snapshots not yet taken. */
class JobWatcher<Result> implements JobWatch<Result> {
  readonly seq: number
  readonly id: string
  readonly queue: string
  private row: SnapshotRow
  private ahead: number | null
  private progress: ProgressValue | undefined
  private runKey: string | null = null
  private unsubscribeProgress: (() => void) | null = null
  private readonly buffer: Buffered<Result>[] = []
  private waiting: { resolve: (result: IteratorResult<JobSnapshot<Result>, undefined>) => void; reject: (error: unknown) => void } | null = null
  private failure: { error: unknown } | null = null
  private attached = true

  constructor(
    private readonly watched: WatchedConnection,
    row: SnapshotRow,
    ahead: number | null,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.seq = row.seq
    this.id = row.id
    this.queue = row.queue
    this.row = row
    this.ahead = ahead
    if (signal?.aborted) {
      this.attached = false
      watched.remove(this as JobWatcher<unknown>)
      return
    }
    this.followRun(row)
    this.emit(false)
    if (!this.attached) return
    watched.add(this as JobWatcher<unknown>)
    signal?.addEventListener('abort', this.onAbort, { once: true })
  }

  [Symbol.asyncIterator](): this {
    return this
  }

  next(): Promise<IteratorResult<JobSnapshot<Result>, undefined>> {
    const buffered = this.buffer.shift()
    if (buffered) return Promise.resolve({ value: buffered.snapshot, done: false })
    if (this.failure) {
      const { error } = this.failure
      this.failure = null
      return Promise.reject(error)
    }
    if (!this.attached) return Promise.resolve({ value: undefined, done: true })
    if (this.waiting) return Promise.reject(new JobsError('INVALID_OPTION', 'watch: next() was called again before the previous call settled'))
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject }
    })
  }

  return(): Promise<IteratorResult<JobSnapshot<Result>, undefined>> {
    this.close()
    return Promise.resolve({ value: undefined, done: true })
  }

  /** A fresh row from the refresher. @internal */
  update(row: SnapshotRow, ahead: number | null): void {
    if (!this.attached) return
    const previous = this.row
    const previousAhead = this.ahead
    const previousProgress = this.progress?.json ?? 'null'
    this.row = row
    this.ahead = ahead
    this.followRun(row)
    const major = !sameRun(previous, row)
    if (major || previousAhead !== ahead || previousProgress !== (this.progress?.json ?? 'null')) this.emit(!major)
  }

  /** Ends the watch with an error, after the snapshots already taken. @internal */
  fail(error: unknown): void {
    if (!this.attached) return
    if (this.waiting) {
      const { reject } = this.waiting
      this.waiting = null
      reject(error)
    } else {
      this.failure = { error }
    }
    this.detach()
  }

  private readonly onAbort = (): void => this.close()

  /** Subscribes to the progress of the attempt the row says is running, and drops the previous one's. */
  private followRun(row: SnapshotRow): void {
    const key = runKeyOf(row)
    if (key === this.runKey) return
    const previous = this.unsubscribeProgress
    this.runKey = key
    this.unsubscribeProgress = null
    this.progress = undefined
    if (key !== null) {
      const onProgress = (progress: ProgressValue): void => this.progressed(key, progress)
      const local = subscribeProgress(key, onProgress)
      const channel = row.channel
      const remote = channel !== null && !isOwnChannel(channel) ? subscribeRemoteProgress(channel, key, onProgress) : null
      this.unsubscribeProgress = () => {
        local()
        remote?.()
      }
      this.progress = progressOf(key, channel)
    }
    previous?.()
  }

  private progressed(key: string, progress: ProgressValue): void {
    if (!this.attached || key !== this.runKey || progress.json === (this.progress?.json ?? 'null')) return
    this.progress = progress
    this.emit(true)
  }

  private emit(minor: boolean): void {
    const snapshot = toSnapshot<Result>(this.row, this.ahead, this.progress)
    const ended = ENDED_STATES.includes(snapshot.state as EndedState)
    if (this.waiting) {
      const { resolve } = this.waiting
      this.waiting = null
      resolve({ value: snapshot, done: false })
    } else {
      const last = this.buffer[this.buffer.length - 1]
      if (minor && last?.minor) last.snapshot = snapshot
      else this.buffer.push({ snapshot, minor })
    }
    if (ended) this.detach()
  }

  /** Ends the watch: the snapshots not yet taken are dropped. */
  private close(): void {
    this.buffer.length = 0
    this.failure = null
    this.detach()
  }

  /** Lets go of the refresher, the progress subscription and the signal; a pending next() ends. */
  private detach(): void {
    if (!this.attached) {
      this.settleWaiting()
      return
    }
    this.attached = false
    this.watched.remove(this as JobWatcher<unknown>)
    this.unsubscribeProgress?.()
    this.unsubscribeProgress = null
    this.runKey = null
    this.signal?.removeEventListener('abort', this.onAbort)
    this.settleWaiting()
  }

  private settleWaiting(): void {
    if (this.waiting && this.buffer.length === 0 && !this.failure) {
      const { resolve } = this.waiting
      this.waiting = null
      resolve({ value: undefined, done: true })
    }
  }
}

/** Whether two rows of a job show the same snapshot but for `ahead` and progress. */
function sameRun(a: SnapshotRow, b: SnapshotRow): boolean {
  return (
    same(a.state, b.state) &&
    same(a.attempts, b.attempts) &&
    same(a.maxAttempts, b.maxAttempts) &&
    same(a.runAt, b.runAt) &&
    same(a.finishedAt, b.finishedAt) &&
    same(a.error, b.error) &&
    same(a.result, b.result) &&
    same(a.grp, b.grp)
  )
}

/** Two stored values alike: blobs, which another program may have stored in any column, are read as new Buffers each time. */
function same(a: unknown, b: unknown): boolean {
  return a === b || (Buffer.isBuffer(a) && Buffer.isBuffer(b) && a.equals(b))
}
