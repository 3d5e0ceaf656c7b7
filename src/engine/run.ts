/**
 * The `run` a handler receives: who the job is, its signal, its durable
 * steps, its progress, and the outcomes it may return.
 */
import type { ProcessSpan } from '../telemetry/trace.js'
import type { Connection } from '../dialect/index.js'
import type { ClaimedJob } from '../dialect/index.js'
import { toMs, type Duration } from '../duration.js'
import { JobsError } from '../errors.js'
import { checkName, encodeJson } from '../json.js'
import { MAX_PROGRESS_BYTES, MAX_TIME_MS, MAX_VALUE_BYTES, STEP_LEASE_MARGIN } from '../limits.js'
import { retryWhileBusy } from './busy.js'
import { confirmLease } from './lease.js'
import type { Json, JsonShape } from '../types.js'
import { outcome, type Outcome, type Park } from './outcome.js'
import { endNoticeProgress, sendProgress } from '../progress/notices.js'
import { endProgress, publishProgress, runKey } from '../progress/store.js'

/** What a handler gets beside its job's value. */
export interface Run {
  /** The job's id. */
  readonly id: string
  /** The queue's name. */
  readonly queue: string
  /** The job's group, or null. */
  readonly group: string | null
  /** This attempt, 1-based. */
  readonly attempt: number
  /** Attempts the job gets in all. */
  readonly attempts: number
  /** Aborts on timeout (TIMEOUT), on a lost lease (LEASE_LOST), on cancel, and when `stop` gives up waiting; `signal.reason` says which. */
  readonly signal: AbortSignal
  /**
   * Runs `fn` once per job, not once per attempt (JOB-06): its JSON answer
   * (at most 1 MiB; `undefined` is kept as such) is kept, and later attempts
   * get it back without calling `fn`. A step that throws keeps nothing. An
   * answer that is not JSON (a Date, say) does not compile.
   * Calls of one name in one run while one is under way share its call of
   * `fn`: they all get its answer, or its error (a later call gets the kept
   * answer, or tries again after an error). Before it calls `fn`, the run
   * checks in the database that it still holds its lease (JOB-16). Its reads
   * and its write are tried again while the database is busy or the
   * connection was lost, until they answer or the run is aborted.
   *
   * Throws LEASE_LOST when the run lost its lease (taken over, or its job
   * canceled); once `signal` has aborted, the signal's reason (TIMEOUT when
   * the run's timeout passed or `stop` gave up waiting, else LEASE_LOST),
   * without calling `fn`; INVALID_VALUE or TOO_LARGE for an answer that
   * cannot be kept.
   */
  step<A extends JsonShape<A>>(name: string, fn: () => A | Promise<A>): Promise<A>
  /**
   * Parks the run for `duration` (ms, or a string such as `'2h'`): the job is scheduled to run again at the end of
   * the sleep, holding no slot meanwhile and giving this attempt back, and its next run passes through this call at
   * once. Code after the `await` runs in that later run: a sleep is a durable step named `name` (its end is kept, so
   * the same call in a later run or attempt does not sleep again), and a handler reaches it by running again from the
   * top, its earlier steps answered from the table. Use a name no other step of the job uses.
   *
   * Throws as `step` does: LEASE_LOST, the signal's reason, INVALID_OPTION for a bad name or duration.
   */
  sleep(name: string, duration: Duration): Promise<void>
  /**
   * Waits for the event `name` that the app sends with `signal(tx, queue, id, name, payload)` inside its own
   * transaction. Where none has come, the run parks, as `sleep` does (no slot held, no attempt used), until the event
   * comes, in any process, or `timeout` passes; its next run passes through this call with what it found. Durable:
   * every later run or attempt gets the same answer without waiting again. An event sent before the run waits is
   * kept, and answered at once. Without a timeout the run waits until the event comes.
   *
   * Answers `{ timedOut: false, payload }` for the event, `{ timedOut: true }` when the timeout passed first (a later
   * signal of that name is then refused). Throws as `step` does.
   */
  waitForEvent<P = Json>(name: string, options?: { timeout?: Duration }): Promise<EventWait<P>>
  /** Sets the run's live progress: JSON of at most 4 KiB (TOO_LARGE beyond), in memory only (JOB-12). */
  setProgress<P extends JsonShape<P>>(progress: P): void
  /** Ends the job `failed` now, with `reason` as its error (at most 64 KiB of UTF-8 is kept, cut with a marker beyond). Return what it returns. */
  fail(reason: string): Outcome
  /** Runs the job again after `delay`, counting this attempt (`failed` if it was the last). Return what it returns. */
  retry(delay?: Duration): Outcome
  /** Runs the job again after `delay`, not counting this attempt. Return what it returns. */
  snooze(delay?: Duration): Outcome
}

