/**
 * The engine's requests (dialect/executor.ts) answered by PostgreSQL: each
 * method runs one or two of the statements declared in statements.ts,
 * read.ts and admin.ts on the Queryable it is given (a pool, or the one
 * client of a transaction), turning lists into JSON text and bounds into
 * times the server takes.
 */
import type { ClaimedJob, Executor, ListingOrder, ListParams, WorkerLease } from '../index.js'
import { ADMIN_SQL } from './admin.js'
import { FOLD, HAS_UNFOLDED } from './counts.js'
import type { Queryable } from './driver.js'
import { READ_SQL } from './read.js'
import { all, get, one, some } from './statement.js'
import { endsAsJson, SQL } from './statements.js'
import { pgScheduleRequests } from './schedules.js'
import { timeBound } from './terms.js'

/**
 * PostgreSQL has no cheap counterpart of SQLite's data_version (a number that moves when another
 * connection commits): this one moves on every look, so pollers always look for work. A connection that
 * listens for notices answers its own instead (connection.ts), which moves only when one arrives.
 */
let dataVersion = 0

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

export function pgExecutor(q: Queryable): Executor<'async'> {
  return {
    ...pgScheduleRequests(q),
    dataVersion: async () => ++dataVersion,
    queueNotify: async (queue, kind) => void (await all(q, SQL.notify, { payload: `${kind}:${queue}` })),
    /**
     * The triggers count every write (counts.ts): this only creates the queue's row on its first job, for its
     * pause flag and limits, taking no lock on a row that exists.
     */
    queueShiftCounts: async ({ queue }) => void (await all(q, SQL.queueRowEnsure, { queue })),
    queueHasUnfolded: (queue) => some(q, HAS_UNFOLDED, { queue }),
    /** One statement, which passes when another folds the queue or holds its row (counts.ts says why). */
    queueFoldCounts: async (queue) => (await one(q, FOLD, { queue })).rows,

    jobAdd: async (job) => (await one(q, SQL.addJob, job)).added === 1,
    jobInsert: (job) => some(q, SQL.insertJob, job),
    jobInsertMany: async ({ jobs, ...batch }) =>
      (await all(q, SQL.insertJobs, { ...batch, jobs: JSON.stringify(jobs) })).map((row) => row.id),
    jobExists: (queue, id) => some(q, SQL.jobExists, { queue, id }),
    queueWaitingCount: async (queue) => (await one(q, SQL.queueWaitingCount, { queue })).count,

    queueClaimable: (queue) => get(q, SQL.queueClaimable, { queue }),
    /**
     * A queue with a stored `concurrency`, `concurrency_per_group` or `rate_limit` is claimed under a lock on its
     * jobs_queue row, taken here first and held until the claim commits; its runs under way are then counted from its
     * running jobs, in a statement of its own that sees the claims committed before the lock was granted. So two
     * claims of a limited queue take turns and its limit is exact across hosts (JOB-07), and a rated queue's log of
     * starts is read with the lock (JOB-22): two round trips. A queue without limits takes no lock (the first
     * statement finds no limited row) and is read without one, so its claims run side by side. The runs counted are
     * those left after this transaction's ends: `ended` is counted already.
     */
    async queueClaimLimits(queue, _ended, now) {
      for (;;) {
        const locked = await get(q, SQL.queueClaimLimitsLocked, { queue })
        if (locked) return { ...locked, ...(await one(q, SQL.queueRunningAndAlone, { queue, now })) }
        const peek = await one(q, SQL.queueClaimLimits, { queue, now })
        // Limits stored between the two reads (a worker that started): read them again, under the lock.
        if (peek.concurrency === null && peek.perGroup === null && peek.rateLimit === null) return peek
      }
    },
    queueLimitsGet: (queue) => get(q, SQL.queueLimits, { queue }),
    queueLimitsSet: async (limits) => void (await all(q, SQL.storeQueueLimits, limits)),
    queueRateStartsSet: async (queue, starts) => void (await all(q, SQL.storeRateStarts, { queue, starts })),
    queueClaimWaitersSet: async (queue, waiters) => void (await all(q, SQL.storeClaimWaiters, { queue, waiters })),

    async jobClaim(take) {
      const rows = await all(q, SQL.claim, {
        queue: take.queue,
        owner: take.owner,
        now: take.now,
        limit: take.limit,
        window: take.window,
        passOver: JSON.stringify(take.passOver),
        skipAbandoned: take.skipAbandoned ? 1 : 0,
        only: take.only,
        perGroup: take.perGroup,
        groupRoom: take.groupRoom && JSON.stringify(take.groupRoom.listed),
        otherRoom: take.groupRoom?.other ?? null,
        ...leaseRenewal(take.renewLease),
      })
      const claimed: ClaimedJob[] = []
      const heldBack: string[] = []
      for (const { part, ...row } of rows) {
        if (part === 'claimed') claimed.push(row)
        else if (row.grp !== null) heldBack.push(row.grp)
      }
      return { claimed, heldBack }
    },

    jobEndMany: async ({ owner, expiredBy, ends }) =>
      (await all(q, SQL.endRuns, { owner, expiredBy, ends: endsAsJson(ends) })).map((row) => row.seq),
    async jobFlush(flush) {
      const rows = await all(q, SQL.flush, {
        queue: flush.queue,
        owner: flush.owner,
        now: flush.now,
        ends: endsAsJson(flush.ends),
        limit: flush.limit,
        passOver: JSON.stringify(flush.passOver),
        ...leaseRenewal(flush.renewLease),
      })
      const ended = new Set<number>()
      const claimed: ClaimedJob[] = []
      let general = false
      for (const { part, ...row } of rows) {
        if (part === 'ended') ended.add(row.seq)
        else if (part === 'claimed') claimed.push(row)
        else if (part === 'general') general = true
      }
      return { landed: flush.ends.map((end) => ended.has(end.seq)), claimed: general ? null : claimed }
    },
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
    jobRunningOwners: async (queue) => (await all(q, SQL.runningOwners, { queue })).map((row) => row.owner),
    leaseGetAbandoned: ({ queue, self, now, deadOwners, limit }) =>
      all(q, SQL.abandonedLeases, { queue, self, now: timeBound(now), deadOwners: JSON.stringify(deadOwners), limit }),
    jobCountUnleased: async (queue) => (await one(q, SQL.unleasedCount, { queue })).count,
    jobGetUnleased: (find) => all(q, SQL.unleasedRuns, find),

    stepGet: async (seq, name) => (await get(q, SQL.readStep, { seq, name }))?.answer,
    stepSetIfLeased: (step) => some(q, SQL.writeStep, step),

    jobHasPrunable: ({ queue, state, before }) => some(q, SQL.firstPrunable, { queue, state, before: timeBound(before) }),
    jobDeleteEnded: async ({ queue, state, before, limit }) =>
      (await one(q, SQL.pruneEnded, { queue, state, before: timeBound(before), limit })).count,

    jobGetSnapshot: (queue, id) => get(q, READ_SQL.jobById, { queue, id }),
    jobGetSnapshots: (seqs) => all(q, READ_SQL.jobsBySeq, { seqs: JSON.stringify(seqs) }),
    jobCountAhead: async (at) =>
      (await one(q, READ_SQL.countAhead, { ...at, priority: wholeKey(at.priority), now: timeBound(at.now) })).ahead,
    /** One query: the head of the line, numbered by row_number() in claim order, filtered to the seqs asked about. */
    async jobPlacesInLine(line, seqs) {
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
    jobRetry: (seq, now) => some(q, ADMIN_SQL.retryJob, { seq, now }),
    stepList: (seq) => all(q, ADMIN_SQL.jobSteps, { seq }),
    leaseGet: (seq) => get(q, ADMIN_SQL.jobLease, { seq }),
    queueSetPaused: async (queue, paused) => void (await all(q, ADMIN_SQL.setPaused, { queue, paused })),
    /** The queue's row plus its counts not folded yet (counts.ts). */
    queueGetCounts: (queue) => get(q, ADMIN_SQL.queueCounts, { queue }),
    queueGetCountsAll: () => all(q, ADMIN_SQL.allQueueCounts, {}),
    queueNames: async () => (await all(q, ADMIN_SQL.queueNames, {})).map((row) => row.name),
    jobCountEnded: async (window) =>
      (await one(q, ADMIN_SQL.endedBetween, { ...window, since: timeBound(window.since), until: timeBound(window.until) })).count,
    jobCountEndedPerBucket: (window) =>
      all(q, ADMIN_SQL.endedPerBucket, { ...window, since: timeBound(window.since), until: timeBound(window.until) }),
    jobEarliestRunnable: async (queue) => (await one(q, ADMIN_SQL.earliestRunnable, { queue })).runAt,
  }
}
