/**
 * A worker's writes: one write transaction at a time that stores the
 * queue's limits (the first time), records the ends of runs waiting to be
 * written, and claims jobs for the free slots. Ends ride in the next claim's
 * transaction, so a busy worker writes claims and ends in batches.
 *
 * A claim may take jobs ahead of the free slots: they wait in the worker,
 * claimed and leased, and start as runs end, so that slots that free while
 * a transaction is under way need not wait for the next one. How many is
 * what the slots can start during one flush: slots × the flush's time /
 * a run's time, both averaged as they go (a worker whose runs are short
 * next to its transactions claims up to MAX_CLAIM_AHEAD ahead (128 where
 * the database answers in-process, 512 where its flushes cost round trips); one whose
 * runs are long next to them claims none, or one). A
 * queue with a concurrency, a cap per group or a rate claims nothing ahead
 * (engine/claim.ts): there a claimed job counts against the limit.
 *
 * A worker that wants more runs than a queue's concurrency lets it have
 * waits for its share (engine/fair-share.ts): its claims say so, and while
 * the queue is full it takes the write lock only to say so again before its
 * entry lapses, on a timer of its own.
 *
 * A queue's rate (JOB-22) may hold a claim back: the flush then sleeps until
 * the rate's window opens, on a timer of its own.
 *
 * A flush does not wait for SQLite's write lock in SQLite's busy handler,
 * which sleeps 1, 2, 5, 10 … ms between tries and blocks the process
 * meanwhile: it takes the lock at once or is refused (Connection.tryWrite),
 * and a refused flush tries again a ms later, its process running its
 * handlers meanwhile. Another worker's flush holds the lock for about that
 * long, so the lock passes from one worker process to the next within a ms.
 *
 * While other connections write to a SQLite file, a worker leaves the lock
 * free after each flush. The app's transactions wait for the lock in
 * SQLite's busy handler, which tries again only now and then, after sleeps
 * that grow to 100 ms: workers that took the lock back to back would hold it
 * at nearly every try and starve the app. While other workers run the
 * queue's jobs, each of the W workers leaves 1.5 W - 1 times as long as
 * its flush held the lock (gapFactor), so that together they hold it at most
 * two thirds of the time. Beside the app alone, a worker leaves twice as
 * long, and holds the lock at most a third of the time.
 * The gap runs from the end of the last write, so a worker whose flushes are
 * far apart (long runs) waits for none. A worker alone on its file leaves
 * no gap.
 */
import { ask, type ClaimedJob, type Connection, type FlushAnswer } from '../dialect/index.js'
import { claimPlanner, type ClaimReport } from '../engine/claim.js'
import type { QueueDefinition } from '../engine/definition.js'
import { storeLimits } from '../engine/queue-limits.js'
import { handedBack } from '../engine/outcome.js'
import type { RunEndRecord } from '../engine/record.js'
import { jobsChanged } from '../engine/wake.js'
import { claimedRows, endedRows } from '../engine/written.js'
import {
  BUSY_RETRY_MS,
  CLAIM_WAIT_MS,
  CLAIM_WAIT_POLLS,
  CONTENDED_GAP_MS,
  CONTENDED_SPELL_MS,
  LOCK_QUICK_TRIES,
  LOCK_RETRY_MS,
  MAINTENANCE_INTERVAL_MS,
  MAX_CLAIM_AHEAD,
  MAX_TIMER_MS,
} from '../limits.js'
import { progressChannelFor } from '../progress/channel.js'
import type { LeaseClock } from '../engine/lease.js'
import type { ActiveRuns } from './runs.js'

/** The states a run's end may put its job back in for a later claim. */
const RUNNABLE: ReadonlySet<string> = new Set(['waiting', 'scheduled'])

/** The weight of the latest time in the averages of a run's and a flush's times. */
const AVERAGE_WEIGHT = 0.2
/** Runs shorter than this count as this long: a no-op handler's run takes a few µs, and the claims ahead stay bounded anyway. */
const MIN_RUN_MS = 0.01