/** What `run.waitForEvent` answers: the event's payload, or that its timeout passed first. */
export type EventWait<P> = { timedOut: false; payload: P } | { timedOut: true; payload?: undefined }

/**
 * A promise that never settles: what a parked run's `sleep` or `waitForEvent` answers in the run that parks. A fresh
 * one each time: a promise nothing references any more is collected with the handler's code that awaits it.
 */
const never = () => new Promise<never>(() => {})

/** @internal */
export class RunContext implements Run {
  readonly id: string
  readonly queue: string
  readonly group: string | null
  readonly attempt: number
  readonly attempts: number
  readonly seq: number
  /** The trace context stored with the job: its run's span is the child of it. @internal */
  readonly traceContext: string | null
  /** When the job was due (ms since the epoch): its wait ends as the run starts. @internal */
  readonly runAt: number
  /** The run's span, where a trace is recorded: each step whose function runs gets one of its own. @internal */
  trace: ProcessSpan | null = null
  /** Set once the lease is known lost: nothing this run writes will land. */
  lost = false
  /** Set once the run parks (a sleep, a wait for an event): it ends so, whatever the handler does after. */
  parked: Park | null = null
  /** Called as the run parks: the executor stops waiting for the handler, whose promise then never settles. */
  onPark: ((park: Park) => void) | null = null
  /** False for a run of a batch handler (worker/batch.ts): its batch's call would wait for it for ever. */
  parkable = true
  /** Why the run was aborted, once it was. */
  private abortReason: JobsError | undefined
  /** Made when a handler first asks for the signal: most runs never do, and an AbortController costs about 3 µs. */
  private controller: AbortController | undefined
  /** The steps of this run under way, by name: a call of a name under way shares its answer or error. */
  private readonly steps = new Map<string, Promise<unknown>>()
  private readonly progressKey: string

