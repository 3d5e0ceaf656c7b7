/**
 * The one place for the rule that a job whose last run was abandoned runs
 * alone. A run taken back from a worker that died or went silent past its
 * lease may be what killed it: its job's next run goes alone in its worker,
 * so a job that kills its process takes no innocent job down with it.
 *
 * - Marking: a rescued run's end sets the job's `abandoned` flag (outcome.ts
 *   writes it from `runsAloneNext`); any other end clears it.
 * - Claiming: a worker takes such a job only when it runs nothing else, and
 *   passes over it otherwise; once it has waited `ABANDONED_PATIENCE_MS`,
 *   busy workers claim nothing new until one of them is idle and takes it.
 * - Running: while the job runs, its worker claims nothing else.
 */
import { ABANDONED_PATIENCE_MS } from '../limits.js'
import type { ClaimedJob } from '../dialect/index.js'

/** How a run ended without an outcome: taken back by a rescue, ended by its own worker's stop, or found running with no lease. */
export type Abandonment = 'rescued' | 'stopped' | 'unleased'

/** Whether the job's next run goes alone: only after a rescue. A stop or a missing lease says nothing against the job. */
export function runsAloneNext(how: Abandonment): boolean {
  return how === 'rescued'
}

/** What a claim does about the first due job that must run alone. */
export interface AloneClaim {
  /** The job to claim, alone: the claiming worker runs nothing. */
  take: number | null
  /** Whether the claim's other candidates leave out the jobs that must run alone. */
  passOver: boolean
  /** Whether the claim takes nothing else: the job has waited long enough for a busy worker to free up for it. */
  holdBack: boolean
}

/**
 * Decides, for a claim by a worker that is `idle` or not, what to do about the first due job that must run alone
 * (its seq and when it was due, as the flush read them with the queue's policy; null for none).
 */
export function aloneClaim(
  first: { seq: number | null; runAt: number | null },
  idle: boolean,
  endedHere: ReadonlySet<number>,
  now: number,
): AloneClaim {
  if (first.seq === null) return { take: null, passOver: false, holdBack: false }
  return {
    take: idle && !endedHere.has(first.seq) ? first.seq : null,
    passOver: true,
    holdBack: now - (first.runAt ?? now) >= ABANDONED_PATIENCE_MS,
  }
}

/** A worker's side of the rule: the job it runs alone, if any; until it ends, the worker claims nothing. */
export class AloneRun {
  private seq: number | null = null

  /** Notes a run the worker starts. */
  started(job: ClaimedJob): void {
    if (job.abandoned) this.seq = job.seq
  }

  /** Notes a run of the worker that ended. */
  ended(seq: number): void {
    if (this.seq === seq) this.seq = null
  }

  /** Whether the worker runs a job alone now, and so claims nothing. */
  get blocking(): boolean {
    return this.seq !== null
  }
}
