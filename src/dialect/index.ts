/**
 * What the engine asks of a database, in one interface: each method is named
 * by what it does to jobs, leases, steps or queues, and holds that dialect's
 * SQL. The protocol (claim, fence, end, rescue, counting) is written once, in
 * engine/ and worker/, on top of it; a dialect is a folder beside this file
 * (sqlite/ today) that implements it and holds only its statements and type
 * conversions.
 *
 * Sync and async: better-sqlite3 answers at once, so the SQLite executor is
 * `Executor<'sync'>` and `enqueue` stays synchronous in the caller's
 * transaction. An asynchronous driver (PostgreSQL) will implement
 * `Executor<'async'>`, whose methods answer promises (`Result<'async', T>`),
 * and the worker, which is async anyway, will await both.
 */
import type { InferSelectModel } from 'drizzle-orm'
import type { jobsJob, jobsLease, jobsQueue, jobsStep } from '../schema/index.js'
import type { EndedState, JobState } from '../types.js'

/** Whether a dialect's driver answers at once (`sync`) or with promises (`async`). */
export type Kind = 'sync' | 'async'

/** What a method of a `K` executor answers for `T`. */
export type Result<K extends Kind, T> = K extends 'sync' ? T : Promise<T>

/** A row of each table, its columns named as the schema names them. */
export type JobRow = InferSelectModel<typeof jobsJob>
export type QueueRow = InferSelectModel<typeof jobsQueue>
export type StepRow = InferSelectModel<typeof jobsStep>
export type LeaseRow = InferSelectModel<typeof jobsLease>

/** A claimed job: `attempts` is the attempt the claim starts; `abandoned` is 1 when its last run was abandoned, so this run goes alone in its worker. */
export type ClaimedJob = Pick<JobRow, 'seq' | 'id' | 'grp' | 'value' | 'attempts' | 'maxAttempts' | 'abandoned'> & {
  /** The state the claim took it from. */
  claimedFrom: 'waiting' | 'scheduled'
}

/** A lease a rescue takes back, with its job's attempts. */
export type AbandonedLease = Pick<LeaseRow, 'owner' | 'attempt' | 'expiresAt'> & Pick<JobRow, 'seq' | 'attempts' | 'maxAttempts'>

/** A running job that holds no lease. */
export type UnleasedRun = Pick<JobRow, 'seq' | 'attempts' | 'maxAttempts'>

/** What a worker reads of a queue before it takes the write lock: its counters, its stored limit, and when its next scheduled job is due. */
export type Claimable = Pick<QueueRow, 'paused' | 'running' | 'waiting' | 'scheduled' | 'concurrency'> & { nextScheduled: number | null }

/** What a claim reads first, inside its transaction: the pause flag, the runs under way, the limits in force. */
export type ClaimLimits = Pick<QueueRow, 'paused' | 'running' | 'concurrency'> & { perGroup: QueueRow['concurrencyPerGroup'] }

/** The limits a queue holds, and when a worker stored them (null: never). */
export interface StoredLimits {
  concurrency: QueueRow['concurrency']
  perGroup: QueueRow['concurrencyPerGroup']
  setAt: QueueRow['limitsSetAt']
}

/** A job as enqueue adds it. */
export type NewJob = Pick<JobRow, 'queue' | 'id' | 'grp' | 'value' | 'priority' | 'maxAttempts' | 'runAt'> & {
  state: 'waiting' | 'scheduled'
  now: number
  maxWaiting: number
}

/** The jobs a claim may take: runnable jobs of `queue` due by `now`. */
export interface ClaimWindow {
  queue: string
  now: number
}

/** The lease a claim writes for each job it takes. */
export interface NewLease {
  owner: string
  expiresAt: number
  channel: string | null
}

/** A run's lease, as the fence tests it. */
export interface LeaseParams {
  seq: number
  owner: string
  attempt: number
}

/** The job's next row values: what a run's end writes. */
export interface RunEndParams {
  state: JobState
  runAt: number | null
  finishedAt: number | null
  result: string | null
  error: string | null
  errorStack: string | null
  /** 1 when the run gives its attempt back (a snooze), else 0. */
  refund: 0 | 1
  /** 1 when the run ended without an outcome and its job's next run goes alone (engine/alone.ts). */
  abandoned: 0 | 1
}

/** One run of several ended alike: its job, attempt, finish time and result. */
export type RunEndOf = readonly [seq: number, attempt: number, finishedAt: number | null, result: string | null]

/** How many jobs of one queue entered (positive) or left (negative) each state. */
export type StateCounts = Record<JobState, number>

/**
 * The engine's requests to one connection. Writes run inside the caller's transaction
 * (Connection.immediate); those that end a run or keep a step carry the lease fence (owner, attempt)
 * in the same statement, so a run that lost its lease changes nothing.
 */
export interface Executor<K extends Kind = 'sync'> {
  /** A number that moves when another connection commits: the poll that finds other processes' writes. */
  dataVersion(): Result<K, number>
  /** Adds the engine's own moves of one transaction to a queue's counters, creating its row on its first job. */
  queueShiftCounts(counts: { queue: string } & StateCounts): Result<K, void>

