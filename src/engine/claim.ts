/**
 * Claiming: inside the caller's `BEGIN IMMEDIATE` transaction, take up to
 * `limit` runnable jobs in claim order (priority, run_at, seq — JOB-17),
 * count their attempt (JOB-04), and lease them. The queue's concurrency is
 * decided here, from the database: the limits stored in `jobs_queue` (the
 * last started worker's, JOB-19, not the claiming process's definition) and
 * the runs under way, so it holds across processes (JOB-07).
 *
 * A queue's rate (JOB-22) is decided here too, in the same transaction, from
 * its log of recent starts (rate.ts): the claim takes no more than the
 * window has room for, passes over groups at their own rate cap, appends its
 * starts to the log and writes it back. When the rate held jobs back, the
 * claim says in `hold` how long until the window opens, so that an idle
 * worker wakes then rather than on its next poll.
 *
 * While several workers want more runs than a queue's concurrency lets them
 * have, each claims no more than its share of it (fair-share.ts): the
 * claimer says here that it waits, and counts the others that do.
 *
 * A due job whose last run was abandoned runs alone: alone.ts holds that
 * rule, and the claim asks it what to take.
 *
 * A claim never takes a job whose run ended in the same transaction
 * (`passOver`): the end commits first, so watchers see it (a retry's
 * `scheduled` and its error), and a later transaction claims the job again.
 */
import { ask, type Executor, type Program } from '../dialect/index.js'
import { shift, type CountShift } from '../engine/counts.js'
import type { QueueDefinition } from './definition.js'
import type { QueueLimits } from './queue-limits.js'
import type { ClaimedJob, ClaimTake, ClaimTaken, WorkerLease } from '../dialect/index.js'
import { aloneClaim } from './alone.js'
import { RateLog, rateOf, rateSlackMs } from './rate.js'
import { ClaimWaiters } from './fair-share.js'
import { CLAIM_WAIT_MS } from '../limits.js'

export interface ClaimRequest {
  limit: number
  /**
   * Of `limit`, how many would wait in the worker for a slot (claimed ahead). A queue with a `concurrency`, a cap
   * per group or a `rate` takes none of them: there every claimed job counts against the limit as it waits.
   */
  ahead?: number
  /** Whether the claiming worker runs nothing now: only then may it take an abandoned job. */
  idle: boolean
  owner: string
  now: number
  /** The worker's row to write in the claim's transaction when it claims jobs (its lease was last renewed long ago), or null. */
  renewLease: WorkerLease | null
  /** Jobs whose runs this transaction ended: a later transaction claims them. */
  passOver?: ReadonlySet<number>
  /**
   * The claiming worker's clock, asked inside the transaction (once the write lock is held) for the time a rate's
   * starts are stamped with, on SQLite; PostgreSQL stamps them with the server's clock. Defaults to `now`.
   */
  clock?: () => number
  /**
   * The runs of this queue the claiming worker holds, counted after the ends this transaction wrote (its runs and the
   * jobs it claimed ahead): with it, the claim takes no more than the worker's share of the queue's concurrency while
   * other workers wait for theirs (fair-share.ts). Without it (a drain), the claim neither waits nor counts waiters.
   */
  held?: number
  /** How long the claimer's entry among the waiters counts, in ms: a few of its poll intervals. Defaults to CLAIM_WAIT_MS. */
  waitMs?: number
}

/** What a claim tells its worker beside the jobs it took: of a rate that held jobs back (JOB-22), of the share of the concurrency it waits for, of the other workers' runs. */
export interface ClaimReport {
  /** How long until the rate lets the next job start, in ms; null when it held nothing back. */
  waitMs: number | null
  /**
   * When the claim stamped its starts, plus the rate's slack, less the time the log's clock could have been read
   * before the claim saw it (a server's answer that reached a busy process late), on `performance.now()`'s clock:
   * a run whose handler cannot be called by then is handed back unstarted (rate.ts), so that every handler is
   * called within the slack after its stamp. Null when the claim made no start under a rate.
   */
  startBy?: number | null
  /** How long the claimer's entry among the waiters for a share of the concurrency still counts, in ms: 0 when it waits for none. */
  waitingMs?: number
  /** The queue's runs under way that are not the claimer's (`running` less `held`), as the claim read them, when it read them. */
  othersRunning?: number
}

const NONE: ReadonlySet<number> = new Set()

/**
 * How many runnable jobs a claim under a cap per group looks at, for each it may take: the jobs of groups at their
 * cap are passed over, and a claim that looked no further would take fewer than it could.
 */
const GROUP_LOOK_AHEAD = 4
const GROUP_LOOK_EXTRA = 16

/**
 * Claims for `request`: the queue's policy read in the transaction (queueClaimLimits), worked out here into the
 * bounds of one claim (Executor.jobClaim), whose starts the rate's log then counts.
 */
