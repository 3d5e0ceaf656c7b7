/**
 * The engine's requests (dialect/executor.ts) answered by SQLite: each method
 * runs one or two statements prepared once for the connection, passing its
 * arguments straight through. The engine's statements are prepared with the
 * connection; those of readers and of the admin API on first use, so a
 * worker's connection never prepares them.
 *
 * Written once for every SQLite client (statement.ts): a method of one
 * statement answers what the statement answers, at once or as a promise; one
 * of several is a program the client runs.
 */
import type {
  ClaimedJob,
  ClaimTake,
  ClaimTaken,
  Executor,
  ExpiredBy,
  FlushAnswer,
  FlushRequest,
  JobEnd,
  Kind,
  ListingOrder,
  NewJob,
  Result,
  RunEndParams,
  StateCounts,
} from '../index.js'
import { ask, type Program } from '../program.js'
import { ENDED_STATES, type EndedState } from '../../types.js'
import { ADMIN_SQL } from './admin.js'
import { READ_SQL } from './read.js'
import { changedOne, mapAnswer, type PreparedStatements, type SqliteClient } from './statement.js'
import { insertJobsInGroups, runForJobs, type Statements } from './statements.js'
import { sqliteScheduleRequests } from './schedules.js'

/**
 * Ends grouped where one endRunsAlike may write them: the same next state but for finish time and result. Few kinds of
 * end meet in one request (most often one: a worker's runs that all returned), so each end is matched against the groups'
 * first ends.
 */
function alike(ends: readonly JobEnd[]): JobEnd[][] {
  const groups: JobEnd[][] = []
  for (const end of ends) {
    const group = groups.find(([first]) => sameKind(first!.transition, end.transition))
    if (group) group.push(end)
    else groups.push([end])
  }
  return groups
}

function sameKind(a: RunEndParams, b: RunEndParams): boolean {
  return (
    a.state === b.state &&
    a.runAt === b.runAt &&
    a.error === b.error &&
    a.errorStack === b.errorStack &&
    a.refund === b.refund &&
    a.abandoned === b.abandoned &&
    a.waitsFor === b.waitsFor &&
    a.signals === b.signals
  )
}

/** How many more runs of `grp` the rate's window lets start (ClaimTake.groupRoom). */
function roomOf(room: NonNullable<ClaimTake['groupRoom']>, grp: string): number {
  return Object.hasOwn(room.listed, grp) ? room.listed[grp]! : room.other
}

/** The counters' move of one job added by `enqueue`. */
function addedCount(job: NewJob): { queue: string } & StateCounts {
  const waiting = job.state === 'waiting' ? 1 : 0
  return { queue: job.queue, waiting, scheduled: 1 - waiting, running: 0, done: 0, failed: 0, canceled: 0 }
}

