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
import type { ClaimedJob, WorkerLease } from '../dialect/index.js'
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

/** A cap per group that never binds: the candidates' statement takes one, and a rate's cap per group may come alone. */
const NO_GROUP_CAP = 2 ** 31 - 1

export function* claimJobs(
  db: Executor,
  queue: QueueDefinition,
  request: ClaimRequest,
  moved: CountShift,
  hold?: ClaimReport,
): Program<ClaimedJob[]> {
  // The runs this transaction ended so far (moved.running is negative by them): their slots are free for this claim.
  const askedAt = performance.now()
  const counts = yield* ask(db.queueClaimLimits(queue.name, Math.max(0, -moved.running)))
  if (hold && counts && request.held !== undefined) hold.othersRunning = Math.max(0, counts.running - request.held)
  if (counts?.paused) return []
  const limits: QueueLimits = { total: counts?.concurrency ?? null, perGroup: counts?.perGroup ?? null }
  const rate =
    counts === undefined
      ? null
      : rateOf({ rateLimit: counts.rateLimit ?? null, ratePer: counts.ratePer ?? null, ratePerGroup: counts.ratePerGroup ?? null })
  let limit = request.limit
  // A claimed job counts as running against a limit: under one, a worker claims only what it starts now.
  if (limits.total !== null || limits.perGroup !== null || rate !== null) limit -= request.ahead ?? 0
  if (limits.total !== null) {
    const wanted = limit
    limit = Math.min(limit, limits.total - (counts?.running ?? 0))
    if (request.held !== undefined) {
      const waiters = new ClaimWaiters(counts?.claimWaiters, counts?.rateNow ?? request.now)
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
  const unsure = counts?.rateNow == null ? 0 : performance.now() - askedAt
  const log = rate === null ? null : new RateLog(rate, counts?.rateStarts, counts?.rateNow ?? readAt)
  if (log !== null) {
    limit = Math.min(limit, log.room())
    if (limit <= 0) {
      if (hold) hold.waitMs = log.opensAt() - log.now
      return []
    }
  }
  const passOver = request.passOver ?? NONE
  const alone = aloneClaim(
    yield* ask(db.jobGetFirstAbandoned({ queue: queue.name, now: request.now })),
    request.idle,
    passOver,
    request.now,
  )
  const gate: GroupGate = { perGroup: limits.perGroup, log, heldBack: null }
  let claimed: ClaimedJob[] = []
  if (alone.take) claimed = yield* claimAlone(db, queue, gate, alone.take)
  if (claimed.length === 0 && !alone.holdBack) {
    if (limits.perGroup === null && (rate === null || rate.perGroup === null)) {
      claimed = yield* claimInOrder(db, queue, limit, request.now, alone.passOver, passOver)
      if (log !== null) for (const job of claimed) log.add(job.grp)
    } else {
      claimed = yield* claimUnderGroupCap(db, queue, gate, limit, request.now, alone.passOver, passOver)
    }
  }
  if (log !== null && hold) {
    const opensAt = log.room() === 0 ? log.opensAt() : gate.heldBack
    hold.waitMs = opensAt === null ? null : Math.max(0, opensAt - log.now)
  }
  if (claimed.length === 0) return claimed
  const seqs = claimed.map((job) => job.seq)
  const marked = yield* ask(db.jobSetRunningMany(seqs, request.owner))
  // What was read in this write transaction is still runnable: nothing else can write meanwhile.
  if (marked !== claimed.length)
    throw new Error(`drizzle-jobs: only ${marked} of ${claimed.length} jobs read for a claim were runnable within the same transaction`)
  // A run's lease is its worker's row: a claim renews it when it has not been renewed for a while, so that no job is
  // claimed under a lease about to expire.
  if (request.renewLease) yield* ask(db.workerRenew(request.renewLease))
  for (const job of claimed) shift(moved, job.claimedFrom, 'running')
  if (log !== null) {
    // Stamped now, on the log's clock: the server's as read under the lock, moved on by the time this process saw pass.
    log.stamp(log.now + (clock() - readAt))
    if (hold) hold.startBy = performance.now() + rateSlackMs(log.rate) - unsure
    yield* ask(db.queueRateStartsSet(queue.name, JSON.stringify(log)))
  }
  return claimed
}

/**
 * What lets a job of a group start: the runs under way of its group below the concurrency's cap per group, and
 * its group's starts in the rate's window below the rate's. `heldBack` is the earliest time a group passed over
 * for its rate may start, if one was.
 */
interface GroupGate {
  perGroup: number | null
  log: RateLog | null
  heldBack: number | null
}

/** Whether the rate lets a job of `grp` start; notes when it will if not. */
function rateLets(gate: GroupGate, grp: string | null): boolean {
  if (gate.log === null || gate.log.groupHasRoom(grp)) return true
  const opensAt = gate.log.groupOpensAt(grp)
  gate.heldBack = gate.heldBack === null ? opensAt : Math.min(gate.heldBack, opensAt)
  return false
}

/** The runnable jobs to claim, in claim order, but for those passed over: it reads as many more as it may pass over. */
function* claimInOrder(
  db: Executor,
  queue: QueueDefinition,
  limit: number,
  now: number,
  skipAbandoned: boolean,
  passOver: ReadonlySet<number>,
): Program<ClaimedJob[]> {
  const jobs = yield* ask(db.jobGetAvailable({ queue: queue.name, now, limit: limit + passOver.size }, skipAbandoned))
  return passOver.size === 0 ? jobs : jobs.filter((job) => !passOver.has(job.seq)).slice(0, limit)
}

/** The abandoned job, unless its group is at its cap, or at its rate's. */
function* claimAlone(db: Executor, queue: QueueDefinition, gate: GroupGate, job: ClaimedJob): Program<ClaimedJob[]> {
  if (gate.perGroup !== null && job.grp !== null && ((yield* groupsRunning(db, queue)).get(job.grp) ?? 0) >= gate.perGroup) return []
  if (!rateLets(gate, job.grp)) return []
  if (gate.log !== null) gate.log.add(job.grp)
  return [job]
}

/**
 * Walks candidates in claim order, skipping jobs whose group is at its cap (runs under way, or starts in the rate's
 * window), counting the ones taken here too.
 */
function* claimUnderGroupCap(
  db: Executor,
  queue: QueueDefinition,
  gate: GroupGate,
  limit: number,
  now: number,
  skipAbandoned: boolean,
  passOver: ReadonlySet<number>,
): Program<ClaimedJob[]> {
  const perGroup = gate.perGroup ?? NO_GROUP_CAP
  const candidates = yield* ask(
    db.jobGetAvailableByGroup({
      queue: queue.name,
      now,
      perGroup,
      limit: limit * 4 + 16 + passOver.size,
      skipAbandoned: skipAbandoned ? 1 : 0,
    }),
  )
  const running = gate.perGroup === null ? new Map<string, number>() : yield* groupsRunning(db, queue)
  const claimed: ClaimedJob[] = []
  for (const candidate of candidates) {
    if (claimed.length === limit) break
    if (passOver.has(candidate.seq)) continue
    if (candidate.grp !== null) {
      const inGroup = running.get(candidate.grp) ?? 0
      if (inGroup >= perGroup) continue
      if (!rateLets(gate, candidate.grp)) continue
      running.set(candidate.grp, inGroup + 1)
    }
    const job = yield* ask(db.jobGetAvailableOne(candidate.seq))
    if (!job) continue
    claimed.push(job)
    // Counted at once, so that the next candidate of its group meets the cap.
    if (gate.log !== null) gate.log.add(job.grp)
  }
  return claimed
}

function* groupsRunning(db: Executor, queue: QueueDefinition): Program<Map<string, number>> {
  const rows = yield* ask(db.jobCountRunningByGroup(queue.name))
  return new Map(rows.map((row) => [row.grp, row.running]))
}
