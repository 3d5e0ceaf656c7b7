/**
 * What the engine asks of a database, in one interface: each method is named
 * table, verb, qualifier (`jobEndMany`, `queueGetLimits`), by what it does to
 * jobs, leases, steps or queues, and holds its dialect's SQL. The protocol is
 * written once, in engine/ and worker/, on top of it; each dialect is a folder
 * beside this file (sqlite/, pg/) that implements it. What differs between
 * databases is stated (`counts`, `notifies`), never a method that does nothing.
 *
 * better-sqlite3 answers at once, so its executor is `Executor<'sync'>` and
 * `enqueue` stays synchronous in the caller's transaction; an asynchronous
 * driver's answers promises. Programs (program.ts) run on either.
 */
import type { EndedState, JobState } from '../types.js'
import type {
  AbandonedLease,
  AdminJobDetailRow,
  AdminJobRow,
  AheadParams,
  ChangeKind,
  Claimable,
  CountsRow,
  EndedWindow,
  EventLook,
  EventRow,
  ExpiredBy,
  JobEnd,
  FlushAnswer,
  FlushRequest,
  JobRow,
  LeaseParams,
  HeldRun,
  ListingOrder,
  ListParams,
  NewJob,
  NewJobs,
  DebouncedJob,
  JobAdded,
  JobHolder,
  JobRetried,
  UniqueJob,
  RunEndParams,
  SignalAnswer,
  SignalParams,
  SnapshotRow,
  StateCounts,
  StepRow,
  StoredLimits,
  StoreLimitsParams,
  UnleasedRun,
  WorkerLease,
} from './rows.js'
import type { ScheduleRequests } from './schedules.js'

/** Whether a dialect's driver answers at once (`sync`) or with promises (`async`). */
export type Kind = 'sync' | 'async'

/** What a method of a `K` executor answers for `T`. */
export type Result<K extends Kind, T> = K extends 'sync' ? T : Promise<T>

/**
 * The engine's requests to one connection. Writes run in the transaction of the connection's `write`, but for a
 * run's step writes and lease renewals and a fold of the counts, each one statement alone. Those that end a run, keep
 * a step or renew one run's lease carry the fence (each dialect's terms.ts: the job running this attempt for this
 * owner) in the same statement, so that a run that lost its lease changes nothing (JOB-16).
 */
export type Executor<K extends Kind = Kind> = ExecutorRequests<K> & CountKeeping<K> & Notices<K>

/** How a database keeps a queue's counts by state (engine/counts.ts), with the requests that way needs. */
export type CountKeeping<K extends Kind> =
  | {
      /** In the queue's row, moved by the engine's own writes in their transaction, and by triggers for every other write (SQLite). */
      readonly counts: 'in-row'
      /** Adds the engine's own moves of one transaction to a queue's counters, creating its row on its first job. */
      queueShiftCounts(counts: { queue: string } & StateCounts): Result<K, void>
    }
  | {
      /** Apart, appended by triggers on every write and folded into the row by maintenance (PostgreSQL's jobs_count): writers do not wait on one row. */
      readonly counts: 'apart'
      /** Makes a queue's row on its first job, for its pause flag and limits, taking no lock on a row that exists. */
      queueEnsureRow(queue: string): Result<K, void>
      /** Whether some of a queue's counts are not folded yet. */
      queueHasUnfolded(queue: string): Result<K, boolean>
      /** Folds them into the row, unless another transaction is folding them; answers how many changes it folded. */
      queueFoldCounts(queue: string): Result<K, number>
    }

/** Whether a database tells other processes of changes as they commit (NOTIFY); where not, they poll the data version. */
export type Notices<K extends Kind> =
  | {
      readonly notifies: true
      /** Tells other processes, once the transaction commits, that the jobs of `queue` changed (Connection.listen). */
      queueNotify(queue: string, kind: ChangeKind): Result<K, void>
    }
  | { readonly notifies: false }

/** The requests every driver answers. */
export interface ExecutorRequests<K extends Kind = Kind> extends ScheduleRequests<K> {
  /** A number that moves when another connection commits: the poll that finds other processes' writes. */
  dataVersion(): Result<K, number>

