/**
 * Claiming: inside the caller's `BEGIN IMMEDIATE` transaction, take up to
 * `limit` runnable jobs in claim order (priority, run_at, seq — JOB-17),
 * count their attempt (JOB-04), and lease them. The queue's concurrency is
 * decided here, from the database: the limits stored in `jobs_queue` (the
 * last started worker's, JOB-19, not the claiming process's definition) and
 * the runs under way, so it holds across processes (JOB-07).
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
import type { ClaimedJob } from '../dialect/index.js'
import { aloneClaim } from './alone.js'

export interface ClaimRequest {
  limit: number
  /** Whether the claiming worker runs nothing now: only then may it take an abandoned job. */
  idle: boolean
  owner: string
  leaseMs: number
  now: number
  channel: string | null
  /** Jobs whose runs this transaction ended: a later transaction claims them. */
  passOver?: ReadonlySet<number>
}

const NONE: ReadonlySet<number> = new Set()

export function* claimJobs(db: Executor, queue: QueueDefinition, request: ClaimRequest, moved: CountShift): Program<ClaimedJob[]> {
  const counts = yield* ask(db.queueClaimLimits(queue.name))
  if (counts?.paused) return []
  const limits: QueueLimits = { total: counts?.concurrency ?? null, perGroup: counts?.perGroup ?? null }
  let limit = request.limit
  if (limits.total !== null) limit = Math.min(limit, limits.total - (counts?.running ?? 0))
  if (limit <= 0) return []
  const passOver = request.passOver ?? NONE
  const alone = aloneClaim(yield* ask(db.jobGetFirstAbandoned({ queue: queue.name, now: request.now })), request.idle, passOver, request.now)
  let claimed: ClaimedJob[] = []
  if (alone.take) claimed = yield* claimAlone(db, queue, limits.perGroup, alone.take)
  if (claimed.length === 0 && !alone.holdBack) {
    claimed =
      limits.perGroup === null
        ? yield* claimInOrder(db, queue, limit, request.now, alone.passOver, passOver)
        : yield* claimUnderGroupCap(db, queue, limits.perGroup, limit, request.now, alone.passOver, passOver)
  }
  if (claimed.length === 0) return claimed
  const seqs = claimed.map((job) => job.seq)
  const marked = yield* ask(db.jobSetRunningMany(seqs))
  // What was read in this write transaction is still runnable: nothing else can write meanwhile.
  if (marked !== claimed.length) throw new Error(`drizzle-jobs: only ${marked} of ${claimed.length} jobs read for a claim were runnable within the same transaction`)
  yield* ask(db.leaseInsertMany(seqs, { owner: request.owner, expiresAt: request.now + request.leaseMs, channel: request.channel }))
  for (const job of claimed) shift(moved, job.claimedFrom, 'running')
  return claimed
}

/** The runnable jobs to claim, in claim order, but for those passed over: it reads as many more as it may pass over. */
function* claimInOrder(db: Executor, queue: QueueDefinition, limit: number, now: number, skipAbandoned: boolean, passOver: ReadonlySet<number>): Program<ClaimedJob[]> {
  const jobs = yield* ask(db.jobGetAvailable({ queue: queue.name, now, limit: limit + passOver.size }, skipAbandoned))
  return passOver.size === 0 ? jobs : jobs.filter((job) => !passOver.has(job.seq)).slice(0, limit)
}

/** The abandoned job, unless its group is at its cap. */
function* claimAlone(db: Executor, queue: QueueDefinition, perGroup: number | null, job: ClaimedJob): Program<ClaimedJob[]> {
  if (perGroup !== null && job.grp !== null && ((yield* groupsRunning(db, queue)).get(job.grp) ?? 0) >= perGroup) return []
  return [job]
}

/** Walks candidates in claim order, skipping jobs whose group is at its cap, counting the ones taken here too. */
function* claimUnderGroupCap(db: Executor, queue: QueueDefinition, perGroup: number, limit: number, now: number, skipAbandoned: boolean, passOver: ReadonlySet<number>): Program<ClaimedJob[]> {
  const candidates = yield* ask(db.jobGetAvailableByGroup({ queue: queue.name, now, perGroup, limit: limit * 4 + 16 + passOver.size, skipAbandoned: skipAbandoned ? 1 : 0 }))
  const running = yield* groupsRunning(db, queue)
  const claimed: ClaimedJob[] = []
  for (const candidate of candidates) {
    if (claimed.length === limit) break
    if (passOver.has(candidate.seq)) continue
    if (candidate.grp !== null) {
      const inGroup = running.get(candidate.grp) ?? 0
      if (inGroup >= perGroup) continue
      running.set(candidate.grp, inGroup + 1)
    }
    const job = yield* ask(db.jobGetAvailableOne(candidate.seq))
    if (job) claimed.push(job)
  }
  return claimed
}

function* groupsRunning(db: Executor, queue: QueueDefinition): Program<Map<string, number>> {
  const rows = yield* ask(db.leaseCountByGroup(queue.name))
  return new Map(rows.map((row) => [row.grp, row.running]))
}
