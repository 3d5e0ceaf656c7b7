/**
 * The worker: claims jobs of one queue under leases, runs its handler, and
 * records each outcome. One linear pipeline per run — claimed, run, outcome
 * normalised (outcome.ts), end recorded (record.ts) — with the end riding in
 * the next claim's transaction, so a busy worker writes claims and ends in
 * batches.
 */
import { connectionOf, installCounters, isBusy, type SqliteConnection as Connection, type SyncDatabase } from '../dialect/sqlite/connection.js'
import { describe, toTimerMs, type Duration } from '../duration.js'
import { JobsError } from '../errors.js'
import {
  DEFAULT_LEASE_MS,
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_SLOTS,
  LEASE_RENEWALS_PER_LEASE,
  MAX_TIME_MS,
  MAINTENANCE_INTERVAL_MS,
  STOP_ABORT_GRACE_MS,
  BUSY_RETRY_MS,
  CONTENDED_GAP_MS,
  CONTENDED_LOCK_WAIT_MS,
  CONTENDED_SPELL_MS,
} from '../limits.js'
import { checkQueue, positiveInteger, positiveMs, type Queue } from '../queue/define.js'
import type { Json, JsonShape } from '../types.js'
import { jobsChanged, onJobsChanged } from '../engine/wake.js'
import { counting } from '../engine/counts.js'
import { progressChannel } from '../progress/channel.js'
import { claimJobs } from '../engine/claim.js'
import { maintainQueue } from './maintenance.js'
import { DataVersionPoller } from './poller.js'
import { ActiveRuns } from './runs.js'
import { execute } from '../engine/executor.js'
import { checkLeases, renewLeases } from '../engine/lease.js'
import { transitionFor, type Outcome } from '../engine/outcome.js'
import { newOwner } from '../engine/owner.js'
import { storeLimits } from '../engine/queue-limits.js'
import { recordEnds, type RunEndRecord } from '../engine/record.js'
import { RunContext, type Run } from '../engine/run.js'
import type { ClaimedJob } from '../dialect/index.js'
import { checkKnownOptions } from '../options.js'

/**
 * What a handler of a queue with result type `R` returns, at once or as a
 * promise: an `R`, kept as the job's result, or an outcome (`run.fail`,
 * `run.retry`, `run.snooze`). With `R` left as `Json`, any JSON value, or
 * nothing (a null result).
 */
export type HandlerResult<R> = (Json extends R ? Json | void : R) | Outcome

/** A handler: given a job's value and its run, does the work. Its return or throw decides the job's next state. */
export type Handler<T, R = Json> = (value: T, run: Run) => HandlerResult<R> | Promise<HandlerResult<R>>

/**
 * What `work` and `drain` accept as a handler's answer `A`: as for
 * {@link HandlerResult}, with `A` checked by {@link JsonShape} when `R` is
 * left as `Json`, so that a handler may return a value typed by an interface.
 */
export type HandlerAnswer<A, R> = Json extends R ? JsonShape<A> | Outcome | void : R | Outcome

/** The options of {@link work}. */
export interface WorkOptions {
  /** Runs at once in this worker. Defaults to 10. */
  slots?: number
  /** How often to look for jobs written by other processes. Defaults to `'50ms'`. */
  pollInterval?: Duration
  /** How long a claim holds without renewal; renewed every third of it. Defaults to `'30s'`. */
  lease?: Duration
  /** Where errors the worker cannot hand to a job go (a disk error, say). Defaults to `console.error`. */
  onError?: (error: unknown) => void
  /** The clock, in ms since the epoch. Defaults to `Date.now`. @internal for tests of clock jumps. */
  clock?: () => number
}

/** A running worker. */
export interface Worker {
  /** The queue it works. */
  readonly queue: string
  /** Runs under way in this worker now. */
  readonly running: number
  /**
   * Stops claiming at once and waits for the runs under way (JOB-15). With a
   * `timeout`, aborts their signals when it passes, waits a moment for them
   * to settle, and ends the rest as failed attempts: either way no lease is
   * left behind. Safe to call more than once.
   */
  stop(options?: { timeout?: Duration }): Promise<void>
}

const WORK_OPTIONS = new Set(['slots', 'pollInterval', 'lease', 'onError', 'clock'])

