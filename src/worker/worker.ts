/**
 * The worker: claims jobs of one queue under leases, runs its handler, and
 * records each outcome. One linear pipeline per run — claimed, run, outcome
 * normalised (outcome.ts), end recorded (record.ts) — with the end riding in
 * the next claim's transaction, so a busy worker writes claims and ends in
 * batches.
 */
import { otel } from '../telemetry/api.js'
import { observeQueue, renewalMissed } from '../telemetry/metrics.js'
import { connectionOf, type Database } from '../dialect/open.js'
import { whenAnswered, type Answer, type Connection } from '../dialect/index.js'
import { describe, toTimerMs, type Duration } from '../duration.js'
import { isJobsError, JobsError } from '../errors.js'
import {
  DEFAULT_LEASE_MS,
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_SLOTS,
  LEASE_RENEWALS_PER_LEASE,
  MAX_TIME_MS,
  MAINTENANCE_INTERVAL_MS,
  STOP_ABORT_GRACE_MS,
  BUSY_RETRY_MS,
  BUSY_BACKOFF_FIRST_MS,
  BUSY_BACKOFF_MAX_MS,
} from '../limits.js'
import { checkQueue, positiveInteger, positiveMs, type Queue } from '../queue/define.js'
import type { Json, JsonShape } from '../types.js'
import { listenToOthers, onJobsChanged } from '../engine/wake.js'
import { maintainQueue } from './maintenance.js'
import { DataVersionPoller } from './poller.js'
import { ActiveRuns } from './runs.js'
import { Flusher } from './flush.js'
import { progressChannelFor } from '../progress/channel.js'
import { execute } from '../engine/executor.js'
import { retryWhileBusy } from '../engine/busy.js'
import { checkLeases, LeaseClock, renewLeases } from '../engine/lease.js'
import { handedBack, transitionFor, type Outcome } from '../engine/outcome.js'
import { newOwner } from '../engine/owner.js'
import type { RunContext, Run } from '../engine/run.js'
import type { ClaimedJob } from '../dialect/index.js'
import { checkKnownOptions } from '../options.js'
import { ScheduleTimer } from './schedule-timer.js'
import { batched, batchSettings, type BatchHandler, type BatchOptions } from './batch.js'
import { onSchedulesChanged } from '../engine/schedules.js'

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
  /**
   * On PostgreSQL, whether the worker is woken by other processes' notices (LISTEN/NOTIFY, on a connection
   * of the pool kept for it) or only finds their work by polling every `pollInterval`: set it to false
   * behind a pooler in transaction mode, where LISTEN does not work. Defaults to true; SQLite has nothing
   * to listen to, and polls its data version.
   */
  listen?: boolean
  /** Where errors the worker cannot hand to a job go (a disk error, say). Defaults to `console.error`. */
  onError?: (error: unknown) => void
  /** The clock, in ms since the epoch. Defaults to `Date.now`. @internal for tests of clock jumps. */
  clock?: () => number
}

