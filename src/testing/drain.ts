/**
 * Running a queue's jobs inline in a test, through the engine's own claim,
 * outcome and record modules, so a job ends exactly as a worker would end it.
 */
import { ask, type Connection, type JobEnd } from '../dialect/index.js'
import { connectionOf, type Database } from '../dialect/open.js'
import { describe } from '../duration.js'
import { JobsError } from '../errors.js'
import { DEFAULT_DRAIN_MAX_RUNS, DEFAULT_LEASE_MS } from '../limits.js'
import { checkQueue, positiveInteger, type Queue } from '../queue/define.js'
import { jobsChanged, onJobsChanged } from '../engine/wake.js'
import type { Claimable, JobRow } from '../dialect/index.js'
import type { JobState } from '../types.js'
import { claimPlanner, type ClaimReport } from '../engine/claim.js'
import { otel } from '../telemetry/api.js'
import { execute } from '../engine/executor.js'
import { handedBack } from '../engine/outcome.js'
import { checkLeases } from '../engine/lease.js'
import { newOwner, OWN_HOST_AND_PID } from '../engine/owner.js'
import { storeLimits } from '../engine/queue-limits.js'
import { RunContext, type Run } from '../engine/run.js'
import type { Handler, HandlerAnswer } from '../worker/worker.js'
import { checkKnownOptions } from '../options.js'

/** The options of {@link drain}. */
export interface DrainOptions {
  /** Runs after which drain gives up on a queue that never empties (a handler that snoozes with no delay, say). Defaults to 10,000. */
  maxRuns?: number
}

/** One run that {@link drain} made, and the state its job was left in. */
export interface DrainedRun {
  id: string
  attempt: number
  state: JobState
  /** The job's error after the run (a failed attempt's message), or null. */
  error: string | null
}

/** What {@link drain} did: runs made, jobs left in each state by them, and each run in order. */
export interface DrainResult {
  ran: number
  done: number
  failed: number
  /** Runs after which the job was scheduled again: a retry, a snooze, a failed attempt with attempts left. */
  scheduled: number
  /** Runs whose job was canceled while they ran. */
  canceled: number
  runs: DrainedRun[]
}

const DRAIN_OPTIONS = new Set(['maxRuns'])

/**
 * drain runs every due job of `queue` with `handler`, one at a time, in
 * claim order (JOB-17), until none is due, and answers what it did. Jobs
 * that the handler adds are run too, when due. Each run is claimed, counted
 * (JOB-04), leased, timed out, and ended exactly as a worker does it
 * (JOB-08): steps are kept (JOB-06), `run.signal` aborts on the
 * queue's `timeout` (JOB-10) and on {@link cancel}, and a failed attempt
 * with attempts left is scheduled after the backoff — later, so drain does
 * not run it again (define the test's queue with `backoff: { initial: 0 }`
 * to drain retries too). A paused queue drains nothing. A queue's `rate`
 * holds as under workers (JOB-22): drain waits for its window to open.
 *
 * Throws INVALID_OPTION for a bad option; TIMEOUT when jobs are still due
 * after `maxRuns` runs; SCHEMA_MISSING when the tables were not migrated.
 * A handler's own errors are not thrown: they fail its job's attempt.
 *
 * @example
 * import { drain } from 'drizzle-jobs/testing'
 * await postMessage(app, 'hello')
 * const result = await drain(db, replies, replyHandler)
 * expect(result.done).toBe(1)
 */