/**
 * work starts a worker on `queue` at once. It claims in claim order, holds
 * each run under a lease it renews, and records each outcome as the job's next
 * state (JOB-08): done, failed, or scheduled again after its backoff.
 * Jobs added in this process wake it at once; jobs added by other processes
 * within `pollInterval` (it watches `PRAGMA data_version`, about 2 µs a look).
 * SQLite's busy errors are retried inside, never surfaced.
 *
 * The queue's limits are one value across every process (JOB-19): in its
 * first transaction the worker stores its definition's `concurrency` in
 * `jobs_queue`, replacing what a worker started earlier stored (the last
 * started wins, as in a rolling deploy; when they differ it warns once,
 * through `console.warn`, naming both), and every claim of every worker
 * follows the stored value, whatever its own definition says.
 *
 * The handler gets the job's value typed as the queue's `T`, and must
 * return the queue's result type `R` or an outcome, at once or as a
 * promise; for a queue with no result type, any JSON value or nothing. A
 * result that is not JSON does not compile (a Date, say); what the compiler
 * cannot see fails the attempt with INVALID_VALUE.
 *
 * Throws INVALID_OPTION for a bad option, a handler that is not a function
 * or a queue that defineQueue did not make; SCHEMA_MISSING when the tables
 * were not migrated.
 *
 * @example
 * const worker = work(db, replies, async ({ messageId }, run) => {
 *   const answer = await run.step('answer', () => model.answer(messageId, { signal: run.signal }))
 *   db.insert(messages).values({ text: answer }).run()
 *   return { text: answer }
 * })
 * process.on('SIGTERM', () => worker.stop({ timeout: '10s' }))
 */
export function work<T, R, A extends HandlerAnswer<A, R>>(
  db: SyncDatabase,
  queue: Queue<T, R>,
  handler: (value: NoInfer<T>, run: Run) => A | Promise<A>,
  options: WorkOptions = {},
): Worker {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw new JobsError('INVALID_OPTION', `options: expected an object, got ${describe(options)}`)
  checkKnownOptions(options, WORK_OPTIONS, 'work')
  const definition = checkQueue(queue)
  if (typeof handler !== 'function') throw new JobsError('INVALID_OPTION', `handler: expected a function, got ${describe(handler)}`)
  if (options.onError !== undefined && typeof options.onError !== 'function') throw new JobsError('INVALID_OPTION', `onError: expected a function, got ${describe(options.onError)}`)
  const settings: Settings = {
    slots: positiveInteger(options.slots, 'slots', DEFAULT_SLOTS),
    pollIntervalMs: options.pollInterval === undefined ? DEFAULT_POLL_INTERVAL_MS : positiveMs(options.pollInterval, 'pollInterval'),
    leaseMs: options.lease === undefined ? DEFAULT_LEASE_MS : positiveMs(options.lease, 'lease'),
    onError: options.onError ?? ((error) => console.error('drizzle-jobs worker:', error)),
    clock: options.clock === undefined ? Date.now : clockOption(options.clock),
  }
  const connection = connectionOf(db)
  installCounters(connection.client)
  return new QueueWorker(connection, definition, handler as Handler<unknown>, settings)
}

/** A clock must be a function that answers ms since the epoch: asked once here, so that a bad one is refused before it runs anything. */
function clockOption(clock: unknown): () => number {
  if (typeof clock !== 'function') throw new JobsError('INVALID_OPTION', `clock: expected a function that answers ms since the epoch, got ${describe(clock)}`)
  let now: unknown
  try {
    now = clock()
  } catch (error) {
    throw new JobsError('INVALID_OPTION', `clock: it threw when asked the time (${(error as Error)?.message ?? String(error)})`, { cause: error })
  }
  if (typeof now !== 'number' || !Number.isFinite(now) || Math.abs(now) > MAX_TIME_MS) {
    throw new JobsError('INVALID_OPTION', `clock: expected it to answer ms since the epoch, got ${describe(now)}`)
  }
  return clock as () => number
}

interface Settings {
  slots: number
  pollIntervalMs: number
  leaseMs: number
  onError: (error: unknown) => void
  clock: () => number
}


class QueueWorker implements Worker {
  readonly queue: string
  private readonly owner = newOwner()
  private readonly active: ActiveRuns
  private readonly pendingEnds: RunEndRecord[] = []
  private readonly timers: NodeJS.Timeout[] = []
  private readonly unsubscribe: () => void
  private flushQueued = false
  /** Until when (performance.now() ms) flushes leave a gap, because taking the lock had to wait. */
  private contendedUntil = 0
  /** `PRAGMA data_version` inside the last flush's transaction: it moves only when other connections write. */
  private versionAtLastFlush = -1
  private nextScheduledTimer: NodeJS.Timeout | null = null
  private readonly poller: DataVersionPoller
  /** Whether this worker's first transaction stored its definition's limits as the queue's (JOB-19). */
  private limitsStored = false
  private stopping = false
  private stopped: Promise<void> | null = null

