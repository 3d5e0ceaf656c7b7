/**
 * The engine's requests (dialect/executor.ts) answered by PostgreSQL: each
 * method runs one or two of the statements declared in statements.ts,
 * read.ts and admin.ts on the Queryable it is given (a pool, or the one
 * client of a transaction), turning lists into JSON text and bounds into
 * times the server takes.
 */
import type {
  ClaimedJob,
  ClaimLimits,
  ClaimPlanner,
  ClaimTake,
  Executor,
  FlushAnswer,
  FlushRequest,
  ListingOrder,
  ListParams,
  WorkerLease,
} from '../index.js'
import { ADMIN_SQL } from './admin.js'
import { FOLD, HAS_UNFOLDED } from './counts.js'
import type { Queryable } from './driver.js'
import { READ_SQL } from './read.js'
import { all, get, one, some, violatesUnique } from './statement.js'
import { endsAsJson, SQL, type FlushRow } from './statements.js'
import { pgScheduleRequests } from './schedules.js'
import { timeBound } from './terms.js'

/** What the executors of one connection share. */
export interface PgConnectionState {
  /** The connection's data version (connection.ts): it moves as other processes' notices arrive. */
  dataVersion(): Promise<number>
  /** The queues whose last flush found a policy for the engine to plan: their next flush reads it first. */
  readonly planned: Set<string>
}

/** A queue with no policy, as a flush plans its claim before the statement that finds out whether the queue has one. */
function noPolicy(now: number): ClaimLimits {
  return {
    paused: 0,
    running: 0,
    concurrency: null,
    perGroup: null,
    rateLimit: null,
    ratePer: null,
    ratePerGroup: null,
    rateNow: now,
    aloneSeq: null,
    aloneRunAt: null,
  }
}

/** Whether a claim takes jobs by claim order alone, with no cap, no rate and no job that must run alone: the flush statement's claim. */
function isPlain(take: ClaimTake): boolean {
  return take.perGroup === null && take.groupRoom === null && take.only === null && !take.skipAbandoned && take.window === take.limit
}

/** A flush statement's rows, sorted. */
function flushRows(rows: readonly FlushRow[]): {
  ended: Set<number>
  claimed: ClaimedJob[]
  heldBack: string[]
  planned: boolean
  noticed: boolean
} {
  const answer = { ended: new Set<number>(), claimed: [] as ClaimedJob[], heldBack: [] as string[], planned: false, noticed: false }
  for (const { part, ...row } of rows) {
    if (part === 'ended') answer.ended.add(row.seq)
    else if (part === 'claimed') answer.claimed.push(row)
    else if (part === 'held' && row.grp !== null) answer.heldBack.push(row.grp)
    else if (part === 'policy') answer.planned = true
    else if (part === 'notice') answer.noticed = true
  }
  return answer
}

/** The listings' statements, by the order they walk. */
const LISTINGS = {
  waiting: ADMIN_SQL.listWaiting,
  scheduled: ADMIN_SQL.listScheduled,
  running: ADMIN_SQL.listRunning,
  ended: ADMIN_SQL.listEnded,
  newest: ADMIN_SQL.listNewest,
} as const

/** The bounds of a bigint, as text: a key past every seq or priority. */
const BIGINT_MAX = '9223372036854775807'
const BIGINT_MIN = '-9223372036854775808'

/**
 * A listing's key for a seq or a priority: a whole number as it is; ±Infinity (a first page) the bigint's
 * bounds; anything else (a key that only SQLite stores: a text, a blob) after every number, as SQLite sorts it.
 */
function wholeKey(key: ListParams['k1'] | undefined): number | string {
  // A bigint read as a number may round to ±2^63, which JavaScript writes as a number past the bigint's bounds.
  if (typeof key === 'number' && Math.abs(key) < 2 ** 63) return Math.trunc(key)
  return typeof key === 'number' && key < 0 ? BIGINT_MIN : BIGINT_MAX
}

/** A listing's key for a time, in ms: ±Infinity before or after every time; a non-number after every time. */
function timeKey(key: ListParams['k1'] | undefined): number {
  return typeof key === 'number' ? timeBound(key) : Infinity
}

/** A page's keys in the types of the order's columns: (priority, run_at, seq), (run_at, seq), (finished_at, seq) or (seq). */
function pageKeys(order: ListingOrder, page: ListParams): { k1: number | string; k2: number | string | null; k3: number | string | null } {
  switch (order) {
    case 'waiting':
      return { k1: wholeKey(page.k1), k2: timeKey(page.k2), k3: wholeKey(page.k3) }
    case 'scheduled':
    case 'ended':
      return { k1: timeKey(page.k1), k2: wholeKey(page.k2), k3: null }
    default:
      return { k1: wholeKey(page.k1), k2: null, k3: null }
  }
}