/** The options of {@link work} with a batch handler: `batch` says how many jobs a call gets, and how long a batch waits to fill. */
export interface BatchWorkOptions extends WorkOptions {
  batch: BatchOptions
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

const WORK_OPTIONS = new Set(['slots', 'pollInterval', 'lease', 'listen', 'onError', 'clock', 'batch'])

/**
 * work starts a worker on `queue` at once. It claims in claim order, holds
 * each run under a lease it renews, and records each outcome as the job's next
 * state (JOB-08): done, failed, or scheduled again after its backoff.
 * Jobs added in this process wake it at once; jobs added by other processes
 * within `pollInterval` (it watches `PRAGMA data_version`, about 2 µs a look).
 * SQLite's busy errors are retried inside, never surfaced.
 *
 * The queue's limits are one value across every process (JOB-19): in its
 * first transaction the worker stores its definition's `concurrency` and
 * `rate` in `jobs_queue`, replacing what a worker started earlier stored (the last
 * started wins, as in a rolling deploy; when they differ it warns once,
 * through `console.warn`, naming both), and every claim of every worker
 * follows the stored value, whatever its own definition says. When the
 * stored rate holds its claims back (JOB-22), the worker sleeps until the
 * rate's window opens and claims then, whatever its `pollInterval`.
 *
 * The handler gets the job's value typed as the queue's `T`, and must
 * return the queue's result type `R` or an outcome, at once or as a
 * promise; for a queue with no result type, any JSON value or nothing. A
 * result that is not JSON does not compile (a Date, say); what the compiler
 * cannot see fails the attempt with INVALID_VALUE.
 *
 * Throws INVALID_OPTION for a bad option, a handler that is not a function
 * or a queue that defineQueue did not make; SCHEMA_MISSING when the tables
 * were not migrated. A database whose calls answer promises (PostgreSQL,
 * libsql) is checked as the worker starts: its SCHEMA_MISSING goes to
 * `onError`, once, and the worker stops before it claims or writes anything.
 *
 * @example
 * const worker = work(db, replies, async ({ messageId }, run) => {
 *   const answer = await run.step('answer', () => model.answer(messageId, { signal: run.signal }))
 *   db.insert(messages).values({ text: answer }).run()
 *   return { text: answer }
 * })
 * process.on('SIGTERM', () => worker.stop({ timeout: '10s' }))
 */
export function work<T, R>(db: Database, queue: Queue<T, R>, handler: BatchHandler<NoInfer<T>, R>, options: BatchWorkOptions): Worker
export function work<T, R, A extends HandlerAnswer<A, R>>(
  db: Database,
  queue: Queue<T, R>,
  handler: (value: NoInfer<T>, run: Run) => A | Promise<A>,
  options?: WorkOptions,
): Worker
export function work(
  db: Database,
  queue: Queue,
  handler: BatchHandler<unknown, unknown> | Handler<unknown>,
  options: WorkOptions & { batch?: BatchOptions } = {},
): Worker {
  if (typeof options !== 'object' || options === null || Array.isArray(options))
    throw new JobsError('INVALID_OPTION', `options: expected an object, got ${describe(options)}`)
  checkKnownOptions(options, WORK_OPTIONS, 'work')
  const definition = checkQueue(queue)
  if (typeof handler !== 'function') throw new JobsError('INVALID_OPTION', `handler: expected a function, got ${describe(handler)}`)
  if (options.onError !== undefined && typeof options.onError !== 'function')
    throw new JobsError('INVALID_OPTION', `onError: expected a function, got ${describe(options.onError)}`)
  if (options.listen !== undefined && typeof options.listen !== 'boolean')
    throw new JobsError('INVALID_OPTION', `listen: expected true or false, got ${describe(options.listen)}`)
  const batch = options.batch === undefined ? null : batchSettings(options.batch)
  const settings: Settings = {
    slots: positiveInteger(options.slots, 'slots', batch?.size ?? DEFAULT_SLOTS),
    pollIntervalMs: options.pollInterval === undefined ? DEFAULT_POLL_INTERVAL_MS : positiveMs(options.pollInterval, 'pollInterval'),
    leaseMs: options.lease === undefined ? DEFAULT_LEASE_MS : positiveMs(options.lease, 'lease'),
    onError: options.onError ?? ((error) => console.error('drizzle-jobs worker:', error)),
    listen: options.listen ?? true,
    clock: options.clock === undefined ? Date.now : clockOption(options.clock),
  }
  const connection = connectionOf(db)
  // A synchronous database was checked as it was taken (SCHEMA_MISSING is thrown there); an asynchronous one checks
  // its tables now, and the worker starts once they are found.
  // A batch handler is called once per batch of runs; each run is the executor's as any other.
  const perRun =
    batch === null ? (handler as Handler<unknown>) : (batched(handler as BatchHandler<unknown, unknown>, batch) as Handler<unknown>)
  return new QueueWorker(connection, definition, perRun, settings, connection.prepareWrites())
}

/** A clock must be a function that answers ms since the epoch: asked once here, so that a bad one is refused before it runs anything. */
function clockOption(clock: unknown): () => number {
  if (typeof clock !== 'function')
    throw new JobsError('INVALID_OPTION', `clock: expected a function that answers ms since the epoch, got ${describe(clock)}`)
  let now: unknown
  try {
    now = clock()
  } catch (error) {
    throw new JobsError('INVALID_OPTION', `clock: it threw when asked the time (${(error as Error)?.message ?? String(error)})`, {
      cause: error,
    })
  }
  if (typeof now !== 'number' || !Number.isFinite(now) || Math.abs(now) > MAX_TIME_MS) {
    throw new JobsError('INVALID_OPTION', `clock: expected it to answer ms since the epoch, got ${describe(now)}`)
  }
  return clock as () => number
}

interface Settings {
  slots: number
  listen: boolean
  pollIntervalMs: number
  leaseMs: number
  onError: (error: unknown) => void
  clock: () => number
}

class QueueWorker implements Worker {
  readonly queue: string
  private readonly owner = newOwner()
  private readonly active: ActiveRuns
  /** The worker's lease: its row, renewed every third of a lease while it runs jobs. */
  private readonly lease: LeaseClock
  private readonly flusher: Flusher
  private readonly timers: NodeJS.Timeout[] = []
  /** Whether the worker has started claiming: it has not while an asynchronous database checks its tables. */
  private started = false
  private unsubscribe = () => {}
  /** Lets go of other processes' notices (listenToOthers), or does nothing when the worker does not listen. */
  private stopListening = () => {}
  /** Made as the worker starts claiming, its tables found: its first look at the data version is taken then. */
  private poller: DataVersionPoller | null = null
  /** Adds the jobs of its queue's due schedule slots (JOB-21). */
  private readonly schedules: ScheduleTimer
  private unsubscribeSchedules = () => {}
  /** Stops the observation of the queue's jobs by state (telemetry/metrics.ts). */
  private stopObserving: () => void = () => {}
  /** The worker's own tasks under way (a poll, a renewal, a maintenance pass): `stop` waits for them. */
  private readonly tasks = new Set<Promise<void>>()
  private stopping = false
  private stopped: Promise<void> | null = null
  /** Whether a maintenance pass is under way: passes never overlap, so a slow one (a busy database) never piles others up behind it. */
  private maintaining = false