/** The most workers that gapFactor counts: past this many, a longer gap would idle the lock more than the app needs. */
const MAX_WRITERS_COUNTED = 8
/** How often a contended worker counts the workers running its queue's jobs, ms. */
const WRITERS_READ_MS = 250

/** A waiting worker takes the lock to renew its entry among the waiters when this much of its time is left: the claim renews it from half. */
const WAIT_RENEW_AT = 0.4

/** What a flush needs of its worker. @internal */
export interface FlushContext {
  readonly connection: Connection
  readonly queue: QueueDefinition
  readonly owner: string
  readonly slots: number
  /** The worker's lease (its row): a claim renews it when it is due. */
  readonly lease: LeaseClock
  readonly pollIntervalMs: number
  readonly runs: ActiveRuns
  readonly clock: () => number
  readonly onError: (error: unknown) => void
  /** Whether the worker is stopping: it claims nothing more. */
  stopping(): boolean
  /** Starts the run of a job the flush claimed, or keeps it until a slot frees. */
  start(job: ClaimedJob): void
}

/** One worker's flushes. @internal */
export class Flusher {
  private readonly pendingEnds: RunEndRecord[] = []
  private queued = false
  /** The flush under way, if any: flushes never overlap, and one asked for meanwhile runs after it. */
  private current: Promise<void> | null = null
  private again = false
  /** Until when (performance.now() ms) flushes leave a gap, because other connections write to the file. */
  private contendedUntil = 0
  /** The gap they leave: gapFactor times as long as the last flush held the lock, ms. */
  private gapMs = CONTENDED_GAP_MS
  /** When (performance.now() ms) the last flush's transaction ended: the gap runs from there. */
  private lastWriteAt = -Infinity
  /** How many flushes in a row found the write lock held: the first few try again soon. */
  private refusals = 0
  /** The workers running the queue's jobs, this one among them, as last counted while contended; when, performance.now() ms. */
  private writers = 2
  private writersReadAt = -Infinity
  /** Runs of the queue under way in other workers, as the last claim read them: other workers are writing. */
  private othersRunning = 0
  /** The database's data version inside the last flush's transaction: it moves only when other connections write. */
  private versionAtLastFlush = -1
  /** Whether this worker's first transaction stored its definition's limits as the queue's (JOB-19). */
  private limitsStored = false
  private nextScheduledTimer: NodeJS.Timeout | null = null
  /** Wakes the worker when the queue's rate window opens again, after a claim the rate held back (JOB-22). */
  private rateTimer: NodeJS.Timeout | null = null
  /** Until when (performance.now() ms) the rate holds every claim back: reads for work answer no meanwhile. */
  private rateHeldUntil = 0
  /** A run's time and a flush's, in ms, averaged as they go (null until one is seen): they size the claims ahead. */
  private runMs: number | null = null
  private flushMs: number | null = null
  /** How long the worker's entry among the waiters for a share of the concurrency counts (engine/fair-share.ts). */
  private readonly waitMs: number
  /** Until when (performance.now() ms) it counts; 0 while the worker waits for no share. */
  private waitingUntil = 0
  /** Takes the lock to renew the entry before it lapses, while the queue stays full. */
  private waitTimer: NodeJS.Timeout | null = null
  constructor(private readonly worker: FlushContext) {
    this.waitMs = Math.max(CLAIM_WAIT_MS, CLAIM_WAIT_POLLS * worker.pollIntervalMs)
  }

  /** Queues a run's end for the next flush, and asks for one. */
  endRun(record: RunEndRecord): void {
    this.pendingEnds.push(record)
    this.schedule()
  }

  /** Learns how long a run takes (its handler, from start to end): the claims ahead follow it. */
  runEnded(ms: number): void {
    this.runMs = this.runMs === null ? ms : this.runMs + AVERAGE_WEIGHT * (ms - this.runMs)
  }

  /** How many jobs to claim ahead of the free slots: what the slots start during one flush, at the times seen so far. */
  private aheadWanted(): number {
    if (this.runMs === null || this.flushMs === null) return 0
    return Math.min(
      MAX_CLAIM_AHEAD[this.worker.connection.capabilities.roundTrips ? 'roundTrips' : 'inProcess'],
      Math.round((this.worker.slots * this.flushMs) / Math.max(this.runMs, MIN_RUN_MS)),
    )
  }