  constructor(
    private readonly connection: Connection,
    private readonly definition: Queue,
    private readonly handler: Handler<unknown>,
    private readonly settings: Settings,
  ) {
    this.queue = definition.name
    this.active = new ActiveRuns(connection, this.owner, this.queue)
    this.poller = new DataVersionPoller(connection)
    this.unsubscribe = onJobsChanged(connection.key, (queue, kind) => {
      if (kind === 'revoked') this.checkLeases()
      else if (queue === this.queue && kind !== 'claimed') this.scheduleFlush()
    })
    this.timers.push(
      setInterval(() => this.pollForOtherWriters(), settings.pollIntervalMs),
      setInterval(() => this.renewLeases(), Math.max(1, Math.floor(settings.leaseMs / LEASE_RENEWALS_PER_LEASE))),
      setInterval(() => this.maintain(), MAINTENANCE_INTERVAL_MS),
    )
    this.maintain()
    this.scheduleFlush()
  }

  get running(): number {
    return this.active.size
  }

  stop(options: { timeout?: Duration } = {}): Promise<void> {
    if (!this.stopped) {
      const timeoutMs = options.timeout === undefined ? null : toTimerMs(options.timeout, 'stop timeout')
      this.stopping = true
      this.stopped = this.shutDown(timeoutMs)
    }
    return this.stopped
  }

  private async shutDown(timeoutMs: number | null): Promise<void> {
    this.unsubscribe()
    if (this.nextScheduledTimer) clearTimeout(this.nextScheduledTimer)
    if (timeoutMs !== null && !(await this.active.settledWithin(timeoutMs))) {
      const reason = new JobsError('TIMEOUT', `the worker stopped and gave up waiting for this run after ${timeoutMs} ms`)
      for (const run of this.active.values()) run.abort(reason)
      await this.active.settledWithin(STOP_ABORT_GRACE_MS)
      const now = this.settings.clock()
      for (const run of this.active.endAll()) {
        const transition = transitionFor(this.definition, { attempt: run.attempt, maxAttempts: run.attempts }, { kind: 'abandoned', why: 'the worker stopped before the run ended', how: 'stopped' }, now)
        this.pendingEnds.push({ seq: run.seq, owner: this.owner, attempt: run.attempt, transition })
        run.loseLease()
      }
    } else {
      await this.active.settledWithin(null)
    }
    while (this.pendingEnds.length > 0) {
      this.flush()
      if (this.pendingEnds.length > 0) await sleep(BUSY_RETRY_MS)
    }
    for (const timer of this.timers) clearInterval(timer)
  }

  /**
   * Flushes soon: on the next turn of the event loop, or, while other writers contend for the lock,
   * after a short gap. SQLite's busy handler lets a waiting writer retry only now and then, so a
   * worker that takes the lock back to back would starve the app's own transactions.
   */
  private scheduleFlush(): void {
    if (this.flushQueued) return
    this.flushQueued = true
    const run = () => {
      this.flushQueued = false
      this.flush()
    }
    if (performance.now() < this.contendedUntil) setTimeout(run, CONTENDED_GAP_MS)
    else setImmediate(run)
  }