  constructor(
    private readonly connection: Connection,
    private readonly definition: Queue,
    private readonly handler: Handler<unknown>,
    private readonly settings: Settings,
    prepared: Answer<void>,
  ) {
    this.queue = definition.name
    this.active = new ActiveRuns(connection, this.owner, this.queue, { clock: settings.clock, ms: settings.leaseMs })
    this.lease = new LeaseClock(this.owner, settings.leaseMs, () => progressChannelFor(connection))
    this.flusher = new Flusher({
      connection,
      queue: definition,
      owner: this.owner,
      slots: settings.slots,
      lease: this.lease,
      pollIntervalMs: settings.pollIntervalMs,
      runs: this.active,
      clock: settings.clock,
      onError: settings.onError,
      stopping: () => this.stopping,
      start: (job) => this.start(job),
    })
    this.schedules = new ScheduleTimer({
      connection,
      queue: definition,
      clock: settings.clock,
      onError: settings.onError,
      stopping: () => this.stopping,
      track: (task) => this.track(task),
    })
    whenAnswered(
      prepared,
      () => this.startClaiming(),
      (later) => this.track(this.startWhenPrepared(later)),
    )
  }

  /** Listens for changes and arms the worker's timers; its first maintenance pass claims the first jobs. */
  private startClaiming(): void {
    const { connection, settings } = this
    this.started = true
    // OpenTelemetry's API is loaded now, not by the first run: a load that took long between a rated claim's stamp
    // and its handler's call would put the call past the rate's slack (JOB-22).
    otel()
    this.poller = new DataVersionPoller(connection)
    this.unsubscribe = onJobsChanged(connection.key, (queue, kind) => {
      if (kind === 'revoked') this.track(this.checkLeases())
      else if (queue === this.queue && kind !== 'claimed') this.flusher.schedule()
    })
    this.stopListening = settings.listen ? listenToOthers(connection) : () => {}
    this.unsubscribeSchedules = onSchedulesChanged(connection.key, (queue) => {
      if (queue === this.queue) this.track(this.schedules.pass())
    })
    // The queue's jobs by state, read from the counts the engine keeps each time the app's SDK collects metrics.
    this.stopObserving = observeQueue(this.queue, async () => connection.executor.queueGetCounts(this.queue))
    this.timers.push(
      setInterval(() => this.track(this.pollForOtherWriters()), settings.pollIntervalMs),
      setInterval(() => this.track(this.renewLeases()), Math.max(1, Math.floor(settings.leaseMs / LEASE_RENEWALS_PER_LEASE))),
      setInterval(() => this.track(this.maintain()), MAINTENANCE_INTERVAL_MS),
    )
    this.track(this.maintain())
  }

