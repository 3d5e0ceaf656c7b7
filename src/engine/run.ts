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
import { MAX_PROGRESS_BYTES, MAX_VALUE_BYTES, STEP_LEASE_MARGIN } from '../limits.js'
import { retryWhileBusy } from './busy.js'
import { confirmLease } from './lease.js'
import type { JsonShape } from '../types.js'
import { outcome, type Outcome } from './outcome.js'
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
  /** Sets the run's live progress: JSON of at most 4 KiB (TOO_LARGE beyond), in memory only (JOB-12). */
  setProgress<P extends JsonShape<P>>(progress: P): void
  /** Ends the job `failed` now, with `reason` as its error (at most 64 KiB of UTF-8 is kept, cut with a marker beyond). Return what it returns. */
  fail(reason: string): Outcome
  /** Runs the job again after `delay`, counting this attempt (`failed` if it was the last). Return what it returns. */
  retry(delay?: Duration): Outcome
  /** Runs the job again after `delay`, not counting this attempt. Return what it returns. */
  snooze(delay?: Duration): Outcome
}

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
