/**
 * The claim's plan: from a queue's policy, read by the flush in its
 * transaction (the limits stored in `jobs_queue` by the last started worker,
 * JOB-19, the runs under way, the rate's log, the workers waiting for a
 * share, the first job that must run alone), how many runnable jobs a
 * worker takes and under which caps, so that the concurrency holds across
 * processes (JOB-07) and the rate across hosts (JOB-22). Pure: the driver
 * reads and writes (Executor.jobFlush), this decides.
 *
 * While several workers want more runs than a queue's concurrency lets them
 * have, each claims no more than its share of it (fair-share.ts). A due job
 * whose last run was abandoned runs alone (alone.ts). When the rate held
 * jobs back, the report says how long until its window opens, so that an
 * idle worker wakes then rather than on its next poll.
 */
import type { ClaimLimits, ClaimPlan, ClaimPlanner, ClaimTake, ClaimTaken, WorkerLease } from '../dialect/index.js'
import type { QueueLimits } from './queue-limits.js'
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
  passOver?: readonly number[]
  /** The claiming worker's clock: the rate's stamp moves on from the log's time by what it saw pass meanwhile. */
  clock: () => number
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

/**
 * How many runnable jobs a claim under a cap per group looks at, for each it may take: the jobs of groups at their
 * cap are passed over, and a claim that looked no further would take fewer than it could.
 */
const GROUP_LOOK_AHEAD = 4
const GROUP_LOOK_EXTRA = 16

/**
 * The plan of a claim for `request` (Executor.jobFlush asks it): from the queue's policy as the flush read it in its
 * transaction, the bounds of one claim; then, from what the claim took, the rate's log to write back. `report` is
 * filled as it goes, for the worker.
 */
export function claimPlanner(queue: string, request: ClaimRequest, report: ClaimReport = { waitMs: null }): ClaimPlanner {
  let log: RateLog | null = null
  let readAt = 0
  let unsure = 0
  const clock = request.clock
  return {
    plan(policy: ClaimLimits, sentAt: number): ClaimPlan {
      const none: ClaimPlan = { alone: null, holdBack: false, take: null }
      if (request.held !== undefined) report.othersRunning = Math.max(0, policy.running - request.held)
      if (policy.paused) return none
      const limits: QueueLimits = { total: policy.concurrency ?? null, perGroup: policy.perGroup ?? null }
      const rate = rateOf({
        rateLimit: policy.rateLimit ?? null,
        ratePer: policy.ratePer ?? null,
        ratePerGroup: policy.ratePerGroup ?? null,
      })
      let limit = request.limit
      let waiters: string | null | undefined
      // A claimed job counts as running against a limit: under one, a worker claims only what it starts now.
      if (limits.total !== null || limits.perGroup !== null || rate !== null) limit -= request.ahead ?? 0
      if (limits.total !== null) {
        const wanted = limit
        limit = Math.min(limit, limits.total - policy.running)
        if (request.held !== undefined) {
          const share = new ClaimWaiters(policy.claimWaiters, policy.rateNow)
          limit = Math.min(limit, share.room(request.owner, limits.total, request.held))
          waiters = share.next(request.owner, limit < wanted, request.waitMs ?? CLAIM_WAIT_MS)
          report.waitingMs = share.remaining(request.owner)
        }
      }
      if (limit <= 0) return { ...none, waiters }
      readAt = clock()
      // The log's clock, where the database keeps it, was read at some moment between the ask and now: the stamp
      // may be that much earlier than the moment it stands for, and the run's deadline counts it.
      unsure = performance.now() - sentAt
      log = rate === null ? null : new RateLog(rate, policy.rateStarts, policy.rateNow)
      if (log !== null) {
        limit = Math.min(limit, log.room())
        if (limit <= 0) {
          report.waitMs = log.opensAt() - log.now
          return { ...none, waiters }
        }
      }
      const passOver = request.passOver ?? []
      const alone = aloneClaim({ seq: policy.aloneSeq, runAt: policy.aloneRunAt }, request.idle, new Set(passOver), request.now)
      const groupRoom = log?.groupRooms() ?? null
      const grouped = limits.perGroup !== null || groupRoom !== null
      const take: ClaimTake = {
        queue,
        owner: request.owner,
        now: request.now,
        limit,
        window: grouped ? limit * GROUP_LOOK_AHEAD + GROUP_LOOK_EXTRA : limit,
        passOver,
        skipAbandoned: alone.passOver,
        only: null,
        perGroup: limits.perGroup,
        groupRoom,
        renewLease: request.renewLease,
      }
      return {
        // A job that must run alone goes to an idle worker first; if its group's caps hold it back, the others may go.
        alone: alone.take === null ? null : { ...take, limit: 1, window: 1, only: alone.take, skipAbandoned: false },
        holdBack: alone.holdBack,
        take,
        waiters,
      }
    },

    claimed({ claimed, heldBack }: ClaimTaken): string | null {
      if (log === null) return null
      for (const job of claimed) log.add(job.grp)
      // A group the rate held back opens again later: the worker looks again then, not on its next poll.
      const groupOpens = heldBack.length === 0 ? null : Math.min(...heldBack.map((grp) => log!.groupOpensAt(grp)))
      const opensAt = log.room() === 0 ? log.opensAt() : groupOpens
      report.waitMs = opensAt === null ? null : Math.max(0, opensAt - log.now)
      if (claimed.length === 0) return null
      // Stamped now, on the log's clock: the server's as read under the lock, moved on by the time this process saw pass.
      log.stamp(log.now + (clock() - readAt))
      report.startBy = performance.now() + rateSlackMs(log.rate) - unsure
      return JSON.stringify(log)
    },
  }
}
