/**
 * Watching jobs: `watch` yields a job's snapshot now and on every change.
 *
 * All the watchers of one connection share one refresher (refresher.ts),
 * which hands each watcher its job's fresh row, and `ahead` when its count is
 * due. Progress needs no poll: watchers subscribe to the running attempt, in
 * this process, through its process's channel (SQLite), or by notice
 * (PostgreSQL). A snapshot is built when the consumer takes it.
 */
import { connectionOf, type Database } from '../dialect/open.js'
import { andThen, whenAnswered, type Answer, type Connection, type SnapshotRow } from '../dialect/index.js'
import { isOwnOwner } from '../engine/owner.js'
import { describe, toTimerMs, type Duration } from '../duration.js'
import { JobsError } from '../errors.js'
import { lookupText } from '../lookup.js'
import { DEFAULT_AHEAD_INTERVAL_MS } from '../limits.js'
import { isOwnChannel } from '../progress/channel.js'
import { subscribeNoticeProgress } from '../progress/notices.js'
import { subscribeRemoteProgress } from '../progress/remote.js'
import { ENDED_STATES, type EndedState, type JobSnapshot } from '../types.js'
import { addProgressListener, removeProgressListener, type ProgressValue } from '../progress/store.js'
import { queueNameOf, type QueueRef, type ResultOf } from './ref.js'
import { progressOf, readJob, runKeyOf, sameRun, toSnapshot } from './read.js'
import { watchedConnection, type WatchedConnection } from './refresher.js'
import type { Watcher } from './watched-queue.js'
import { checkKnownOptions } from '../options.js'

/** The options of {@link watch}. */
export interface WatchOptions {
  /** Ends the watch when aborted: the iterator returns, and everything it held is freed. */
  signal?: AbortSignal
  /**
   * The least time between two snapshots that change only `ahead`, which moves with every claim ahead of
   * the job: a fresh count comes at most this often, and the latest one within it. Every other change is
   * yielded as it happens. `0` yields every change of `ahead`. Defaults to `'250ms'`.
   */
  aheadInterval?: Duration
}

const WATCH_OPTIONS = new Set(['signal', 'aheadInterval'])

/** What {@link watch} answers: an async iterator of snapshots, to use with `for await`. */
export interface JobWatch<Result = unknown> extends AsyncIterableIterator<JobSnapshot<Result>> {
  /** Ends the watch now and frees what it held, as `break` in a `for await` does. */
  return(): Promise<IteratorResult<JobSnapshot<Result>, undefined>>
}

/**
 * watch follows the job of `queue` with this `id`: it yields the job as it
 * is now, then again each time it changes — its state, attempt, progress,
 * error, result, what its parked run waits for — and ends after yielding an
 * ended state (`done`, `failed`, `canceled`) (JOB-11). Changes made in this
 * process arrive at once; changes made by other processes within the poll
 * interval (50 ms), found by one cheap check per connection, not per watcher
 * (on PostgreSQL, as their notices arrive). Progress set in another process arrives at once: on
 * SQLite through its progress channel (same host), on PostgreSQL by notice
 * from any host, at most one per run per 50 ms, its latest value always.
 *
 * `ahead` alone, which moves with every claim ahead of the job, is counted
 * again at most once per `aheadInterval` (250 ms by default), for all the
 * waiting watchers of a queue in one walk down its line; a snapshot whose
 * state or attempt changed carries a fresh count. The first snapshot of a
 * waiting job has a fresh count; a job that is not waiting has `ahead` null.
 *
 * A consumer that falls behind gets every change but `ahead`, in order; of a
 * run of changes to `ahead` alone it gets the latest. The queue is its
 * definition, whose result type the snapshots' `result` has, or its name
 * alone (a `result` of any JSON).
 *
 * Throws NOT_FOUND at once when the queue holds no such job (and the
 * iterator throws NOT_FOUND if the job is deleted while watched);
 * INVALID_OPTION for a bad id, queue name or option (an `aheadInterval`
 * that is not a duration, say); SCHEMA_MISSING when the tables were not
 * migrated. An aborted `signal`, `break` or `return()` ends it and frees
 * everything it held.
 *
 * @example
 * for await (const job of watch(db, replies, `reply:${messageId}`, { signal })) {
 *   send({ state: job.state, ahead: job.ahead, progress: job.progress })
 * }
 */
export function watch<Q extends QueueRef>(db: Database, queue: Q, id: string, options: WatchOptions = {}): JobWatch<ResultOf<Q>> {
  // On an asynchronous database the job is read as the watch starts: its first next() answers NOT_FOUND.
  return whenAnswered(
    startWatch(db, queue, id, options),
    (watching) => watching,
    (later) => new StartingWatch(later),
  )
}