  /** Whether ends are waiting to be written. */
  get hasPendingEnds(): boolean {
    return this.pendingEnds.length > 0
  }

  /** Whether a flush is under way: the ends it writes hold their leases until it commits. */
  get writing(): boolean {
    return this.current !== null
  }

  /** Flushes soon: on the next turn of the event loop, or, while other writers contend for the lock, after a short gap. */
  schedule(): void {
    if (this.queued) return
    this.queued = true
    const run = () => {
      this.queued = false
      void this.flush()
    }
    const now = performance.now()
    // The gap runs from the end of the last write: a flush asked for later than that goes at once.
    const gapLeft = now < this.contendedUntil ? this.lastWriteAt + this.gapMs - now : 0
    if (gapLeft > 0) setTimeout(run, gapLeft)
    else setImmediate(run)
  }

  /** Flushes now, or once the flush under way has ended. */
  flush(): Promise<void> {
    if (this.current) {
      this.again = true
      return this.current
    }
    const flushing = (async () => {
      try {
        await this.flushOnce()
      } catch (error) {
        // A read outside the write transaction (is there work?) failed: a lost connection, say.
        this.retryAfter(error)
      } finally {
        this.current = null
      }
      if (this.again) {
        this.again = false
        this.schedule()
      }
    })()
    this.current = flushing
    return flushing
  }

  /**
   * How many times its flush's time a worker leaves the lock free, while other connections write. An app beside the
   * workers waits for the lock in SQLite's busy handler, which tries again only after sleeps that grow to 100 ms, and
   * the workers take it within a ms of each other's commits: with no gap they would hold it at nearly every try of
   * the app's, and the app gets it in time only if it is free about a third of the time. So each of W workers
   * running the queue's jobs leaves 1.5 W - 1 times its flush's time: each holds the lock at most 1 / (1.5 W) of the
   * time, all of them together two thirds. Alone beside the app, a worker leaves twice its flush's time, holding the
   * lock at most a third of the time. A gap of W - 1 times left the lock free only where the workers' turns did not
   * meet, and the app's p99 beside 4 of them reached 196 ms in `npm run soak` (its limit is 150 ms).
   */
  private gapFactor(): number {
    if (this.othersRunning === 0) return 2
    return 1.5 * Math.min(MAX_WRITERS_COUNTED, Math.max(2, this.writers)) - 1
  }

  /** Counts the workers running the queue's jobs, at most once per WRITERS_READ_MS: the gap follows how many there are. */
  private async countWriters(): Promise<void> {
    const now = performance.now()
    if (now - this.writersReadAt < WRITERS_READ_MS) return
    this.writersReadAt = now
    const owners = await this.worker.connection.executor.jobListRunningOwners(this.worker.queue.name)
    this.writers = 1 + owners.filter((owner) => owner !== this.worker.owner).length
  }

  /** Resolves once no flush is under way. */
  async settled(): Promise<void> {
    while (this.current) await this.current
  }

  /** Stops the timer that waits for the next scheduled job. */
  cancelTimers(): void {
    if (this.nextScheduledTimer) clearTimeout(this.nextScheduledTimer)
    this.nextScheduledTimer = null
    if (this.rateTimer) clearTimeout(this.rateTimer)
    this.rateTimer = null
    if (this.waitTimer) clearTimeout(this.waitTimer)
    this.waitTimer = null
  }