  /**
   * Adds one job as `enqueue` does, whole: unless its id is taken or the queue holds `maxWaiting` jobs waiting or
   * scheduled, with its count, the queue's row and the notice; answers whether it added it. One round trip in the
   * app's transaction where there are round trips.
   */
  jobAdd(job: NewJob): Result<K, boolean>
  /**
   * Adds one job with a unique key as `enqueue` does, whole (JOB-25): unless its id is taken, its key is held by a job
   * in one of that job's `unique_states` (the partial unique index jobs_job_unique, in one insert that does nothing on
   * a conflict, never a read before it), or the queue holds `maxWaiting` jobs waiting or scheduled; with its count,
   * the queue's row and the notice. Answers the holder of its id, or else of its key, that its statement reads.
   */
  jobAddUnique(job: UniqueJob): Result<K, JobAdded>
  /**
   * Adds one job with a debounce id as `enqueue` does, whole (JOB-26), or, where a job of the queue holds that id
   * (waiting or scheduled: jobs_job_debounce), gives that job this one's value, run_at and state instead, in one
   * upsert; with its count, the queue's row and the notice. A full queue refuses an add, never the merge.
   */
  jobAddDebounced(job: DebouncedJob): Result<K, JobAdded>
  /** The job of `queue` with `id`, or else the one holding `uniqueKey` in one of its `unique_states`. */
  jobGetHolder(find: { queue: string; id: string; uniqueKey: string | null }): Result<K, JobHolder | undefined>
  /** Adds one job unless its id is taken; answers whether it did. */
  jobInsert(job: NewJob): Result<K, boolean>
  /** Adds jobs of one queue in order but for ids taken or repeated in the batch; answers the ids it added. */
  jobInsertMany(batch: NewJobs): Result<K, string[]>
  jobExists(queue: string, id: string): Result<K, boolean>
  /** The jobs a queue holds waiting or scheduled, by its counters. */
  queueCountWaiting(queue: string): Result<K, number | undefined>

  /** What a worker reads before it takes the write lock. */
  queueGetClaimable(queue: string): Result<K, Claimable | undefined>
  queueGetLimits(queue: string): Result<K, StoredLimits | undefined>
  /** Stores a queue's limits (its rate among them), replacing any others: the worker started last wins. */
  queueSetLimits(limits: StoreLimitsParams): Result<K, void>

  /**
   * A worker's flush of one queue, in the transaction under way: its own ends, each behind the fence with its own
   * next state (the steps of the jobs that ended dropped); then the queue's policy read under a lock its claims take
   * turns on, so that its limits hold across processes, the engine's plan asked, and the jobs claimed in claim order,
   * counting their attempt, the worker's row renewed as planned. The counts, the rate's log, the waiters for a share
   * and the notice are written in the same operation.
   */
  jobFlush(flush: FlushRequest): Result<K, FlushAnswer>
  /**
   * Ends runs of `owner`, each with its own next state, behind the fence (for a rescue, also the owner's row expired
   * by `expiredBy`, or gone); drops the steps of the jobs that ended. Answers the jobs it ended: a run missing there
   * had lost its lease.
   */
  jobEndMany(end: ExpiredBy & { owner: string; ends: readonly JobEnd[] }): Result<K, number[]>
  /** Ends a run that names no worker, while it still names none; answers whether it landed. */
  jobSetStateIfUnleased(end: RunEndParams & { seq: number }): Result<K, boolean>
  jobGetState(seq: number): Result<K, JobState | undefined>
  stepDeleteMany(seqs: readonly number[]): Result<K, void>

  /**
   * Renews a worker's row (writing it if it is gone) in one statement that waits on no lock, a row it could not renew
   * at once being renewed next time; answers the runs the worker holds.
   */
  workerRenew(lease: WorkerLease): Result<K, HeldRun[]>
  workerDelete(owner: string): Result<K, void>
  /** Whether a worker's row expired by `now` while its worker holds no run (a worker that died idle, or whose runs were taken back). */
  workerHasExpired(now: number): Result<K, boolean>
  workerDeleteExpired(now: number): Result<K, number>
  /** The runs a worker holds: a run missing here lost its lease (a cancel, a rescue). */
  jobListHeld(owner: string): Result<K, HeldRun[]>
  /**
   * Renews the row of one run's worker (writing it if it is gone) behind the fence; answers whether the run still
   * holds its job. A lease that expired but that nobody took is the run's again: a rescue re-checks the expiry under
   * its locks.
   */
  leaseRenewIfHeld(lease: LeaseParams & Pick<WorkerLease, 'host' | 'pid' | 'expiresAt'>): Result<K, boolean>
  jobListRunningOwners(queue: string): Result<K, string[]>
  /** Runs of a queue, not `self`'s, whose worker's row expired or is gone, or whose worker is one of `deadOwners`. */
  leaseGetAbandoned(find: {
    queue: string
    self: string
    now: number
    deadOwners: readonly string[]
    limit: number
  }): Result<K, AbandonedLease[]>
  jobCountUnleased(queue: string): Result<K, number>
  jobGetUnleased(find: { queue: string; limit: number }): Result<K, UnleasedRun[]>