/**
 * The watch of {@link watch}, once its job was read: at once where the read answers at once (throwing NOT_FOUND
 * there), else a promise of it (which rejects NOT_FOUND), for a caller that must know before it goes on whether
 * the job is there (jobEvents' 404). Throws as {@link watch} does. @internal
 */
export function startWatch<Q extends QueueRef>(
  db: Database,
  queue: Q,
  id: string,
  options: WatchOptions = {},
): Answer<JobWatch<ResultOf<Q>>> {
  const connection = connectionOf(db)
  const name = queueNameOf(queue)
  lookupText(id, 'id')
  if (typeof options !== 'object' || options === null)
    throw new JobsError('INVALID_OPTION', `watch options: expected an object, got ${describe(options)}`)
  checkKnownOptions(options, WATCH_OPTIONS, 'watch')
  const signal = options.signal
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new JobsError('INVALID_OPTION', `signal: expected an AbortSignal, got ${describe(signal)}`)
  const aheadIntervalMs =
    options.aheadInterval === undefined ? DEFAULT_AHEAD_INTERVAL_MS : toTimerMs(options.aheadInterval, 'aheadInterval')
  // The refresher reads data_version before the job is read, so a commit by another process in between is not missed.
  const watched = watchedConnection(connection)
  // Taken before the read: a change of the line while it is under way makes its count stale.
  const lineMoves = watched.lineMoves
  const found = (row: FirstRow): JobWatch<ResultOf<Q>> => {
    if (!row) {
      watched.releaseIfIdle()
      throw new JobsError('NOT_FOUND', `queue '${name}' holds no job with id '${id}'`)
    }
    return new JobWatcher<ResultOf<Q>>(watched, row.row, row.ahead, { lineMoves, aheadIntervalMs, signal })
  }
  let first: Answer<FirstRow>
  try {
    first = connection.read((db) => readJob(db, name, id))
  } catch (error) {
    watched.releaseIfIdle()
    throw error
  }
  return andThen(first, found, (error): never => {
    watched.releaseIfIdle()
    throw error
  })
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

/** A change not yet taken by the consumer: its snapshot is built when taken. */
interface Pending {
  row: SnapshotRow
  ahead: number | null
  progress: ProgressValue | undefined
  /** Differs from the change before it only in `ahead`: a later such change may replace it. */
  aheadOnly: boolean
}

/** How a watch was started. */
interface Start {
  /** The refresher's count of line moves before the first read, which counted `ahead`. */
  lineMoves: number
  aheadIntervalMs: number
  signal: AbortSignal | undefined
}

/** One watch: the job's last state, the progress subscription of its running attempt, and the changes not yet taken. */
class JobWatcher<Result> implements JobWatch<Result>, Watcher {
  readonly seq: number
  readonly id: string
  readonly queue: string
  readonly aheadIntervalMs: number
  /** The row last handed to it. @internal */
  row: SnapshotRow
  private ahead: number | null
  private progress: ProgressValue | undefined
  private runKey: string | null = null
  /** Ends the subscription to the progress of a run of another process, if the watch follows one. */
  private unsubscribeRemote: (() => void) | null = null
  private readonly buffer: Pending[] = []
  /** The consumer's pending next(), if any: its resolve and reject, kept apart so that a next() allocates no holder for them. */
  private resolveNext: ((result: IteratorResult<JobSnapshot<Result>, undefined>) => void) | null = null
  private rejectNext: ((error: unknown) => void) | null = null
  private failure: { error: unknown } | null = null
  private attached = true
  private readonly signal: AbortSignal | undefined

  constructor(
    private readonly watched: WatchedConnection,
    row: SnapshotRow,
    ahead: number | null,
    start: Start,
  ) {
    this.seq = row.seq
    this.id = row.id
    this.queue = row.queue
    this.aheadIntervalMs = start.aheadIntervalMs
    this.signal = start.signal
    this.row = row
    this.ahead = ahead
    if (this.signal?.aborted) {
      this.attached = false
      watched.remove(this)
      return
    }
    this.followRun(row)
    this.emit(false)
    if (!this.attached) return
    watched.add(this, performance.now(), start.lineMoves)
    this.signal?.addEventListener('abort', this.onAbort, { once: true })
  }

  [Symbol.asyncIterator](): this {
    return this
  }

  next(): Promise<IteratorResult<JobSnapshot<Result>, undefined>> {
    const pending = this.buffer.shift()
    if (pending) return Promise.resolve({ value: snapshotOf<Result>(pending), done: false })
    if (this.failure) {
      const { error } = this.failure
      this.failure = null
      return Promise.reject(error)
    }
    if (!this.attached) return Promise.resolve({ value: undefined, done: true })
    if (this.resolveNext)
      return Promise.reject(new JobsError('INVALID_OPTION', 'watch: next() was called again before the previous call settled'))
    return new Promise((resolve, reject) => {
      this.resolveNext = resolve
      this.rejectNext = reject
    })
  }

  return(): Promise<IteratorResult<JobSnapshot<Result>, undefined>> {
    this.close()
    return Promise.resolve({ value: undefined, done: true })
  }

  /** A fresh row from the refresher, with `ahead` when it was counted (undefined: the last count stands). @internal */
  update(row: SnapshotRow, ahead: number | null | undefined): void {
    if (!this.attached) return
    // The same row, counted again: only `ahead` may have changed.
    if (row === this.row) {
      if (ahead !== undefined && ahead !== this.ahead) {
        this.ahead = ahead
        this.emit(true)
      }
      return
    }
    const previous = this.row
    const previousAhead = this.ahead
    const previousProgress = this.progress?.json ?? 'null'
    this.row = row
    if (ahead !== undefined) this.ahead = ahead
    this.followRun(row)
    if (!sameRun(previous, row) || previousProgress !== (this.progress?.json ?? 'null')) this.emit(false)
    else if (previousAhead !== this.ahead) this.emit(true)
  }

  /** Ends the watch with an error, after the snapshots already taken. @internal */
  fail(error: unknown): void {
    if (!this.attached) return
    const reject = this.rejectNext
    if (reject) {
      this.resolveNext = this.rejectNext = null
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
    const previousKey = this.runKey
    const previousRemote = this.unsubscribeRemote
    this.runKey = key
    this.unsubscribeRemote = null
    this.progress = undefined
    if (key !== null) {
      // One listener for every run the watch follows: it is told which run progressed.
      addProgressListener(key, this.onProgress)
      this.unsubscribeRemote = subscribeOthersProgress(this.watched.connection, row, key, (progress) => this.progressed(key, progress))
      this.progress = progressOf(this.watched.connection, key, row)
    }
    if (previousKey !== null) removeProgressListener(previousKey, this.onProgress)
    previousRemote?.()
  }

  private readonly onProgress = (progress: ProgressValue, key: string): void => this.progressed(key, progress)

  private progressed(key: string, progress: ProgressValue): void {
    if (!this.attached || key !== this.runKey || progress.json === (this.progress?.json ?? 'null')) return
    this.progress = progress
    this.emit(false)
  }

  /** Hands the change to the consumer waiting for it, or keeps it until taken. */
  private emit(aheadOnly: boolean): void {
    const resolve = this.resolveNext
    if (resolve) {
      this.resolveNext = this.rejectNext = null
      resolve({ value: toSnapshot<Result>(this.row, this.ahead, this.progress), done: false })
    } else {
      this.keep({ row: this.row, ahead: this.ahead, progress: this.progress, aheadOnly })
    }
    if (ENDED_STATES.includes(this.row.state as EndedState)) this.detach()
  }

  /** Keeps a change until the consumer takes it: one of `ahead` alone replaces such a change before it. */
  private keep(pending: Pending): void {
    if (pending.aheadOnly && this.buffer[this.buffer.length - 1]?.aheadOnly) this.buffer[this.buffer.length - 1] = pending
    else this.buffer.push(pending)
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
    this.watched.remove(this)
    if (this.runKey !== null) removeProgressListener(this.runKey, this.onProgress)
    this.unsubscribeRemote?.()
    this.unsubscribeRemote = null
    this.runKey = null
    this.signal?.removeEventListener('abort', this.onAbort)
    this.settleWaiting()
  }

  private settleWaiting(): void {
    const resolve = this.resolveNext
    if (resolve && this.buffer.length === 0 && !this.failure) {
      this.resolveNext = this.rejectNext = null
      resolve({ value: undefined, done: true })
    }
  }
}

/**
 * Subscribes to the progress of a run of another process: by notice where the database carries it (PostgreSQL,
 * on any host), else through the channel its lease names (SQLite, on this host). Null for a run of this process,
 * whose progress the watcher reads from memory.
 */
function subscribeOthersProgress(
  connection: Connection,
  row: SnapshotRow,
  key: string,
  listener: (progress: ProgressValue) => void,
): (() => void) | null {
  if (connection.progressNotices)
    return row.owner === null || isOwnOwner(row.owner) ? null : subscribeNoticeProgress(connection, key, listener)
  const channel = row.channel
  return channel !== null && !isOwnChannel(channel) ? subscribeRemoteProgress(channel, key, listener) : null
}

function snapshotOf<Result>({ row, ahead, progress }: Pending): JobSnapshot<Result> {
  return toSnapshot<Result>(row, ahead, progress)
}