  /** Adds one job unless its id is taken or the queue holds `maxWaiting` jobs waiting or scheduled; answers whether it did. */
  jobInsertIfRoom(job: NewJob): Result<K, boolean>
  /** Adds one job unless its id is taken; answers whether it did. */
  jobInsert(job: NewJob): Result<K, boolean>
  jobExists(queue: string, id: string): Result<K, boolean>
  /** The jobs a queue holds waiting or scheduled, by its counters. */
  queueWaitingCount(queue: string): Result<K, number | undefined>

  /** What a worker reads before it takes the write lock. */
  queueClaimable(queue: string): Result<K, Claimable | undefined>
  queueClaimLimits(queue: string): Result<K, ClaimLimits | undefined>
  queueLimitsGet(queue: string): Result<K, StoredLimits | undefined>
  /** Stores a queue's limits, replacing any others: the worker started last wins. */
  queueLimitsSet(limits: { queue: string; total: number | null; perGroup: number | null; now: number }): Result<K, void>

  /** Runnable jobs in claim order (priority, run_at, seq), leaving out those that must run alone when `skipAbandoned`. */
  jobGetAvailable(window: ClaimWindow & { limit: number }, skipAbandoned: boolean): Result<K, ClaimedJob[]>
  /** The first due job whose last run was abandoned. */
  jobGetFirstAbandoned(window: ClaimWindow): Result<K, (ClaimedJob & Pick<JobRow, 'runAt'>) | undefined>
  /** Candidates for a claim under a per-group cap, leaving out groups already at it. */
  jobGetAvailableByGroup(window: ClaimWindow & { perGroup: number; limit: number; skipAbandoned: 0 | 1 }): Result<K, Pick<JobRow, 'seq' | 'grp'>[]>
  /** One job, if runnable, as a claim answers it. */
  jobGetAvailableOne(seq: number): Result<K, ClaimedJob | undefined>
  /** Runs under way per group of a queue. */
  leaseCountByGroup(queue: string): Result<K, { grp: string; running: number }[]>
  /** Marks running the runnable jobs `seqs`, counting their attempt; answers how many it marked. */
  jobSetRunningMany(seqs: readonly number[]): Result<K, number>
  leaseInsertMany(seqs: readonly number[], lease: NewLease): Result<K, void>

  /** Ends a run, fenced by its lease; answers whether it landed. */
  jobSetStateIfLeased(end: RunEndParams & LeaseParams): Result<K, boolean>
  /** Ends several runs of one owner that end alike but for finish time and result, fenced; answers the jobs it ended. */
  jobSetStateIfLeasedMany(end: Omit<RunEndParams, 'finishedAt' | 'result'> & { owner: string; runs: readonly RunEndOf[] }): Result<K, Pick<JobRow, 'seq'>[]>
  /** Ends a run that holds no lease, while it still holds none; answers whether it landed. */
  jobSetStateIfUnleased(end: RunEndParams & { seq: number }): Result<K, boolean>
  jobGetState(seq: number): Result<K, JobState | undefined>
  leaseDeleteMany(seqs: readonly number[]): Result<K, void>
  stepDeleteMany(seqs: readonly number[]): Result<K, void>

  /** Renews every lease an owner still holds; answers the ones still held. */
  leaseRenewByOwner(renew: { owner: string; expiresAt: number }): Result<K, Pick<LeaseRow, 'job' | 'attempt'>[]>
  leaseListByOwner(owner: string): Result<K, Pick<LeaseRow, 'job' | 'attempt'>[]>
  leaseHeld(lease: LeaseParams): Result<K, boolean>
  /** The owners holding leases of a queue. */
  leaseOwners(queue: string): Result<K, string[]>
  /** Leases of a queue, not `self`'s, that expired or whose owner is one of `deadOwners`. */
  leaseGetAbandoned(find: { queue: string; self: string; now: number; deadOwners: readonly string[]; limit: number }): Result<K, AbandonedLease[]>
  /** How many more jobs a queue counts running than it holds leases. */
  jobCountUnleased(queue: string): Result<K, number>
  jobGetUnleased(find: { queue: string; limit: number }): Result<K, UnleasedRun[]>

  /** A step's kept answer: undefined when none is kept. */
  stepGet(seq: number, name: string): Result<K, StepRow['answer'] | undefined>
  /** Keeps a step's answer, fenced by the lease; answers whether it was written. */
  stepSetIfLeased(step: LeaseParams & { name: string; answer: string | null }): Result<K, boolean>

  jobHasPrunable(find: { queue: string; state: EndedState; before: number }): Result<K, boolean>
  /** Deletes up to `limit` jobs of a queue that ended in `state` before `before`; answers how many. */
  jobDeleteEnded(find: { queue: string; state: EndedState; before: number; limit: number }): Result<K, number>
}

/** The engine's view of one database connection, whatever its dialect. */
export interface Connection<K extends Kind = 'sync'> {
  readonly executor: Executor<K>
  /** Names the database, so that every connection of this process to it shares wake-ups. */
  readonly key: string
  /** Whether a transaction is under way on this connection. */
  inTransaction(): boolean
  /** Runs `work` in a write transaction, or in a savepoint of the one under way. */
  immediate<T>(work: () => T): T
  /**
   * Runs `work` in a write transaction of its own (the connection must not be in one) and answers how
   * long taking the write lock took, in ms: more than a moment means another writer held it.
   */
  immediateTimed<T>(work: () => T): { value: T; lockWaitMs: number }
}
