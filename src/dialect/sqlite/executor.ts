/**
 * The engine's requests (dialect/executor.ts) answered by SQLite: each method
 * runs one or two statements prepared once for the connection, passing its
 * arguments straight through. The engine's statements are prepared with the
 * connection; those of readers and of the admin API on first use, so a
 * worker's connection never prepares them.
 */
import type Database from 'better-sqlite3'
import type { Executor, ListingOrder } from '../index.js'
import { ADMIN_SQL } from './admin.js'
import { READ_SQL } from './read.js'
import { prepareAll, type PreparedStatements } from './statement.js'
import { insertJobsInGroups, runForJobs, type Statements } from './statements.js'
import { sqliteScheduleRequests } from './schedules.js'

/** The executor of one connection's prepared statements. @internal */
export function sqliteExecutor(client: Database.Database, sql: Statements): Executor<'sync'> {
  let readStatements: PreparedStatements<typeof READ_SQL> | undefined
  let adminStatements: PreparedStatements<typeof ADMIN_SQL> | undefined
  const read = () => (readStatements ??= prepareAll(client, READ_SQL))
  const admin = () => (adminStatements ??= prepareAll(client, ADMIN_SQL))
  const listings = (order: ListingOrder) => {
    const statements = admin()
    return {
      waiting: statements.listWaiting,
      scheduled: statements.listScheduled,
      running: statements.listRunning,
      ended: statements.listEnded,
      newest: statements.listNewest,
    }[order]
  }
  return {
    ...sqliteScheduleRequests(client),
    dataVersion: () => sql.dataVersion.get(),
    queueNotify: () => {},
    queueShiftCounts: (counts) => void sql.shiftCounts.run(counts),
    // The counters are kept in the queue's row itself: nothing is kept apart to fold.
    queueHasUnfolded: () => false,
    queueFoldCounts: () => 0,

    jobAdd: (job) => {
      if (sql.insertJobIfRoom.run(job).changes !== 1) return false
      const added = job.state === 'waiting' ? 1 : 0
      sql.shiftCounts.run({ queue: job.queue, waiting: added, scheduled: 1 - added, running: 0, done: 0, failed: 0, canceled: 0 })
      return true
    },
    jobInsert: (job) => sql.insertJob.run(job).changes === 1,
    jobInsertMany: (batch) => insertJobsInGroups(sql, batch),
    jobExists: (queue, id) => sql.jobExists.get(queue, id) !== undefined,
    queueWaitingCount: (queue) => sql.queueWaitingCount.get(queue),

    queueClaimable: (queue) => sql.queueClaimable.get({ queue }),
    queueClaimLimits: (queue, ended) => sql.queueClaimLimits.get({ queue, ended }),
    queueLimitsGet: (queue) => sql.queueLimits.get(queue),
    queueLimitsSet: (limits) => void sql.storeQueueLimits.run(limits),
    queueRateStartsSet: (queue, starts) => void sql.storeRateStarts.run({ queue, starts }),
    queueClaimWaitersSet: (queue, waiters) => void sql.storeClaimWaiters.run({ queue, waiters }),

    jobGetAvailable: (window, skipAbandoned) => (skipAbandoned ? sql.claimCandidatesNotAbandoned : sql.claimCandidates).all(window),
    jobGetFirstAbandoned: (window) => sql.firstAbandoned.get(window),
    jobGetAvailableByGroup: (window) => sql.claimCandidatesByGroup.all(window),
    jobGetAvailableOne: (seq) => sql.claimCandidate.get(seq),
    jobCountRunningByGroup: (queue) => sql.groupsRunning.all(queue),
    jobSetRunningMany: (seqs, owner) => runForJobs(sql.markRunning, sql.markRunningAll, seqs, { owner }).changes,

    jobSetStateIfLeased: (end) => sql.endRun.run(end).changes === 1,
    jobSetStateIfLeasedMany: (end) => sql.endRuns.all({ ...end, runs: JSON.stringify(end.runs) }),
    jobSetStateIfUnleased: (end) => sql.endUnleased.run(end).changes === 1,
    jobGetState: (seq) => sql.jobState.get(seq),
    stepDeleteMany: (seqs) => void runForJobs(sql.deleteSteps, sql.deleteStepsOfAll, seqs, {}),

    workerRenew(lease) {
      sql.workerRenew.run(lease)
      return sql.heldRuns.all(lease.owner)
    },
    workerDelete: (owner) => void sql.workerDelete.run(owner),
    workerHasExpired: (now) => sql.workerExpired.get({ now }) !== undefined,
    workerDeleteExpired: (now) => sql.workerDeleteExpired.run({ now }).changes,
    jobListHeld: (owner) => sql.heldRuns.all(owner),
    leaseRenewIfHeld: (lease) =>
      sql.leaseRenewIfHeld.run({ seq: lease.seq, owner: lease.owner, attempt: lease.attempt, expiresAt: lease.expiresAt }).changes === 1,
    jobRunningOwners: (queue) => sql.runningOwners.all(queue),
    leaseGetAbandoned: ({ queue, self, now, deadOwners, limit }) =>
      sql.abandonedLeases.all({ queue, self, now, deadOwners: JSON.stringify(deadOwners), limit }),
    jobCountUnleased: (queue) => sql.unleasedCount.get({ queue }),
    jobGetUnleased: (find) => sql.unleasedRuns.all(find),

    stepGet: (seq, name) => sql.readStep.get(seq, name),
    stepSetIfLeased: (step) => sql.writeStep.run(step).changes === 1,

    jobHasPrunable: (find) => sql.firstPrunable.get(find) !== undefined,
    jobDeleteEnded: (find) => sql.pruneEnded.run(find).changes,

    jobGetSnapshot: (queue, id) => read().jobById.get(queue, id),
    jobGetSnapshots: (seqs) => read().jobsBySeq.all(JSON.stringify(seqs)),
    jobCountAhead(at) {
      const { aheadByPriority, aheadByRunAt, aheadBySeq } = read()
      let ahead = aheadByPriority.get(at)
      if (ahead < at.limit)
        ahead += aheadByRunAt.get({
          queue: at.queue,
          priority: at.priority,
          before: Math.min(at.runAt, at.now + 1),
          limit: at.limit - ahead,
        })
      if (ahead < at.limit) ahead += aheadBySeq.get({ ...at, limit: at.limit - ahead })
      return ahead
    },
    jobPlacesInLine(line, seqs) {
      const places = new Map<number, number>()
      const wanted = new Set(seqs)
      let place = 0
      for (const seq of read().lineHead.iterate({ ...line, limit: line.limit })) {
        if (wanted.delete(seq)) {
          places.set(seq, place)
          if (wanted.size === 0) break
        }
        place++
      }
      for (const seq of wanted) places.set(seq, place)
      return places
    },

    jobFind: (queue, id) => admin().findJob.get(queue, id),
    jobGetRecord: (queue, id) => admin().jobRecord.get(queue, id),
    jobListOfQueue: (queue) => admin().queueJobs.all(queue),
    jobList: (order, page) => listings(order).all(page),
    jobGetOutcome: (seq) => admin().jobOutcome.get(seq),
    jobCancel: (seq, now) => admin().cancelJob.run({ seq, now }).changes === 1,
    jobRetry: (seq, now) => admin().retryJob.run({ seq, now }).changes === 1,
    stepList: (seq) => admin().jobSteps.all(seq),
    leaseGet: (seq) => admin().jobLease.get(seq),
    queueSetPaused: (queue, paused) => void admin().setPaused.run({ queue, paused: paused ? 1 : 0 }),
    queueGetCounts: (queue) => admin().queueCounts.get(queue),
    queueGetCountsAll: () => admin().allQueueCounts.all(),
    queueNames: () => admin().queueNames.all(),
    jobCountEnded: (window) => admin().endedBetween.get(window),
    jobCountEndedPerBucket: (window) => admin().endedPerBucket.all(window),
    jobEarliestRunnable: (queue) => admin().earliestRunnable.get({ queue }),
  }
}