  /**
   * One write transaction. The claim passes over the jobs whose ends it has just written (a retry whose
   * backoff has already passed): their new state commits first, for watchers to see, and the flush
   * that the end's notice schedules claims them again.
   */
  private async flushOnce(): Promise<void> {
    const { connection, queue, runs } = this.worker
    const stopping = this.worker.stopping()
    const aheadWanted = this.aheadWanted()
    const claiming = !stopping && runs.mayClaim
    const startable = claiming ? Math.max(0, this.worker.slots - runs.size - runs.aheadSize) : 0
    const free = claiming ? Math.max(0, this.worker.slots + aheadWanted - runs.size - runs.aheadSize) : 0
    const ends = this.pendingEnds.splice(0)
    const storing = !this.limitsStored && !stopping
    if (ends.length === 0 && !storing && (free <= 0 || !(await this.mightHaveWork(startable > 0)))) return
    // Inside a transaction of the app on this connection, our writes would join it: wait for its end.
    if (connection.inTransaction()) {
      this.pendingEnds.unshift(...ends)
      setTimeout(() => this.schedule(), BUSY_RETRY_MS)
      return
    }
    const now = this.worker.clock()
    const self = this
    let othersWrote = false
    let replaced: string | null = null
    let answer: FlushAnswer
    const channel = progressChannelFor(connection)
    const renewLease = this.worker.lease.forClaim(now)
    const hold: ClaimReport = { waitMs: null, startBy: null }
    const planner = claimPlanner(
      queue.name,
      {
        limit: free,
        ahead: free - startable,
        idle: runs.size === 0 && runs.aheadSize === 0,
        owner: this.worker.owner,
        now,
        renewLease,
        // A job whose run ends here runnable again (a retry, a run handed back) is claimed by a later flush: its end
        // commits first, for watchers to see. The others cannot be claimed, and passing over them would cost the read.
        passOver: ends.filter((end) => RUNNABLE.has(end.transition.state)).map((end) => end.seq),
        clock: this.worker.clock,
        held: runs.size + runs.aheadSize,
        waitMs: this.waitMs,
      },
      hold,
    )
    try {
      const began = performance.now()
      answer = await connection.tryWrite(function* (db) {
        const version = yield* ask(db.dataVersion())
        // The first flush has nothing to compare with: the writes that made the queue are not contention.
        othersWrote = self.versionAtLastFlush !== -1 && version !== self.versionAtLastFlush
        self.versionAtLastFlush = version
        if (storing) replaced = yield* storeLimits(db, queue, now)
        return yield* ask(
          db.jobFlush({
            queue: queue.name,
            owner: self.worker.owner,
            now,
            clock: self.worker.clock,
            ends,
            claim: free > 0 ? planner : null,
          }),
        )
      })
      this.refusals = 0
      if (answer.claimed.length > 0 && renewLease) this.worker.lease.written(renewLease)
      this.lastWriteAt = performance.now()
      const tookMs = this.lastWriteAt - began
      this.flushMs = this.flushMs === null ? tookMs : this.flushMs + AVERAGE_WEIGHT * (tookMs - this.flushMs)
      // Contended: another connection wrote to a database of one writer since our last flush (where writers write at
      // once, each waits only for the rows it touches, and the data version may move with every flush).
      if (othersWrote && connection.capabilities.oneWriter) {
        this.contendedUntil = performance.now() + CONTENDED_SPELL_MS
        if (hold.othersRunning !== undefined) this.othersRunning = hold.othersRunning
        if (this.othersRunning > 0) await this.countWriters()
        this.gapMs = Math.max(CONTENDED_GAP_MS, this.gapFactor() * tookMs)
      }
    } catch (error) {
      this.pendingEnds.unshift(...ends)
      this.retryAfter(error)
      return
    }
    const { landed, claimed } = answer
    if (storing) {
      this.limitsStored = true
      if (replaced !== null) console.warn(replaced)
    }
    // What this flush wrote goes with the change, so that this process's watchers need not read the rows back.
    if (ends.length > 0)
      jobsChanged(
        connection.key,
        queue.name,
        'ended',
        ends.map((end) => end.seq),
        endedRows(ends, landed, connection.capabilities.jsonAsText),
      )
    if (claimed.length > 0)
      jobsChanged(
        connection.key,
        queue.name,
        'claimed',
        claimed.map((job) => job.seq),
        claimedRows(claimed, this.worker.owner, channel),
      )
    // Under a rate, a run must begin within the slack of its stamped start; else it goes back unstarted (engine/rate.ts).
    // Asked before each call: a handler's synchronous part delays the calls after it.
    for (const job of claimed) {
      if (hold.startBy != null && performance.now() > hold.startBy)
        this.endRun({ seq: job.seq, owner: this.worker.owner, attempt: job.attempts, transition: handedBack(job) })
      else this.worker.start(job)
    }
    if (free > 0) this.waitingFor(hold.waitingMs ?? 0)
    if (hold.waitMs !== null) this.holdForRate(hold.waitMs)
    else if (claimed.length > 0 && claimed.length === free) this.schedule()
    else if (free > 0) await this.mightHaveWork(false)
  }