  /**
   * Starts claiming once an asynchronous database is ready for writes: its tables found, its triggers installed.
   * Tables not migrated stop the worker before it reads or writes anything else, SCHEMA_MISSING told to onError
   * once, as `work` throws it on a synchronous database. A busy database or a lost connection (the server away at
   * the start, say) is tried again after a backoff, and any other error too, once told to onError.
   */
  private async startWhenPrepared(prepared: Promise<void>): Promise<void> {
    for (let waitMs = BUSY_BACKOFF_FIRST_MS; ; waitMs = Math.min(waitMs * 2, BUSY_BACKOFF_MAX_MS)) {
      try {
        await prepared
        if (!this.stopping) this.startClaiming()
        return
      } catch (error) {
        if (isJobsError(error, 'SCHEMA_MISSING')) {
          this.settings.onError(error)
          void this.stop()
          return
        }
        if (!this.connection.isBusy(error)) this.settings.onError(error)
      }
      await sleep(waitMs)
      if (this.stopping) return
      prepared = Promise.resolve(this.connection.prepareWrites())
    }
  }

  /** Keeps a task of the worker's own until it settles, for `stop` to wait on; it never rejects (each task reports its errors). */
  private track(task: Promise<void>): void {
    this.tasks.add(task)
    void task.finally(() => this.tasks.delete(task))
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

  /** Waits for the runs under way (ending them as failed attempts once `timeoutMs` has passed), then writes every end still pending. */
  private async shutDown(timeoutMs: number | null): Promise<void> {
    this.unsubscribe()
    this.stopListening()
    this.unsubscribeSchedules()
    this.schedules.cancel()
    this.flusher.cancelTimers()
    // A claim under way when the stop came keeps its jobs claimed ahead as it commits: wait for it, so that they are handed back too.
    await this.flusher.settled()
    this.handBackAhead()
    if (timeoutMs !== null && !(await this.active.settledWithin(timeoutMs))) {
      const reason = new JobsError('TIMEOUT', `the worker stopped and gave up waiting for this run after ${timeoutMs} ms`)
      for (const run of this.active.values()) run.abort(reason)
      await this.active.settledWithin(STOP_ABORT_GRACE_MS)
      const now = this.settings.clock()
      for (const run of this.active.endAll()) {
        const transition = transitionFor(
          this.definition,
          { attempt: run.attempt, maxAttempts: run.attempts },
          { kind: 'abandoned', why: 'the worker stopped before the run ended', how: 'stopped' },
          now,
        )
        this.flusher.endRun({ seq: run.seq, owner: this.owner, attempt: run.attempt, transition })
        run.loseLease()
      }
    } else {
      await this.active.settledWithin(null)
    }
    while (this.flusher.hasPendingEnds) {
      await this.flusher.flush()
      if (this.flusher.hasPendingEnds) await sleep(BUSY_RETRY_MS)
    }
    for (const timer of this.timers) clearInterval(timer)
    this.stopObserving()
    // A task that began before the stop (a maintenance pass, say) ends before the stop does.
    await Promise.all([...this.tasks, this.flusher.settled()])
    // A worker that never claimed wrote no row.
    if (!this.started) return
    // Every end is written: the worker holds no job, and its row goes (where the database is busy, it expires instead).
    try {
      await this.connection.executor.workerDelete(this.owner)
    } catch (error) {
      if (!this.connection.isBusy(error)) this.settings.onError(error)
    }
  }

  /**
   * Starts a claimed job's run, or keeps it claimed ahead: while every slot is taken, and behind the jobs claimed
   * before it, so that runs start in claim order. A stopping worker starts none, not even those of a claim that
   * was under way when the stop came: it hands them back with the others (handBackAhead).
   */
  private start(job: ClaimedJob): void {
    this.active.holdAhead(job)
    this.startAhead()
  }

  /** Starts the jobs claimed ahead, first claimed first, while slots are free. */
  private startAhead(): void {
    while (!this.stopping && this.active.size < this.settings.slots) {
      const job = this.active.nextAhead()
      if (!job) return
      const run = this.active.start(job)
      void this.execute(run, job.value)
    }
  }

  /** Runs one run through the executor, queues its end for the next flush, and starts the next job claimed ahead. */
  private async execute(run: RunContext, valueText: string): Promise<void> {
    const began = performance.now()
    const transition = await execute(this.definition, run, valueText, this.handler, this.settings.clock)
    if (!this.active.end(run)) return
    this.flusher.runEnded(performance.now() - began)
    if (transition) this.flusher.endRun({ seq: run.seq, owner: this.owner, attempt: run.attempt, transition })
    else this.flusher.schedule()
    this.startAhead()
  }

  /** Hands back, unstarted and with their attempts refunded, the jobs claimed ahead: a stopping worker starts no more. */
  private handBackAhead(): void {
    for (const job of this.active.takeAhead())
      this.flusher.endRun({ seq: job.seq, owner: this.owner, attempt: job.attempts, transition: handedBack(job) })
  }

  private async pollForOtherWriters(): Promise<void> {
    if (this.stopping || !this.poller) return
    try {
      if (!(await this.poller.othersWrote())) return
    } catch (error) {
      if (!this.connection.isBusy(error)) this.settings.onError(error)
      return
    }
    await this.checkLeases()
    this.flusher.schedule()
  }

  /** Aborts runs whose lease another writer took away: canceled, or taken back as abandoned. */
  private async checkLeases(): Promise<void> {
    try {
      if (this.active.size > 0 || this.active.aheadSize > 0) {
        // A job claimed ahead whose lease was taken (a cancel) is dropped unstarted: its new state is the canceler's.
        await checkLeases(this.connection, this.owner, this.active.values(), {
          jobs: this.active.ahead(),
          lost: (jobs) => this.active.dropAhead(jobs),
        })
      }
    } catch (error) {
      if (!this.connection.isBusy(error)) this.settings.onError(error)
    }
  }

  /**
   * Renews this worker's leases; a run whose lease was not renewed has lost it, and is aborted. The leases of runs
   * that ended are renewed too until their ends are written: a flush held up (by a lock of the app's on the queue's
   * row, say) must not let them expire, or another worker would take back and run again jobs that are done.
   */
  private async renewLeases(): Promise<void> {
    if ((this.active.size === 0 && !this.flusher.hasPendingEnds && !this.flusher.writing) || this.connection.inTransaction()) return
    // A renewal that met a busy database or a lost connection is tried again after a backoff, for up to a third of a lease.
    const giveUpAt = performance.now() + this.settings.leaseMs / LEASE_RENEWALS_PER_LEASE
    try {
      await retryWhileBusy(
        this.connection,
        async () => {
          const row = this.lease.row(this.settings.clock())
          await renewLeases(this.connection, row, this.active.values())
          this.lease.written(row)
        },
        () => this.stopping || performance.now() > giveUpAt,
      )
    } catch (error) {
      // The renewal gave up: its runs may be taken over once the row expires.
      renewalMissed(this.queue)
      if (!this.connection.isBusy(error)) this.settings.onError(error)
    }
  }

  /** Takes back abandoned leases, ends runs that hold none, and prunes ended jobs; each reads first and takes the write lock only when there is work. */
  private async maintain(): Promise<void> {
    if (this.stopping || this.maintaining || this.connection.inTransaction()) return
    this.maintaining = true
    try {
      await maintainQueue(this.connection, this.definition, this.owner, this.settings.clock())
    } catch (error) {
      if (!this.connection.isBusy(error)) this.settings.onError(error)
    } finally {
      this.maintaining = false
    }
    await this.schedules.pass()
    this.flusher.schedule()
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