/** The executor of one connection's prepared statements. @internal */
export function sqliteExecutor<K extends Kind>(client: SqliteClient<K>, sql: Statements<K>): Executor<K> {
  let readStatements: PreparedStatements<K, typeof READ_SQL> | undefined
  let adminStatements: PreparedStatements<K, typeof ADMIN_SQL> | undefined
  const read = () => (readStatements ??= client.prepareAll(READ_SQL))
  const admin = () => (adminStatements ??= client.prepareAll(ADMIN_SQL))
  const nothing = (answer: Result<K, unknown>) => mapAnswer(answer, () => undefined)
  const run = <T>(program: () => Program<T>) => client.run(program())
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
  /**
   * A claim with no cap per group takes the first jobs of claimCandidates. One under a cap (or of a job that runs
   * alone) walks its candidates (claimCandidatesByGroup, or the one job) here, counting each group's jobs against
   * its caps (groupRoom, and the runs under way against perGroup): in-process, a walk in JavaScript costs less than
   * SQLite's window functions over the same rows. Either marks the jobs running in one statement and renews the
   * worker's row, in the transaction under way.
   */
  function* claim(take: ClaimTake): Program<ClaimTaken> {
    const passOver = new Set(take.passOver)
    let claimed: ClaimedJob[]
    const heldBack = new Set<string>()
    if (take.perGroup === null && take.groupRoom === null && take.only === null) {
      const candidates = take.skipAbandoned ? sql.claimCandidatesNotAbandoned : sql.claimCandidates
      const read = yield* ask(candidates.all({ queue: take.queue, now: take.now, limit: take.limit + passOver.size }))
      claimed = passOver.size === 0 ? read : read.filter((job) => !passOver.has(job.seq)).slice(0, take.limit)
    } else {
      const candidates =
        take.only !== null
          ? yield* ask(sql.claimedOf.all({ seqs: JSON.stringify([take.only]) }))
          : yield* ask(
              sql.claimCandidatesByGroup.all({
                queue: take.queue,
                now: take.now,
                window: take.window + passOver.size,
                skipAbandoned: take.skipAbandoned ? 1 : 0,
                perGroup: take.perGroup,
              }),
            )
      const running =
        take.perGroup === null
          ? new Map<string, number>()
          : new Map((yield* ask(sql.groupsRunning.all(take.queue))).map((row) => [row.grp, row.running]))
      const seqs: number[] = []
      // The jobs of each group this claim takes, counted against its caps as it walks.
      const took = new Map<string, number>()
      for (const { seq, grp } of candidates) {
        if (seqs.length === take.limit) break
        if (passOver.has(seq)) continue
        if (grp !== null) {
          const inGroup = took.get(grp) ?? 0
          if (take.perGroup !== null && (running.get(grp) ?? 0) + inGroup >= take.perGroup) continue
          if (take.groupRoom !== null && inGroup >= roomOf(take.groupRoom, grp)) {
            heldBack.add(grp)
            continue
          }
          took.set(grp, inGroup + 1)
        }
        seqs.push(seq)
      }
      // The job that runs alone was read whole already; the others are read for what a claim answers.
      if (take.only !== null) claimed = (candidates as ClaimedJob[]).filter((job) => seqs.includes(job.seq))
      else claimed = seqs.length === 0 ? [] : yield* ask(sql.claimedOf.all({ seqs: JSON.stringify(seqs) }))
    }
    if (claimed.length === 0) return { claimed, heldBack: [...heldBack] }
    yield* ask(
      runForJobs(
        sql.markRunning,
        sql.markRunningAll,
        claimed.map((job) => job.seq),
        { owner: take.owner },
      ),
    )
    if (take.renewLease) yield* ask(sql.workerRenew.run(take.renewLease))
    return { claimed, heldBack: [...heldBack] }
  }

  /** A statement a kind of end (endRunsAlike), then the steps' delete. */
  function* endMany({ owner, expiredBy, ends }: ExpiredBy & { owner: string; ends: readonly JobEnd[] }): Program<number[]> {
    const ended: number[] = []
    const finished: number[] = []
    for (const group of alike(ends)) {
      const { seq, attempt, transition } = group[0]!
      const landed =
        group.length === 1
          ? yield* ask(sql.endRun.all({ ...transition, seq, attempt, owner, expiredBy }))
          : yield* ask(
              sql.endRunsAlike.all({
                ...transition,
                owner,
                expiredBy,
                runs: JSON.stringify(group.map((end) => [end.seq, end.attempt, end.transition.finishedAt, end.transition.result])),
              }),
            )
      for (const one of landed) ended.push(one)
      if (ENDED_STATES.includes(transition.state as EndedState)) for (const one of landed) finished.push(one)
    }
    if (finished.length > 0) yield* ask(runForJobs(sql.deleteSteps, sql.deleteStepsOfAll, finished, {}))
    return ended
  }

  /**
   * The flush in the transaction under way, which holds the write lock: the ends, then the policy read, the plan and
   * the claim, then the counters moved by both in one write.
   */
  function* flush(request: FlushRequest): Program<FlushAnswer> {
    const { queue, owner, ends } = request
    const moved: StateCounts = { waiting: 0, scheduled: 0, running: 0, done: 0, failed: 0, canceled: 0 }
    const ended = ends.length === 0 ? new Set<number>() : new Set(yield* endMany({ owner, expiredBy: null, ends }))
    const landed = ends.map((end) => ended.has(end.seq))
    ends.forEach((end, i) => {
      if (!landed[i]) return
      moved.running--
      moved[end.transition.state]++
    })
    let claimed: ClaimedJob[] = []
    if (request.claim !== null) {
      const sentAt = performance.now()
      // The queue's counter of runs under way is written as the transaction ends: the ends above are not in it yet.
      const policy = yield* ask(sql.queueClaimLimits.get({ queue, ended: ended.size, now: request.now }))
      const plan = request.claim.plan({ ...policy!, rateNow: request.clock() }, sentAt)
      let taken: ClaimTaken = { claimed: [], heldBack: [] }
      if (plan.alone !== null) taken = yield* claim(plan.alone)
      if (taken.claimed.length === 0 && !plan.holdBack && plan.take !== null) {
        const heldBack = taken.heldBack
        taken = yield* claim(plan.take)
        taken.heldBack.push(...heldBack)
      }
      claimed = taken.claimed
      for (const job of claimed) {
        moved[job.claimedFrom]--
        moved.running++
      }
      const log = request.claim.claimed(taken)
      if (log !== null) yield* ask(sql.storeRateStarts.run({ queue, starts: log }))
      if (plan.waiters !== undefined) yield* ask(sql.storeClaimWaiters.run({ queue, waiters: plan.waiters }))
    }
    if (Object.values(moved).some((n) => n !== 0)) yield* ask(sql.shiftCounts.run({ queue, ...moved }))
    return { landed, claimed }
  }

  return {
    ...sqliteScheduleRequests(client),
    dataVersion: () => sql.dataVersion.get(),
    counts: 'in-row',
    notifies: false,
    queueShiftCounts: (counts) => nothing(sql.shiftCounts.run(counts)),

    jobAdd: (job) =>
      run(function* () {
        if ((yield* ask(sql.insertJobIfRoom.run(job))).changes !== 1) return false
        yield* ask(sql.shiftCounts.run(addedCount(job)))
        return true
      }),
    jobAddUnique: (job) =>
      run(function* () {
        if ((yield* ask(sql.insertUniqueJobIfRoom.run(job))).changes === 1) {
          yield* ask(sql.shiftCounts.run(addedCount(job)))
          return { added: true }
        }
        // One writer at a time: what met the add is there to read in the same transaction.
        return { added: false, holder: (yield* ask(sql.jobHolder.get({ queue: job.queue, id: job.id, uniqueKey: job.uniqueKey }))) ?? null }
      }),
    jobAddDebounced: (job) =>
      run(function* () {
        const id = yield* ask(sql.upsertDebouncedJob.get(job))
        if (id === undefined) return { added: false, holder: null }
        // A job's id is its own: the row answered is the one added, or the waiting job that took the add.
        if (id !== job.id) return { added: false, holder: { id, matched: 'debounce' } }
        yield* ask(sql.shiftCounts.run(addedCount(job)))
        return { added: true }
      }),
    jobGetHolder: (find) => sql.jobHolder.get(find),
    jobInsert: (job) => changedOne(sql.insertJob.run(job)),
    jobInsertMany: (batch) => client.run(insertJobsInGroups(sql, batch)),
    jobExists: (queue, id) => mapAnswer(sql.jobExists.get(queue, id), (row) => row !== undefined),
    queueCountWaiting: (queue) => sql.queueCountWaiting.get(queue),

    queueGetClaimable: (queue) => sql.queueGetClaimable.get({ queue }),
    queueGetLimits: (queue) => sql.queueLimits.get(queue),
    queueSetLimits: (limits) => nothing(sql.storeQueueLimits.run(limits)),

    jobFlush: (request) => run(() => flush(request)),
    jobEndMany: (end) => run(() => endMany(end)),
    jobSetStateIfUnleased: (end) => changedOne(sql.endUnleased.run(end)),
    jobGetState: (seq) => sql.jobState.get(seq),
    stepDeleteMany: (seqs) => nothing(runForJobs(sql.deleteSteps, sql.deleteStepsOfAll, seqs, {})),

    workerRenew: (lease) =>
      run(function* () {
        yield* ask(sql.workerRenew.run(lease))
        return yield* ask(sql.heldRuns.all(lease.owner))
      }),
    workerDelete: (owner) => nothing(sql.workerDelete.run(owner)),
    workerHasExpired: (now) => mapAnswer(sql.workerExpired.get({ now }), (row) => row !== undefined),
    workerDeleteExpired: (now) => mapAnswer(sql.workerDeleteExpired.run({ now }), (result) => result.changes),
    jobListHeld: (owner) => sql.heldRuns.all(owner),
    leaseRenewIfHeld: (lease) =>
      changedOne(
        sql.leaseRenewIfHeld.run({
          seq: lease.seq,
          owner: lease.owner,
          attempt: lease.attempt,
          host: lease.host,
          pid: lease.pid,
          expiresAt: lease.expiresAt,
        }),
      ),
    jobListRunningOwners: (queue) => sql.runningOwners.all(queue),
    leaseGetAbandoned: ({ queue, self, now, deadOwners, limit }) =>
      sql.abandonedLeases.all({ queue, self, now, deadOwners: JSON.stringify(deadOwners), limit }),
    jobCountUnleased: (queue) => sql.unleasedCount.get({ queue }),
    jobGetUnleased: (find) => sql.unleasedRuns.all(find),

    stepGet: (seq, name) => sql.readStep.get(seq, name),
    stepSetIfLeased: (step) => changedOne(sql.writeStep.run(step)),

    eventGet: (seq, name) => sql.eventLook.get({ seq, name }),
    eventSetWaitingIfLeased: (wait) => changedOne(sql.eventWait.run(wait)),
    eventSetTimedOutIfLeased: (wait) => changedOne(sql.eventTimeOut.run(wait)),
    jobSignal: (signal) =>
      run(function* () {
        const job = yield* ask(sql.signalTarget.get(signal))
        if (job === undefined) return { found: false, sent: false, woke: false }
        if (ENDED_STATES.includes(job.state as EndedState)) return { found: true, sent: false, woke: false }
        const kept = yield* ask(sql.signalSend.run({ seq: job.seq, name: signal.name, payload: signal.payload, now: signal.now }))
        if (kept.changes !== 1) return { found: true, sent: false, woke: false }
        const woke = job.state === 'scheduled' && job.waitsFor === `event:${signal.name}`
        yield* ask(sql.signalJob.run({ seq: job.seq, now: signal.now, wake: woke ? 1 : 0 }))
        return { found: true, sent: true, woke }
      }),

    jobHasPrunable: (find) => mapAnswer(sql.firstPrunable.get(find), (row) => row !== undefined),
    jobDeleteEnded: (find) =>
      run(function* () {
        yield* ask(sql.pruneEvents.run(find))
        return (yield* ask(sql.pruneEnded.run(find))).changes
      }),

    jobGetSnapshot: (queue, id) => read().jobById.get(queue, id),
    jobGetSnapshots: (seqs) => read().jobsBySeq.all(JSON.stringify(seqs)),
    jobCountAhead: (at) =>
      run(function* () {
        const { aheadByPriority, aheadByRunAt, aheadBySeq } = read()
        let ahead = yield* ask(aheadByPriority.get(at))
        if (ahead < at.limit)
          ahead += yield* ask(
            aheadByRunAt.get({
              queue: at.queue,
              priority: at.priority,
              before: Math.min(at.runAt, at.now + 1),
              limit: at.limit - ahead,
            }),
          )
        if (ahead < at.limit) ahead += yield* ask(aheadBySeq.get({ ...at, limit: at.limit - ahead }))
        return ahead
      }),
    jobGetPlacesInLine: (line, seqs) =>
      mapAnswer(read().lineHead.iterate({ ...line, limit: line.limit }), (line) => {
        const places = new Map<number, number>()
        const wanted = new Set(seqs)
        let place = 0
        for (const seq of line) {
          if (wanted.delete(seq)) {
            places.set(seq, place)
            if (wanted.size === 0) break
          }
          place++
        }
        for (const seq of wanted) places.set(seq, place)
        return places
      }),

    jobFind: (queue, id) => admin().findJob.get(queue, id),
    jobGetRecord: (queue, id) => admin().jobRecord.get(queue, id),
    jobListOfQueue: (queue) => admin().queueJobs.all(queue),
    jobList: (order, page) => listings(order).all(page),
    jobGetOutcome: (seq) => admin().jobOutcome.get(seq),
    jobCancel: (seq, now) => changedOne(admin().cancelJob.run({ seq, now })),
    jobRetry: (seq, now) =>
      run(function* () {
        if ((yield* ask(admin().retryJob.run({ seq, now }))).changes === 1) return { outcome: 'retried' }
        const holder = yield* ask(admin().retryKeyHolder.get({ seq }))
        return holder === undefined ? { outcome: 'unchanged' } : { outcome: 'held', holder }
      }),
    stepList: (seq) => admin().jobSteps.all(seq),
    eventList: (seq) => admin().jobEvents.all(seq),
    leaseGet: (seq) => admin().jobLease.get(seq),
    queueSetPaused: (queue, paused) => nothing(admin().setPaused.run({ queue, paused: paused ? 1 : 0 })),
    queueGetCounts: (queue) => admin().queueCounts.get(queue),
    queueGetCountsAll: () => admin().allQueueCounts.all(),
    queueListNames: () => admin().queueListNames.all(),
    jobCountEnded: (window) => admin().endedBetween.get(window),
    jobCountEndedPerBucket: (window) => admin().endedPerBucket.all(window),
    jobGetEarliestRunnable: (queue) => admin().earliestRunnable.get({ queue }),
  }
}