export async function drain<T, R, A extends HandlerAnswer<A, R>>(
  db: Database,
  queue: Queue<T, R>,
  handler: (value: NoInfer<T>, run: Run) => A | Promise<A>,
  options: DrainOptions = {},
): Promise<DrainResult> {
  if (typeof options !== 'object' || options === null)
    throw new JobsError('INVALID_OPTION', `options: expected an object, got ${describe(options)}`)
  checkKnownOptions(options, DRAIN_OPTIONS, 'drain')
  if (typeof handler !== 'function') throw new JobsError('INVALID_OPTION', `handler: expected a function, got ${describe(handler)}`)
  const maxRuns = positiveInteger(options.maxRuns, 'maxRuns', DEFAULT_DRAIN_MAX_RUNS)
  const connection = connectionOf(db)
  const definition = checkQueue(queue)
  const owner = newOwner()
  // Loaded before the first claim, as a worker does: not between a rated claim's stamp and its handler's call.
  otel()
  // The lease outlives the run's timeout, so drain never has to renew it.
  const leaseMs = definition.timeoutMs + DEFAULT_LEASE_MS
  const result: DrainResult = { ran: 0, done: 0, failed: 0, scheduled: 0, canceled: 0, runs: [] }
  // As a worker's start does: the definition's limits become the queue's (JOB-19), and claims follow them.
  const replaced = await connection.write((db) => storeLimits(db, definition, Date.now()))
  if (replaced !== null) console.warn(replaced)

  try {
    for (;;) {
      if (result.ran >= maxRuns) {
        if (!isDue(await connection.executor.queueGetClaimable(definition.name), Date.now())) break
        throw new JobsError(
          'TIMEOUT',
          `drain made ${maxRuns} runs of queue '${definition.name}' and jobs are still due: does a handler snooze or retry with no delay? Raise maxRuns if the queue is that long`,
        )
      }
      const hold: ClaimReport = { waitMs: null }
      const now = Date.now()
      // Each claim writes the drain's row for the job it takes: the lease outlives the run's timeout.
      const renewLease = { owner, ...OWN_HOST_AND_PID, expiresAt: now + leaseMs, channel: null }
      const planner = claimPlanner(definition.name, { limit: 1, idle: true, owner, now, renewLease, clock: Date.now }, hold)
      const {
        claimed: [job],
      } = await connection.write((db) =>
        ask(db.jobFlush({ queue: definition.name, owner, now, clock: Date.now, ends: [], claim: planner })),
      )
      if (!job && hold.waitMs !== null && isDue(await connection.executor.queueGetClaimable(definition.name), Date.now())) {
        // The queue's rate holds the due jobs back (JOB-22): they run when its window opens, as under a worker.
        await new Promise((resolve) => setTimeout(resolve, hold.waitMs! + 1))
        continue
      }
      if (!job) break
      if (hold.startBy != null && performance.now() > hold.startBy) {
        // Its handler cannot be called within the rate's slack of its stamped start: back unstarted, its attempt
        // refunded, as a worker hands it back (engine/rate.ts); the start still counts, and the next claim waits.
        await writeEnds(connection, definition.name, owner, [{ seq: job.seq, attempt: job.attempts, transition: handedBack(job) }])
        continue
      }
      jobsChanged(connection.key, definition.name, 'claimed', [job.seq])
      const run = new RunContext(connection, owner, definition.name, job, { clock: Date.now, ms: leaseMs })
      const unsubscribe = onJobsChanged(connection.key, (_queue, kind) => {
        if (kind === 'revoked') void checkLeases(connection, owner, [run])
      })
      const transition = await execute(definition, run, job.value, handler as Handler<unknown>, Date.now)
      unsubscribe()
      run.endProgress()
      if (transition) {
        await writeEnds(connection, definition.name, owner, [{ seq: run.seq, attempt: run.attempt, transition }])
        jobsChanged(connection.key, definition.name, 'ended', [run.seq])
      }
      tally(result, run, await connection.executor.jobGetOutcome(run.seq))
    }
  } finally {
    // The drain holds no job now: its row goes (where the database is busy, it expires instead).
    await Promise.resolve()
      .then(() => connection.executor.workerDelete(owner))
      .catch(() => {})
  }
  return result
}

function isDue(counts: Claimable | undefined, now: number): boolean {
  if (!counts || counts.paused) return false
  return counts.waiting > 0 || (counts.nextScheduled !== null && counts.nextScheduled <= now)
}

/** Counts a run by the state it left its job in (a job pruned or deleted meanwhile counts as canceled). */
function tally(result: DrainResult, run: RunContext, job: Pick<JobRow, 'state' | 'error'> | undefined): void {
  result.ran++
  const state = job?.state ?? 'canceled'
  if (state === 'done' || state === 'failed' || state === 'scheduled' || state === 'canceled') result[state]++
  result.runs.push({ id: run.id, attempt: run.attempt, state, error: job?.error ?? null })
}

/** Writes a drain's ends as a worker's flush writes them, claiming nothing. */
async function writeEnds(connection: Connection, queue: string, owner: string, ends: JobEnd[]): Promise<void> {
  await connection.write((db) => ask(db.jobFlush({ queue, owner, now: Date.now(), clock: Date.now, ends, claim: null })))
}