  constructor(
    private readonly connection: Connection,
    private readonly owner: string,
    queue: string,
    job: ClaimedJob,
    /** The worker's lease: its clock (ms since the epoch) and length, with which a step renews the run's lease before it calls its function. */
    private readonly lease: { clock: () => number; ms: number },
  ) {
    this.seq = job.seq
    this.id = job.id
    this.queue = queue
    this.group = job.grp
    this.attempt = job.attempts
    this.attempts = job.maxAttempts
    this.traceContext = job.traceContext
    this.runAt = job.runAt
    this.progressKey = runKey(owner, job.seq, job.attempts)
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController()
      if (this.abortReason) this.controller.abort(this.abortReason)
    }
    return this.controller.signal
  }

  step<A>(name: string, fn: () => A | Promise<A>): Promise<A> {
    try {
      checkName(name, 'step name')
      if (typeof fn !== 'function') throw new JobsError('INVALID_OPTION', `step '${name}': expected a function`)
      if (this.abortReason) throw this.abortReason
    } catch (error) {
      return Promise.reject(error)
    }
    let started = this.steps.get(name)
    if (!started) {
      started = this.runStep(name, fn).finally(() => this.steps.delete(name))
      this.steps.set(name, started)
    }
    return started as Promise<A>
  }

  private async runStep<A>(name: string, fn: () => A | Promise<A>): Promise<A> {
    const db = this.connection.executor
    const kept = await this.whileBusy(() => db.stepGet(this.seq, name))
    if (kept !== undefined) {
      this.trace?.replayed(name)
      return (kept === null ? undefined : JSON.parse(kept)) as A
    }
    const trace = this.trace
    const answer = await this.callHoldingLease(trace ? () => trace.step(name, fn) : fn)
    const json = encodeJson(answer, `the answer of step '${name}'`, MAX_VALUE_BYTES, true)
    this.assertHeld()
    // A write whose answer was lost with its connection may have landed: tried again, it writes nothing, and the read finds it.
    const written = await this.whileBusy(() =>
      db.stepSetIfLeased({ seq: this.seq, name, answer: json, owner: this.owner, attempt: this.attempt }),
    )
    if (!written && (await this.whileBusy(() => db.stepGet(this.seq, name))) === undefined) {
      this.loseLease()
      this.assertHeld()
    }
    return (json === null ? undefined : JSON.parse(json)) as A
  }

  /**
   * Calls `fn` once the run's lease is proved held: renewed in the database behind the fence, by an answer that this
   * process's monotonic clock shows arrived while the renewal still holds by a margin (STEP_LEASE_MARGIN) for other
   * hosts' clocks. An answer that arrived late (the event loop blocked, the process frozen) is asked again. The last
   * check and the call are one synchronous stretch: no other run's work, no late answer, comes between (JOB-16).
   * Throws LEASE_LOST when the run lost its lease, or the abort's reason.
   */
  private async callHoldingLease<A>(fn: () => A | Promise<A>): Promise<A> {
    const provesFor = this.lease.ms * (1 - STEP_LEASE_MARGIN)
    for (;;) {
      let sentAt = 0
      const held = await this.whileBusy(() => {
        sentAt = performance.now()
        return confirmLease(this.connection, this.owner, this, this.lease.clock() + this.lease.ms)
      })
      if (!held) this.assertHeld()
      if (this.abortReason) throw this.abortReason
      if (performance.now() - sentAt < provesFor) return fn()
    }
  }

  /**
   * Runs a read or write of a step, again after a backoff while the database is busy or the connection was
   * lost, until it answers or the run is aborted (its timeout, a lost lease): the handler sees the step's
   * answer, or the abort's reason, never the database's busy error.
   */
  private whileBusy<T>(work: () => T | Promise<T>): Promise<T> {
    return retryWhileBusy(this.connection, work, () => {
      if (this.abortReason) throw this.abortReason
      return false
    })
  }

  async sleep(name: string, duration: Duration): Promise<void> {
    checkName(name, 'sleep name')
    const ms = toMs(duration, 'sleep duration')
    this.assertParkable('sleep')
    if (this.abortReason) throw this.abortReason
    if (this.parked) return never()
    const db = this.connection.executor
    const kept = await this.whileBusy(() => db.stepGet(this.seq, name))
    const keptUntil = kept === undefined || kept === null ? undefined : (JSON.parse(kept) as { until?: unknown }).until
    let until: number
    if (typeof keptUntil === 'number') until = keptUntil
    else {
      // No sleep of that name was kept (or a step of that name kept something else): this call starts it.
      if (kept !== undefined) throw new JobsError('INVALID_OPTION', `sleep '${name}': a step of that name kept another answer`)
      until = Math.min(this.lease.clock() + ms, MAX_TIME_MS)
      this.assertHeld()
      const json = JSON.stringify({ until })
      const written = await this.whileBusy(() =>
        db.stepSetIfLeased({ seq: this.seq, name, answer: json, owner: this.owner, attempt: this.attempt }),
      )
      if (!written) {
        const now = await this.whileBusy(() => db.stepGet(this.seq, name))
        if (now === undefined) this.loseLease()
        this.assertHeld()
        return this.sleep(name, duration)
      }
    }
    if (this.lease.clock() >= until) return
    return this.park({ until, waitsFor: `sleep:${name}`, signals: null })
  }

  async waitForEvent<P>(name: string, options?: { timeout?: Duration }): Promise<EventWait<P>> {
    checkName(name, 'event name')
    this.assertParkable('waitForEvent')
    if (options !== undefined && (typeof options !== 'object' || options === null))
      throw new JobsError('INVALID_OPTION', `waitForEvent '${name}': options must be an object`)
    const timeoutMs = options?.timeout === undefined ? null : toMs(options.timeout, 'event timeout')
    const db = this.connection.executor
    const lease = { seq: this.seq, owner: this.owner, attempt: this.attempt }
    for (;;) {
      if (this.abortReason) throw this.abortReason
      if (this.parked) return never()
      const look = await this.whileBusy(() => db.eventGet(this.seq, name))
      if (look === undefined) this.loseLease()
      this.assertHeld()
      const { state, signals } = look!
      if (state === 'sent') return { timedOut: false, payload: JSON.parse(look!.payload ?? 'null') as P }
      if (state === 'timed_out') return { timedOut: true }
      const now = this.lease.clock()
      if (state === 'waiting') {
        const deadline = look!.deadline
        if (deadline === null || now < deadline) return this.park({ until: deadline ?? MAX_TIME_MS, waitsFor: `event:${name}`, signals })
        if (await this.whileBusy(() => db.eventSetTimedOutIfLeased({ ...lease, name, now }))) return { timedOut: true }
      } else {
        const deadline = timeoutMs === null ? null : Math.min(now + timeoutMs, MAX_TIME_MS)
        if (await this.whileBusy(() => db.eventSetWaitingIfLeased({ ...lease, name, deadline, now })))
          return this.park({ until: deadline ?? MAX_TIME_MS, waitsFor: `event:${name}`, signals })
      }
      // The write found the event's row changed (a signal came first: look again), or the run's lease gone.
      const again = await this.whileBusy(() => db.eventGet(this.seq, name))
      if (again === undefined || (again.state === state && again.deadline === look!.deadline)) this.loseLease()
      this.assertHeld()
    }
  }

  private assertParkable(call: string): void {
    if (!this.parkable)
      throw new JobsError('INVALID_OPTION', `run.${call}: a run of a batch handler cannot park (its batch would wait for it)`)
  }

  /** Parks the run: it ends so, its job scheduled as `park` says, and the call that parked it never answers. */
  private park(park: Park): Promise<never> {
    if (this.parked === null) {
      this.parked = park
      this.onPark?.(park)
    }
    return never()
  }

  setProgress(progress: unknown): void {
    const json = encodeJson(progress, 'progress', MAX_PROGRESS_BYTES)
    if (this.lost || this.abortReason) return
    publishProgress(this.progressKey, json as string)
    sendProgress(this.connection, this.progressKey, json as string)
  }

  fail(reason: string): Outcome {
    return outcome('fail', { reason: typeof reason === 'string' && reason !== '' ? reason : 'failed by the handler' })
  }

  retry(delay: Duration = 0): Outcome {
    return outcome('retry', { delayMs: toMs(delay, 'retry delay') })
  }

  snooze(delay: Duration = 0): Outcome {
    return outcome('snooze', { delayMs: toMs(delay, 'snooze delay') })
  }

  /** @internal */
  abort(reason: JobsError): void {
    if (this.abortReason) return
    this.abortReason = reason
    this.controller?.abort(reason)
  }

  /** @internal */
  loseLease(why?: string): void {
    if (this.lost) return
    this.lost = true
    const message = why ?? `job '${this.id}' of queue '${this.queue}' lost its lease for attempt ${this.attempt}: another worker may run it`
    this.abort(new JobsError('LEASE_LOST', `${message}; this run's writes are refused`))
  }

  /** @internal */
  endProgress(): void {
    endProgress(this.progressKey)
    endNoticeProgress(this.connection, this.progressKey)
  }

  private assertHeld(): void {
    if (this.lost) throw this.abortReason
  }
}