  /**
   * One write transaction: store the limits (the first time), record the ends waiting, then claim for
   * the free slots. The claim passes over the jobs whose ends it has just written (a retry whose backoff
   * has already passed): their new state commits first, for watchers to see, and the flush that the
   * end's notice schedules claims them again.
   */
  private flush(): void {
    const free = this.stopping || !this.active.mayClaim ? 0 : this.settings.slots - this.active.size
    const ends = this.pendingEnds.splice(0)
    const storing = !this.limitsStored && !this.stopping
    if (ends.length === 0 && !storing && (free <= 0 || !this.mightHaveWork())) return
    if (this.connection.inTransaction()) {
      this.pendingEnds.unshift(...ends)
      setTimeout(() => this.scheduleFlush(), BUSY_RETRY_MS)
      return
    }
    const now = this.settings.clock()
    let claimed: ClaimedJob[]
    let othersWrote = false
    let replaced = null as string | null
    try {
      const written = this.connection.immediateTimed(() => {
        const version = this.connection.executor.dataVersion()
        othersWrote = version !== this.versionAtLastFlush
        this.versionAtLastFlush = version
        if (storing) replaced = storeLimits(this.connection, this.definition, now)
        return counting(this.connection, this.queue, (moved) => {
          const landed = recordEnds(this.connection, ends, moved)
          if (free <= 0) return []
          const passOver = new Set(ends.filter((end, i) => landed[i] && end.transition.state === 'scheduled').map((end) => end.seq))
          const request = { limit: free, idle: this.active.size === 0, owner: this.owner, leaseMs: this.settings.leaseMs, now, channel: progressChannel(), passOver }
          return claimJobs(this.connection, this.definition, request, moved)
        })
      })
      claimed = written.value
      // Contended: the lock took a while, and another connection did write since our last transaction
      // (a pause of this process alone, a GC say, must not slow it down).
      if (othersWrote && written.lockWaitMs > CONTENDED_LOCK_WAIT_MS) this.contendedUntil = performance.now() + CONTENDED_SPELL_MS
    } catch (error) {
      this.pendingEnds.unshift(...ends)
      if (!isBusy(error)) this.settings.onError(error)
      setTimeout(() => this.scheduleFlush(), isBusy(error) ? BUSY_RETRY_MS : MAINTENANCE_INTERVAL_MS)
      return
    }
    if (storing) {
      this.limitsStored = true
      if (replaced !== null) console.warn(replaced)
    }
    if (ends.length > 0) jobsChanged(this.connection.key, this.queue, 'ended')
    if (claimed.length > 0) jobsChanged(this.connection.key, this.queue, 'claimed')
    for (const job of claimed) this.start(job)
    if (claimed.length > 0 && claimed.length === free) this.scheduleFlush()
    else if (free > 0) this.mightHaveWork()
  }

  /** A read before taking the write lock: is anything claimable now? Arms a timer for the next scheduled job either way. */
  private mightHaveWork(): boolean {
    const counts = this.connection.executor.queueClaimable(this.queue)
    if (!counts || counts.paused) return false
    // The stored limit, not this process's definition: another worker's start may have replaced it (JOB-19).
    if (counts.concurrency !== null && counts.running >= counts.concurrency) return false
    if (counts.waiting > 0) return true
    if (counts.nextScheduled === null) return false
    const wait = counts.nextScheduled - this.settings.clock()
    if (wait <= 0) return true
    this.wakeAt(wait)
    return false
  }

  private wakeAt(wait: number): void {
    if (this.nextScheduledTimer) clearTimeout(this.nextScheduledTimer)
    this.nextScheduledTimer = setTimeout(() => {
      this.nextScheduledTimer = null
      this.scheduleFlush()
    }, Math.min(wait + 1, MAINTENANCE_INTERVAL_MS * 60))
  }

  private start(job: ClaimedJob): void {
    const run = this.active.start(job)
    void this.execute(run, job.value)
  }

  /** Runs one run through the executor, then queues its end for the next flush. */
  private async execute(run: RunContext, valueText: string): Promise<void> {
    const transition = await execute(this.definition, run, valueText, this.handler, this.settings.clock)
    if (!this.active.end(run)) return
    if (transition) this.pendingEnds.push({ seq: run.seq, owner: this.owner, attempt: run.attempt, transition })
    this.scheduleFlush()
  }

  private pollForOtherWriters(): void {
    if (this.stopping || !this.poller.othersWrote()) return
    this.checkLeases()
    this.scheduleFlush()
  }

  /** Aborts runs whose lease another writer took away: canceled, or taken back as abandoned. */
  private checkLeases(): void {
    if (this.active.size > 0) checkLeases(this.connection, this.owner, this.active.values())
  }

  /** Renews this worker's leases; a run whose lease was not renewed has lost it, and is aborted. */
  private renewLeases(): void {
    if (this.active.size === 0 || this.connection.inTransaction()) return
    try {
      renewLeases(this.connection, this.owner, this.active.values(), this.settings.clock() + this.settings.leaseMs)
    } catch (error) {
      if (!isBusy(error)) this.settings.onError(error)
    }
  }

  /** Takes back abandoned leases, ends runs that hold none, and prunes ended jobs; each reads first and takes the write lock only when there is work. */
  private maintain(): void {
    if (this.stopping || this.connection.inTransaction()) return
    try {
      maintainQueue(this.connection, this.definition, this.owner, this.settings.clock())
    } catch (error) {
      if (!isBusy(error)) this.settings.onError(error)
    }
    this.scheduleFlush()
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
