/**
 * The runs under way in one worker: started from claimed jobs, ended once,
 * and waited on by `stop`. It keeps the worker's side of the runs-alone rule
 * (engine/alone.ts) and of a claim that takes a job whose earlier run is
 * still here (engine/lease.ts).
 *
 * It also keeps the jobs claimed ahead: claimed and leased like the rest,
 * but waiting in the worker, in claim order, for a slot (flush.ts says how
 * many a claim takes ahead, and when).
 */
import type { Connection } from '../dialect/index.js'
import { AloneRun } from '../engine/alone.js'
import { leaseTakenOver } from '../engine/lease.js'
import { RunContext } from '../engine/run.js'
import type { ClaimedJob } from '../dialect/index.js'

/** The runs under way in one worker. @internal */
export class ActiveRuns {
  private readonly runs = new Map<number, RunContext>()
  private readonly alone = new AloneRun()
  /** Jobs claimed ahead of a free slot, in claim order: each starts as a run ends. */
  private readonly waiting: ClaimedJob[] = []
  private settledWaiters: Array<() => void> = []

  constructor(
    private readonly connection: Connection,
    private readonly owner: string,
    private readonly queue: string,
    /** The worker's lease, its clock and length: a run renews its own lease before each step's function. */
    private readonly lease: { clock: () => number; ms: number },
  ) {}

  get size(): number {
    return this.runs.size
  }

  /** How many claimed jobs wait here for a slot. */
  get aheadSize(): number {
    return this.waiting.length
  }

  /** Keeps a claimed job until a slot frees (`nextAhead`). */
  holdAhead(job: ClaimedJob): void {
    this.waiting.push(job)
  }

  /** The first job claimed ahead, taken from the ones waiting, if any. */
  nextAhead(): ClaimedJob | undefined {
    return this.waiting.shift()
  }

  /** The jobs claimed ahead, in claim order (a copy). */
  ahead(): ClaimedJob[] {
    return [...this.waiting]
  }

  /** Takes every job claimed ahead: a stop hands them back. */
  takeAhead(): ClaimedJob[] {
    return this.waiting.splice(0)
  }

  /** Drops jobs claimed ahead whose lease was taken (a cancel): they never start. */
  dropAhead(jobs: readonly ClaimedJob[]): void {
    const dropped = new Set(jobs)
    const kept = this.waiting.filter((job) => !dropped.has(job))
    this.waiting.splice(0, this.waiting.length, ...kept)
  }

  /** Whether the worker may claim: not while it runs a job alone. */
  get mayClaim(): boolean {
    return !this.alone.blocking
  }

  values(): IterableIterator<RunContext> {
    return this.runs.values()
  }

  /** Starts the run of a claimed job. */
  start(job: ClaimedJob): RunContext {
    leaseTakenOver(this.runs.get(job.seq))
    this.alone.started(job)
    const run = new RunContext(this.connection, this.owner, this.queue, job, this.lease)
    this.runs.set(job.seq, run)
    return run
  }

  /** Ends `run`; answers false when it had ended already (a stop that gave up on it, or a new run of its job). */
  end(run: RunContext): boolean {
    if (this.runs.get(run.seq) !== run) return false
    this.runs.delete(run.seq)
    this.alone.ended(run.seq)
    run.endProgress()
    if (this.runs.size === 0) for (const waiter of this.settledWaiters.splice(0)) waiter()
    return true
  }

  /** Ends every run still under way at once (a stop that gave up waiting), answering them. */
  endAll(): RunContext[] {
    const ended = [...this.runs.values()]
    for (const run of ended) run.endProgress()
    this.runs.clear()
    return ended
  }

  /** Resolves true once no run is under way, or false after `ms` (null: no limit). */
  settledWithin(ms: number | null): Promise<boolean> {
    if (this.runs.size === 0) return Promise.resolve(true)
    return new Promise((resolve) => {
      const timer = ms === null ? null : setTimeout(() => resolve(false), ms)
      this.settledWaiters.push(() => {
        if (timer) clearTimeout(timer)
        resolve(true)
      })
    })
  }
}
