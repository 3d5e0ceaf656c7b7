/**
 * The engine's requests (dialect/index.ts) answered by SQLite: each method
 * runs one or two statements prepared once for the connection, passing its
 * arguments straight through.
 */
import type { Executor } from '../index.js'
import { runForJobs, type Statements } from './statements.js'

/** The executor of one connection's prepared statements. @internal */
export function sqliteExecutor(sql: Statements): Executor<'sync'> {
  return {
    dataVersion: () => sql.dataVersion.get(),
    queueShiftCounts: (counts) => void sql.shiftCounts.run(counts),

    jobInsertIfRoom: (job) => sql.insertJobIfRoom.run(job).changes === 1,
    jobInsert: (job) => sql.insertJob.run(job).changes === 1,
    jobExists: (queue, id) => sql.jobExists.get(queue, id) !== undefined,
    queueWaitingCount: (queue) => sql.queueWaitingCount.get(queue),

    queueClaimable: (queue) => sql.queueClaimable.get({ queue }),
    queueClaimLimits: (queue) => sql.queueClaimLimits.get(queue),
    queueLimitsGet: (queue) => sql.queueLimits.get(queue),
    queueLimitsSet: (limits) => void sql.storeQueueLimits.run(limits),

    jobGetAvailable: (window, skipAbandoned) => (skipAbandoned ? sql.claimCandidatesNotAbandoned : sql.claimCandidates).all(window),
    jobGetFirstAbandoned: (window) => sql.firstAbandoned.get(window),
    jobGetAvailableByGroup: (window) => sql.claimCandidatesByGroup.all(window),
    jobGetAvailableOne: (seq) => sql.claimCandidate.get(seq),
    leaseCountByGroup: (queue) => sql.groupsRunning.all(queue),
    jobSetRunningMany: (seqs) => runForJobs(sql.markRunning, sql.markRunningAll, seqs, {}).changes,
    leaseInsertMany: (seqs, lease) => void runForJobs(sql.insertLease, sql.insertLeases, seqs, lease),

    jobSetStateIfLeased: (end) => sql.endRun.run(end).changes === 1,
    jobSetStateIfLeasedMany: (end) => sql.endRuns.all({ ...end, runs: JSON.stringify(end.runs) }),
    jobSetStateIfUnleased: (end) => sql.endUnleased.run(end).changes === 1,
    jobGetState: (seq) => sql.jobState.get(seq),
    leaseDeleteMany: (seqs) => void runForJobs(sql.deleteLease, sql.deleteLeases, seqs, {}),
    stepDeleteMany: (seqs) => void runForJobs(sql.deleteSteps, sql.deleteStepsOfAll, seqs, {}),

    leaseRenewByOwner: (renew) => sql.renewLeases.all(renew),
    leaseListByOwner: (owner) => sql.ownerLeases.all(owner),
    leaseHeld: (lease) => sql.leaseHeld.get(lease) !== undefined,
    leaseOwners: (queue) => sql.leaseOwners.all(queue),
    leaseGetAbandoned: ({ queue, self, now, deadOwners, limit }) => sql.abandonedLeases.all({ queue, self, now, deadOwners: JSON.stringify(deadOwners), limit }),
    jobCountUnleased: (queue) => sql.unleasedCount.get({ queue }),
    jobGetUnleased: (find) => sql.unleasedRuns.all(find),

    stepGet: (seq, name) => sql.readStep.get(seq, name),
    stepSetIfLeased: (step) => sql.writeStep.run(step).changes === 1,

    jobHasPrunable: (find) => sql.firstPrunable.get(find) !== undefined,
    jobDeleteEnded: (find) => sql.pruneEnded.run(find).changes,
  }
}