  /** Notes how long the worker's entry among the waiters for a share of the concurrency counts, and renews it before it lapses. */
  private waitingFor(ms: number): void {
    if (this.waitTimer) clearTimeout(this.waitTimer)
    this.waitTimer = null
    this.waitingUntil = ms > 0 ? performance.now() + ms : 0
    // A stopping worker claims nothing more: its entry lapses by itself.
    if (ms <= 0 || this.worker.stopping()) return
    this.waitTimer = setTimeout(
      () => {
        this.waitTimer = null
        this.schedule()
      },
      ms - WAIT_RENEW_AT * this.waitMs + 1,
    )
  }

  /** Whether the worker's entry among the waiters is missing or about to lapse: a claim would write it. */
  private waitLapsing(): boolean {
    return this.waitingUntil - performance.now() < WAIT_RENEW_AT * this.waitMs
  }

  /**
   * After a claim the queue's rate held back: looks for work again when the window opens, not on the next poll, and
   * not before either (every claim meanwhile would be held back too). Ends still flush meanwhile.
   */
  private holdForRate(waitMs: number): void {
    if (this.rateTimer) clearTimeout(this.rateTimer)
    this.rateHeldUntil = performance.now() + waitMs
    this.rateTimer = setTimeout(
      () => {
        this.rateTimer = null
        this.rateHeldUntil = 0
        this.schedule()
      },
      Math.min(waitMs + 1, MAX_TIMER_MS),
    )
  }

  /**
   * After a flush failed: flushes again soon when the database was busy (never surfaced), else reports the error and
   * flushes again after a while. A flush refused the write lock (Connection.tryWrite) tries again within a ms or so
   * for its first few tries: the flush that holds it ends about then.
   */
  private retryAfter(error: unknown): void {
    const busy = this.worker.connection.isBusy(error)
    if (!busy) this.worker.onError(error)
    const soon = busy && ++this.refusals <= LOCK_QUICK_TRIES
    setTimeout(() => this.schedule(), soon ? LOCK_RETRY_MS : busy ? BUSY_RETRY_MS : MAINTENANCE_INTERVAL_MS)
  }

  /**
   * A read before taking the write lock: is anything claimable now? Arms a timer for the next scheduled job either way.
   * A full queue answers yes to a worker that could start runs (`wantsShare`) when its entry among the waiters for a
   * share must be written.
   */
  private async mightHaveWork(wantsShare: boolean): Promise<boolean> {
    const counts = await this.worker.connection.executor.queueGetClaimable(this.worker.queue.name)
    if (!counts || counts.paused) return false
    if (performance.now() < this.rateHeldUntil) return false
    // The stored limit, not this process's definition: another worker's start may have replaced it (JOB-19).
    if (counts.concurrency !== null && counts.running >= counts.concurrency) return wantsShare && counts.waiting > 0 && this.waitLapsing()
    if (counts.waiting > 0) return true
    if (counts.nextScheduled === null) return false
    const wait = counts.nextScheduled - this.worker.clock()
    if (wait <= 0) return true
    this.wakeAt(wait)
    return false
  }

  private wakeAt(wait: number): void {
    if (this.nextScheduledTimer) clearTimeout(this.nextScheduledTimer)
    this.nextScheduledTimer = setTimeout(
      () => {
        this.nextScheduledTimer = null
        this.schedule()
      },
      Math.min(wait + 1, MAINTENANCE_INTERVAL_MS * 60),
    )
  }
}