export function* claimJobs(
  db: Executor,
  queue: QueueDefinition,
  request: ClaimRequest,
  moved: CountShift,
  hold?: ClaimReport,
): Program<ClaimedJob[]> {
  // The runs this transaction ended so far (moved.running is negative by them): their slots are free for this claim.
  const askedAt = performance.now()
  const counts = yield* ask(db.queueClaimLimits(queue.name, Math.max(0, -moved.running), request.now))
  if (hold && request.held !== undefined) hold.othersRunning = Math.max(0, counts.running - request.held)
  if (counts.paused) return []
  const limits: QueueLimits = { total: counts.concurrency ?? null, perGroup: counts.perGroup ?? null }
  const rate = rateOf({ rateLimit: counts.rateLimit ?? null, ratePer: counts.ratePer ?? null, ratePerGroup: counts.ratePerGroup ?? null })
  let limit = request.limit
  // A claimed job counts as running against a limit: under one, a worker claims only what it starts now.
  if (limits.total !== null || limits.perGroup !== null || rate !== null) limit -= request.ahead ?? 0
  if (limits.total !== null) {
    const wanted = limit
    limit = Math.min(limit, limits.total - counts.running)
    if (request.held !== undefined) {
      const waiters = new ClaimWaiters(counts.claimWaiters, counts.rateNow ?? request.now)
      limit = Math.min(limit, waiters.room(request.owner, limits.total, request.held))
      const next = waiters.next(request.owner, limit < wanted, request.waitMs ?? CLAIM_WAIT_MS)
      if (next !== undefined) yield* ask(db.queueClaimWaitersSet(queue.name, next))
      if (hold) hold.waitingMs = waiters.remaining(request.owner)
    }
  }
  if (limit <= 0) return []
  const clock = request.clock ?? (() => request.now)
  const readAt = clock()
  // The log's clock, when the database keeps it, was read at some moment between the ask and now: the stamp below
  // may be that much earlier than the moment it stands for, and the run's deadline counts it.
  const unsure = counts.rateNow == null ? 0 : performance.now() - askedAt
  const log = rate === null ? null : new RateLog(rate, counts.rateStarts, counts.rateNow ?? readAt)
  if (log !== null) {
    limit = Math.min(limit, log.room())
    if (limit <= 0) {
      if (hold) hold.waitMs = log.opensAt() - log.now
      return []
    }
  }
  const passOver = request.passOver ?? NONE
  const alone = aloneClaim({ seq: counts.aloneSeq, runAt: counts.aloneRunAt }, request.idle, passOver, request.now)
  const groupRoom = log?.groupRooms() ?? null
  const grouped = limits.perGroup !== null || groupRoom !== null
  const take: ClaimTake = {
    queue: queue.name,
    owner: request.owner,
    now: request.now,
    limit,
    window: grouped ? limit * GROUP_LOOK_AHEAD + GROUP_LOOK_EXTRA : limit,
    passOver: [...passOver],
    skipAbandoned: alone.passOver,
    only: null,
    perGroup: limits.perGroup,
    groupRoom,
    renewLease: request.renewLease,
  }
  // A job that must run alone goes to an idle worker first; if its group's caps hold it back, the others may go.
  let taken: ClaimTaken = { claimed: [], heldBack: [] }
  if (alone.take !== null) taken = yield* ask(db.jobClaim({ ...take, limit: 1, window: 1, only: alone.take, skipAbandoned: false }))
  if (taken.claimed.length === 0 && !alone.holdBack) {
    const heldBack = taken.heldBack
    taken = yield* ask(db.jobClaim(take))
    taken.heldBack.push(...heldBack)
  }
  const { claimed } = taken
  if (log !== null) {
    for (const job of claimed) log.add(job.grp)
    if (hold) {
      // A group the rate held back opens again later: the worker looks again then, not on its next poll.
      const heldBack = taken.heldBack.length === 0 ? null : Math.min(...taken.heldBack.map((grp) => log.groupOpensAt(grp)))
      const opensAt = log.room() === 0 ? log.opensAt() : heldBack
      hold.waitMs = opensAt === null ? null : Math.max(0, opensAt - log.now)
    }
  }
  if (claimed.length === 0) return claimed
  for (const job of claimed) shift(moved, job.claimedFrom, 'running')
  if (log !== null) {
    // Stamped now, on the log's clock: the server's as read under the lock, moved on by the time this process saw pass.
    log.stamp(log.now + (clock() - readAt))
    if (hold) hold.startBy = performance.now() + rateSlackMs(log.rate) - unsure
    yield* ask(db.queueRateStartsSet(queue.name, JSON.stringify(log)))
  }
  return claimed
}