  stepGet(seq: number, name: string): Result<K, StepRow['answer'] | undefined>
  /** Keeps a step's answer, behind the fence; answers whether it was written. */
  stepSetIfLeased(step: LeaseParams & { name: string; answer: string | null }): Result<K, boolean>

  /** A run's look for event `name` of its job: the job's signals and the event's row; undefined where the job is gone. */
  eventGet(seq: number, name: string): Result<K, EventLook | undefined>
  /**
   * Marks the run's wait for event `name` (a `waiting` row, until `deadline`; null: none), behind the fence; answers
   * whether it was written (false: the event has a row already, or the run lost its lease).
   */
  eventSetWaitingIfLeased(wait: LeaseParams & { name: string; deadline: number | null; now: number }): Result<K, boolean>
  /** Ends the run's wait for event `name` as timed out, behind the fence, unless a signal took it first; answers whether it did. */
  eventSetTimedOutIfLeased(wait: LeaseParams & { name: string; now: number }): Result<K, boolean>
  /**
   * Sends event `name` to a job, in the caller's transaction: kept where the job has not ended and has no event of
   * that name but a wait for it; the job's signals bumped; its run made due at once where it is parked waiting for it.
   */
  jobSignal(signal: SignalParams): Result<K, SignalAnswer>

  jobHasPrunable(find: { queue: string; state: EndedState; before: number }): Result<K, boolean>
  jobDeleteEnded(find: { queue: string; state: EndedState; before: number; limit: number }): Result<K, number>

  // Reads: getJob, watch. They never take the write lock.
  jobGetSnapshot(queue: string, id: string): Result<K, SnapshotRow | undefined>
  jobGetSnapshots(seqs: readonly number[]): Result<K, SnapshotRow[]>
  /** How many runnable jobs (waiting, or scheduled and due) of the queue come before a job in claim order, up to `limit`. */
  jobCountAhead(at: AheadParams): Result<K, number>
  /**
   * The places in claim order of several runnable jobs of one queue, in one walk down the line that stops after the
   * last of them or after `limit` jobs; a job not met by then is given the place the walk stopped at.
   */
  jobGetPlacesInLine(line: { queue: string; now: number; limit: number }, seqs: ReadonlySet<number>): Result<K, Map<number, number>>

  // The admin API, the testing helpers, the command-line tool and the dashboard.
  jobFind(queue: string, id: string): Result<K, Pick<JobRow, 'seq' | 'state'> | undefined>
  /** A job's row, with the trace context stored with it. */
  jobGetRecord(queue: string, id: string): Result<K, AdminJobDetailRow | undefined>
  /** Every job of a queue in add order: for the testing helpers, on small test databases. */
  jobListOfQueue(queue: string): Result<K, AdminJobRow[]>
  jobList(order: ListingOrder, page: ListParams): Result<K, AdminJobRow[]>
  jobGetOutcome(seq: number): Result<K, Pick<JobRow, 'state' | 'error'> | undefined>
  /** Ends a job that has not ended yet as canceled, clearing its worker; answers whether it did. Its steps are the caller's to delete. */
  jobCancel(seq: number, now: number): Result<K, boolean>
  /**
   * Puts a failed or canceled job back to waiting with fresh attempts and no debounce id, unless another job holds its
   * unique key in a state that holds it; answers what it did. Its steps are the caller's to delete.
   */
  jobRetry(seq: number, now: number): Result<K, JobRetried>
  stepList(seq: number): Result<K, Pick<StepRow, 'name' | 'answer'>[]>
  /** A job's events (sent, waited for, timed out), in the order they took their state, by name within one ms. */
  eventList(seq: number): Result<K, Omit<EventRow, 'job'>[]>
  /** A running job's lease: its worker, the attempt, and until when the worker's row holds it (null: the worker has no row). */
  leaseGet(seq: number): Result<K, { owner: string; attempt: number; expiresAt: number | null } | undefined>
  queueSetPaused(queue: string, paused: boolean): Result<K, void>
  queueGetCounts(queue: string): Result<K, CountsRow | undefined>
  queueGetCountsAll(): Result<K, CountsRow[]>
  queueListNames(): Result<K, string[]>
  jobCountEnded(window: EndedWindow): Result<K, number>
  /** Ended jobs of a state within the window, counted per bucket of `bucketMs` (bucket: finish time / bucketMs). */
  jobCountEndedPerBucket(window: EndedWindow & { bucketMs: number }): Result<K, { bucket: number; count: number }[]>
  jobGetEarliestRunnable(queue: string): Result<K, number | null>
}