/** The executor that runs its requests on `q`. @internal */
/** A claim's renewal of the worker's row, as the claim and flush statements take it: a null @leaseUntil renews nothing. */
function leaseRenewal(
  lease: WorkerLease | null,
): Pick<WorkerLease, 'channel'> & { leaseUntil: number | null; host: string | null; pid: number | null } {
  return { leaseUntil: lease?.expiresAt ?? null, host: lease?.host ?? null, pid: lease?.pid ?? null, channel: lease?.channel ?? null }
}

export function pgExecutor(q: Queryable, state: PgConnectionState): Executor<'async'> {
  /**
   * A queue without a policy: one statement, which finds out whether the queue has one (`planned`: then it wrote the
   * ends, and claimed nothing).
   */
  async function flushWhole(flush: FlushRequest, take: ClaimTake | null): Promise<FlushAnswer & { planned: boolean }> {
    const answer = flushRows(
      await all(q, SQL.flush, {
        queue: flush.queue,
        owner: flush.owner,
        now: flush.now,
        ends: endsAsJson(flush.ends),
        limit: take?.limit ?? 0,
        passOver: JSON.stringify(take?.passOver ?? []),
        ...leaseRenewal(take?.renewLease ?? null),
      }),
    )
    const planned = answer.planned && flush.claim !== null
    if (planned) state.planned.add(flush.queue)
    return { landed: flush.ends.map((end) => answer.ended.has(end.seq)), claimed: answer.claimed, planned }
  }

  /**
   * A queue with a policy: the ends written, its row locked and its policy read, in one statement; the engine's plan;
   * then one statement that claims as planned (a job that must run alone is claimed first, by itself), and, under a
   * rate, one that writes its log back.
   */
  async function flushPlanned(flush: FlushRequest, planner: ClaimPlanner, landedBefore: boolean[] | null): Promise<FlushAnswer> {
    const sentAt = performance.now()
    const { ended, noticed, ...policy } = await one(q, SQL.claimPolicy, {
      queue: flush.queue,
      now: flush.now,
      owner: flush.owner,
      ends: landedBefore === null ? endsAsJson(flush.ends) : '[]',
      notify: landedBefore === null ? 1 : 0,
    })
    if (policy.concurrency === null && policy.perGroup === null && policy.rateLimit === null && policy.aloneSeq === null)
      state.planned.delete(flush.queue)
    const landed = new Set(JSON.parse(ended) as number[])
    const plan = planner.plan(policy, sentAt)
    // One notice for the flush: its ends' where some landed, else its claim's.
    let notify: 0 | 1 = noticed > 0 || landedBefore?.some(Boolean) ? 0 : 1
    const claim = async (take: ClaimTake | null, waiters: string | null | undefined) => {
      const answer = flushRows(
        await all(q, SQL.flushClaim, {
          queue: flush.queue,
          owner: flush.owner,
          now: flush.now,
          notify,
          limit: take?.limit ?? 0,
          total: policy.concurrency,
          window: take?.window ?? 0,
          passOver: JSON.stringify(take?.passOver ?? []),
          skipAbandoned: take?.skipAbandoned ? 1 : 0,
          only: take?.only ?? null,
          perGroup: take?.perGroup ?? null,
          groupRoom: take?.groupRoom ? JSON.stringify(take.groupRoom.listed) : null,
          otherRoom: take?.groupRoom?.other ?? null,
          setWaiters: waiters === undefined ? 0 : 1,
          waiters: waiters ?? null,
          ...leaseRenewal(take?.renewLease ?? null),
        }),
      )
      if (answer.noticed) notify = 0
      return answer
    }
    let taken = await claim(plan.alone ?? plan.take, plan.waiters)
    if (plan.alone !== null && taken.claimed.length === 0 && !plan.holdBack && plan.take !== null) {
      const heldBack = taken.heldBack
      taken = await claim(plan.take, undefined)
      taken.heldBack.push(...heldBack)
    }
    const log = planner.claimed({ claimed: taken.claimed, heldBack: taken.heldBack })
    if (log !== null) await all(q, SQL.storeRateStarts, { queue: flush.queue, starts: log })
    return { landed: landedBefore ?? flush.ends.map((end) => landed.has(end.seq)), claimed: taken.claimed }
  }

  return {
    ...pgScheduleRequests(q),
    dataVersion: () => state.dataVersion(),
    counts: 'apart',
    notifies: true,
    queueNotify: async (queue, kind) => void (await all(q, SQL.notify, { payload: `${kind}:${queue}` })),
    queueEnsureRow: async (queue) => void (await all(q, SQL.queueEnsureRow, { queue })),
    queueHasUnfolded: (queue) => some(q, HAS_UNFOLDED, { queue }),
    /** One statement, which passes when another folds the queue or holds its row (counts.ts says why). */
    queueFoldCounts: async (queue) => (await one(q, FOLD, { queue })).rows,

    jobAdd: async (job) => (await one(q, SQL.addJob, job)).added === 1,
    async jobAddUnique(job) {
      const { added, holder, matched } = await one(q, SQL.addUniqueJob, job)
      if (added === 1) return { added: true }
      return { added: false, holder: holder === null || matched === null ? null : { id: holder, matched } }
    },
    async jobAddDebounced(job) {
      const { id } = await one(q, SQL.addDebouncedJob, job)
      if (id === null) return { added: false, holder: null }
      // A job's id is its own: the row answered is the one added, or the waiting job that took the add.
      return id === job.id ? { added: true } : { added: false, holder: { id, matched: 'debounce' } }
    },
    jobGetHolder: (find) => get(q, SQL.jobHolder, find),
    jobInsert: (job) => some(q, SQL.insertJob, job),
    jobInsertMany: async ({ jobs, ...batch }) =>
      (await all(q, SQL.insertJobs, { ...batch, jobs: JSON.stringify(jobs) })).map((row) => row.id),
    jobExists: (queue, id) => some(q, SQL.jobExists, { queue, id }),
    queueCountWaiting: async (queue) => (await one(q, SQL.queueCountWaiting, { queue })).count,

    queueGetClaimable: (queue) => get(q, SQL.queueGetClaimable, { queue }),
    queueGetLimits: (queue) => get(q, SQL.queueLimits, { queue }),
    queueSetLimits: async (limits) => void (await all(q, SQL.storeQueueLimits, limits)),

    /**
     * A queue without a policy (no limit, no rate, no job that must run alone) is flushed in one statement. One with a
     * policy is read under its row's lock, planned, and claimed in one more statement (and its rate's log written
     * back in another): a flush whose last one found a policy reads it first, and one that finds it is gone goes back
     * to the one statement. Ends alone are always one statement.
     */
    async jobFlush(flush) {
      const { claim } = flush
      if (claim !== null && state.planned.has(flush.queue)) return flushPlanned(flush, claim, null)
      // The plan for a queue without a policy: the statement claims by it only where the queue turns out to have none.
      const presumed = claim?.plan(noPolicy(flush.now), performance.now()).take ?? null
      if (claim !== null && presumed !== null && !isPlain(presumed)) return flushPlanned(flush, claim, null)
      const { planned, ...whole } = await flushWhole(flush, presumed)
      return planned && claim !== null ? flushPlanned(flush, claim, whole.landed) : whole
    },
    jobEndMany: async ({ owner, expiredBy, ends }) =>
      (await all(q, SQL.jobEndMany, { owner, expiredBy, ends: endsAsJson(ends) })).map((row) => row.seq),
    jobSetStateIfUnleased: (end) => some(q, SQL.endUnleased, end),
    jobGetState: async (seq) => (await get(q, SQL.jobState, { seq }))?.state,
    stepDeleteMany: async (seqs) => void (await all(q, SQL.deleteSteps, { seqs: JSON.stringify(seqs) })),

    workerRenew: ({ owner, host, pid, expiresAt, channel }) => all(q, SQL.workerRenew, { owner, host, pid, expiresAt, channel }),
    workerDelete: async (owner) => void (await all(q, SQL.workerDelete, { owner })),
    workerHasExpired: (now) => some(q, SQL.workerExpired, { now: timeBound(now) }),
    workerDeleteExpired: async (now) => (await one(q, SQL.workerDeleteExpired, { now: timeBound(now) })).count,
    jobListHeld: (owner) => all(q, SQL.heldRuns, { owner }),
    leaseRenewIfHeld: (lease) =>
      some(q, SQL.leaseRenewIfHeld, {
        seq: lease.seq,
        owner: lease.owner,
        attempt: lease.attempt,
        host: lease.host,
        pid: lease.pid,
        expiresAt: lease.expiresAt,
      }),
    jobListRunningOwners: async (queue) => (await all(q, SQL.runningOwners, { queue })).map((row) => row.owner),
    leaseGetAbandoned: ({ queue, self, now, deadOwners, limit }) =>
      all(q, SQL.abandonedLeases, { queue, self, now: timeBound(now), deadOwners: JSON.stringify(deadOwners), limit }),
    jobCountUnleased: async (queue) => (await one(q, SQL.unleasedCount, { queue })).count,
    jobGetUnleased: (find) => all(q, SQL.unleasedRuns, find),

    stepGet: async (seq, name) => (await get(q, SQL.readStep, { seq, name }))?.answer,
    stepSetIfLeased: (step) => some(q, SQL.writeStep, step),

    eventGet: (seq, name) => get(q, SQL.eventLook, { seq, name }),
    eventSetWaitingIfLeased: (wait) => some(q, SQL.eventWait, wait),
    eventSetTimedOutIfLeased: (wait) => some(q, SQL.eventTimeOut, wait),
    jobSignal: (signal) => one(q, SQL.signal, { ...signal, waitsFor: `event:${signal.name}` }),

    jobHasPrunable: ({ queue, state, before }) => some(q, SQL.firstPrunable, { queue, state, before: timeBound(before) }),
    jobDeleteEnded: async ({ queue, state, before, limit }) =>
      (await one(q, SQL.pruneEnded, { queue, state, before: timeBound(before), limit })).count,

    jobGetSnapshot: (queue, id) => get(q, READ_SQL.jobById, { queue, id }),
    jobGetSnapshots: (seqs) => all(q, READ_SQL.jobsBySeq, { seqs: JSON.stringify(seqs) }),
    jobCountAhead: async (at) =>
      (await one(q, READ_SQL.countAhead, { ...at, priority: wholeKey(at.priority), now: timeBound(at.now) })).ahead,
    /** One query: the head of the line, numbered by row_number() in claim order, filtered to the seqs asked about. */
    async jobGetPlacesInLine(line, seqs) {
      const rows = await all(q, READ_SQL.placesInLine, { ...line, now: timeBound(line.now), seqs: JSON.stringify([...seqs]) })
      const places = new Map<number, number>()
      let walked = 0
      for (const row of rows) {
        if (row.seq === null) walked = row.place
        else places.set(row.seq, row.place)
      }
      for (const seq of seqs) if (!places.has(seq)) places.set(seq, walked)
      return places
    },

    jobFind: (queue, id) => get(q, ADMIN_SQL.findJob, { queue, id }),
    jobGetRecord: (queue, id) => get(q, ADMIN_SQL.jobRecord, { queue, id }),
    jobListOfQueue: (queue) => all(q, ADMIN_SQL.queueJobs, { queue }),
    /** One page by keyset, as SQLite's: the keys are numbers here (times in ms, seqs, priorities). */
    jobList: (order, page) =>
      all(q, LISTINGS[order], { queue: page.queue, state: page.state, grp: page.grp, limit: page.limit, ...pageKeys(order, page) }),
    jobGetOutcome: (seq) => get(q, ADMIN_SQL.jobOutcome, { seq }),
    jobCancel: (seq, now) => some(q, ADMIN_SQL.cancelJob, { seq, now }),
    async jobRetry(seq, now) {
      try {
        const { retried, holder } = await one(q, ADMIN_SQL.retryJob, { seq, now })
        if (retried === 1) return { outcome: 'retried' }
        return holder === null ? { outcome: 'unchanged' } : { outcome: 'held', holder }
      } catch (error) {
        // An add of the job's key that committed while the update waited for it: the transaction is aborted, and the
        // holder cannot be read in it.
        if (violatesUnique(error, 'jobs_job_unique')) return { outcome: 'held', holder: null }
        throw error
      }
    },
    stepList: (seq) => all(q, ADMIN_SQL.jobSteps, { seq }),
    eventList: (seq) => all(q, ADMIN_SQL.jobEvents, { seq }),
    leaseGet: (seq) => get(q, ADMIN_SQL.jobLease, { seq }),
    queueSetPaused: async (queue, paused) => void (await all(q, ADMIN_SQL.setPaused, { queue, paused })),
    /** The queue's row plus its counts not folded yet (counts.ts). */
    queueGetCounts: (queue) => get(q, ADMIN_SQL.queueCounts, { queue }),
    queueGetCountsAll: () => all(q, ADMIN_SQL.allQueueCounts, {}),
    queueListNames: async () => (await all(q, ADMIN_SQL.queueListNames, {})).map((row) => row.name),
    jobCountEnded: async (window) =>
      (await one(q, ADMIN_SQL.endedBetween, { ...window, since: timeBound(window.since), until: timeBound(window.until) })).count,
    jobCountEndedPerBucket: (window) =>
      all(q, ADMIN_SQL.endedPerBucket, { ...window, since: timeBound(window.since), until: timeBound(window.until) }),
    jobGetEarliestRunnable: async (queue) => (await one(q, ADMIN_SQL.earliestRunnable, { queue })).runAt,
  }
}
