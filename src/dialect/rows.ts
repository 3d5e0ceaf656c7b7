/**
 * The rows and parameters of the requests the engine makes of a database
 * (executor.ts), whatever its dialect: each table's row as the protocol reads
 * it, and the parts of them each request reads or writes. A dialect's
 * statements read its columns as these types: times as whole ms since the
 * epoch, flags as 0 or 1, JSON as its text. Each dialect's Drizzle schema has
 * every column named here (test/drivers/rows.types.test.ts checks it).
 */
import type { EndedState, EnqueueMatch, JobState } from '../types.js'

/** A time in whole ms since the epoch: SQLite's integer as stored; PostgreSQL's timestamptz, rounded to the ms. */
export type EpochMs = number

/** A flag, 1 when set, else 0: SQLite's integer as stored; PostgreSQL's boolean, read as 0 or 1. */
export type Flag = number

/** JSON as text: SQLite's as written; PostgreSQL's jsonb in its own form (Capabilities.jsonAsText), cast to text so no driver parses it. */
export type JsonText = string

/** A `jobs_job` row. SQLite's `engine_writes` (how its counting triggers tell the engine's writes from others') is that dialect's own. */
export interface JobRow {
  /** The add order: SQLite's integer key; PostgreSQL's bigint identity, read as a number. */
  seq: number
  queue: string
  id: string
  grp: string | null
  value: JsonText
  state: JobState
  /** Lower runs first: any safe integer (a bigint on PostgreSQL, read as a number). */
  priority: number
  attempts: number
  maxAttempts: number
  runAt: EpochMs
  createdAt: EpochMs
  finishedAt: EpochMs | null
  error: string | null
  result: JsonText | null
  errorStack: string | null
  /** The worker running the job, null unless it runs. */
  owner: string | null
  abandoned: Flag
  /** The W3C trace context of the code that added the job, as a JSON object of its fields; null for none. */
  traceContext: JsonText | null
  /** What the job's parked run waits for (`sleep:<step>`, `event:<name>`) while it is scheduled; null for nothing. */
  waitsFor: string | null
  /** How many signals were sent to the job. */
  signals: number
  /** The job's unique key, with its window; null for none. */
  uniqueKey: string | null
  /** The states in which it holds its unique key, as `,waiting,scheduled,running,`; null for none. */
  uniqueStates: string | null
  /** The debounce id the job holds until it starts; null for none. */
  debounceKey: string | null
}

/** What a run's wait for an event reads: the job's signals, and the event's row where there is one. */
export interface EventLook {
  /** How many signals were sent to the job (jobs_job.signals). */
  signals: number
  /** The event's state, or null where it has no row. */
  state: EventRow['state'] | null
  payload: JsonText | null
  deadline: EpochMs | null
}

/** A signal: event `name` with `payload`, for the job `id` of `queue`. */
export interface SignalParams {
  queue: string
  id: string
  name: string
  payload: JsonText
  now: EpochMs
}

/** What a signal did. */
export interface SignalAnswer {
  /** The queue holds the job. */
  found: boolean
  /** The event was kept: the job had not ended, and had no event of that name but a run's wait for it. */
  sent: boolean
  /** The job's run was parked waiting for it, and is due now. */
  woke: boolean
}

/** A `jobs_event` row: an event of a job, by name, sent or waited for. */
export interface EventRow {
  job: number
  name: string
  state: 'waiting' | 'sent' | 'timed_out'
  /** The payload, once sent. */
  payload: JsonText | null
  /** Until when a waiting run waits; null for no timeout. */
  deadline: EpochMs | null
  /** When the row took its state. */
  at: EpochMs
}

/**
 * A `jobs_queue` row: its pause flag, its limits and rate (null: none), and its jobs per state (on PostgreSQL, those
 * folded into the row so far: pg/counts.ts, whose reads add the rest).
 */
export interface QueueRow extends StateCounts {
  name: string
  paused: Flag
  concurrency: number | null
  concurrencyPerGroup: number | null
  limitsSetAt: EpochMs | null
  rateLimit: number | null
  /** The rate's window in ms (a bigint on PostgreSQL, read as a number). */
  ratePer: number | null
  ratePerGroup: number | null
  rateStarts: JsonText | null
  claimWaiters: JsonText | null
}

/** A `jobs_step` row. PostgreSQL's `seq` (the order of a job's steps there) is that dialect's own. */
export interface StepRow {
  job: number
  name: string
  answer: JsonText | null
}

/**
 * A `jobs_lease` row: a worker's lease on every job it runs. `host` and `pid` say where the worker runs, as its owner
 * names it: the engine writes them on every insert of its row; another program's row may leave them null.
 */
export interface LeaseRow {
  owner: string
  host: string | null
  pid: number | null
  expiresAt: EpochMs
  channel: string | null
}

/** A run a worker holds: its job and the attempt it runs. */
export interface HeldRun {
  job: number
  attempt: number
}

/** A claimed job: `attempts` is the attempt the claim starts; `abandoned` is 1 when its last run was abandoned, so this run goes alone in its worker. */
export type ClaimedJob = Pick<
  JobRow,
  'seq' | 'id' | 'grp' | 'value' | 'attempts' | 'maxAttempts' | 'abandoned' | 'traceContext' | 'runAt'
> & {
  /** The state the claim took it from. */
  claimedFrom: 'waiting' | 'scheduled'
}

/**
 * A run a rescue takes back: its job, the worker it names and the attempt, and until when that worker's row held it
 * (null when the worker has no row).
 */
export type AbandonedLease = { owner: string; attempt: number; expiresAt: number | null } & Pick<JobRow, 'seq' | 'attempts' | 'maxAttempts'>

/** A running job that names no worker. */
export type UnleasedRun = Pick<JobRow, 'seq' | 'attempts' | 'maxAttempts'>

/**
 * What a worker reads of a queue before it takes the write lock (Executor.queueGetClaimable), alike on every driver,
 * for any queue (one with no row of its own answers as unpaused, unlimited and empty): its pause flag; its stored
 * limit (JOB-19); `running`, how many of its jobs run, a count, which the worker compares with that limit; `waiting`,
 * 1 when a job is due to run, else 0: a job waiting (made to wait when it was due) and, where the database keeps a
 * clock (ClaimLimits.rateNow), a scheduled job whose run_at has passed by that clock; `scheduled`, 1 when a job is
 * scheduled, due or not, else 0; and `nextScheduled`, when the first scheduled job is due, which the worker compares
 * with its own clock.
 */
export type Claimable = Pick<QueueRow, 'paused' | 'running' | 'waiting' | 'scheduled' | 'concurrency'> & { nextScheduled: number | null }

/**
 * A queue's policy, as a flush reads it in its transaction: the pause flag, the runs under way, the limits in force,
 * the rate's log, the workers waiting for a share, and the first due job that must run alone. A queue with no row of
 * its own (jobs written by another program) reads as unpaused and unlimited.
 */
export type ClaimLimits = Pick<QueueRow, 'paused' | 'running' | 'concurrency'> & {
  perGroup: QueueRow['concurrencyPerGroup']
} & Partial<StoredRate> & {
    rateStarts?: unknown
    /**
     * The time on the clock the rate's log is kept with, read with the policy: the server's where the database keeps
     * a clock (PostgreSQL's, read once the queue's lock is held), else the worker's (FlushRequest.clock).
     */
    rateNow: number
    /** The workers waiting for a share of the concurrency (engine/fair-share.ts), as stored: read when the queue has a concurrency. */
    claimWaiters?: unknown
    /** The first due job, in claim order, whose last run was abandoned (engine/alone.ts), and when it was due; null for none. */
    aloneSeq: number | null
    aloneRunAt: number | null
  }

/** What a flush claims, as the engine planned it from the queue's policy (engine/claim.ts). */
export interface ClaimPlan {
  /** A job that must run alone, claimed first and by itself; null for none. */
  alone: ClaimTake | null
  /** Whether `take` waits while `alone` is not taken: the job has waited long enough for a worker to free up for it. */
  holdBack: boolean
  /** The claim, when `alone` took nothing; null to claim nothing. */
  take: ClaimTake | null
  /** The workers waiting for a share of the concurrency, to write back (JSON text, null for none); undefined leaves them. */
  waiters?: string | null
}

/** The engine's plan of a flush's claim, which the driver asks in the flush's transaction. */
export interface ClaimPlanner {
  /** The claim for the queue's policy, read in the flush's transaction; `sentAt` is when (performance.now()) its read was sent. */
  plan(policy: ClaimLimits, sentAt: number): ClaimPlan
  /** After the claim: the rate's log to write back in the same transaction (JSON text), or null for none. */
  claimed(taken: ClaimTaken): string | null
}

/**
 * The bounds of one claim, as the engine's plan hands them to the flush (ClaimPlan): runnable jobs of `queue` due by
 * `now` in claim order (priority, run_at, seq), marked running for `owner`, counting their attempt, the worker's row
 * renewed when `renewLease` is set and it took any.
 */
export interface ClaimTake {
  queue: string
  owner: string
  now: number
  /** How many jobs at most. */
  limit: number
  /**
   * How many runnable jobs, in claim order, the claim looks at (the jobs it passes over among them): the caps per
   * group may leave some of them, so a claim under one looks further than `limit`. Groups already at `perGroup` are
   * left out before they count.
   */
  window: number
  /** Jobs whose runs this transaction ended: a later transaction claims them. */
  passOver: readonly number[]
  /** Leaves out the jobs whose last run was abandoned: they run alone, in a worker that runs nothing else. */
  skipAbandoned: boolean
  /** Takes this job alone, or nothing: a job that must run alone, for a worker that runs nothing. */
  only: number | null
  /** The most runs of one group at once, its runs under way counted (null: no cap). */
  perGroup: number | null
  /**
   * How many more runs of each group the rate's window lets start (engine/rate.ts): the groups `listed`, and any
   * other group `other`. Null when the rate has no cap per group. A job with no group is never held by either cap.
   */
  groupRoom: { listed: Record<string, number>; other: number } | null
  /** The worker's row to write when it takes any job, or null while it holds (engine/lease.ts). */
  renewLease: WorkerLease | null
}

/** What a claim took. */
export interface ClaimTaken {
  /** The jobs, in claim order. */
  claimed: ClaimedJob[]
  /** The groups of the jobs it passed over for the rate's cap per group before it was full: the worker looks again when they open. */
  heldBack: string[]
}

/** A queue's stored rate (JOB-22): null columns for no rate. */
export interface StoredRate {
  rateLimit: QueueRow['rateLimit']
  ratePer: QueueRow['ratePer']
  ratePerGroup: QueueRow['ratePerGroup']
}

/** A queue's limits as a worker stores them (null: no limit), and when. */
export interface StoreLimitsParams extends StoredRate {
  queue: string
  total: number | null
  perGroup: number | null
  now: number
}

/** The limits a queue holds, and when a worker stored them (null: never). */
export interface StoredLimits extends StoredRate {
  concurrency: QueueRow['concurrency']
  perGroup: QueueRow['concurrencyPerGroup']
  setAt: QueueRow['limitsSetAt']
}

/** A job as enqueue adds it. */
export type NewJob = Pick<JobRow, 'queue' | 'id' | 'grp' | 'value' | 'priority' | 'maxAttempts' | 'runAt' | 'traceContext'> & {
  state: 'waiting' | 'scheduled'
  now: number
  maxWaiting: number
}

/**
 * A job as enqueue adds it with a unique key (JOB-25): `unique_key`, the key with its window, and `unique_states`, the
 * states that hold it, as stored (`,waiting,scheduled,running,done,`).
 */
export type UniqueJob = NewJob & { uniqueKey: string; uniqueStates: string }

/** A job as enqueue adds it with a debounce id (JOB-26), its `debounce_key`, held while it waits to start. */
export type DebouncedJob = NewJob & { debounceKey: string }

/** The job an add met, and by which of its keys. */
export interface JobHolder {
  id: string
  matched: EnqueueMatch
}

/**
 * What an add with a unique key or a debounce id did: it added the job; or it met `holder` (the job holding its id or
 * its unique key, left as it was; or the waiting job of its debounce id, which took its value and run_at); or neither
 * (`holder` null): the queue had no room, or the job it met is not in what the add's statement reads (on PostgreSQL,
 * an add that committed while this one waited for it; anywhere, a job that left the index since).
 */
export type JobAdded = { added: true } | { added: false; holder: JobHolder | null }

/**
 * What a retry did: put the job back (`retried`); found it in a state other than failed or canceled (`unchanged`);
 * or found its unique key held by another job in a state that holds it (`held`: that job's id, null where the
 * database refused the write without naming it, an add that committed while the retry waited on PostgreSQL).
 */
export type JobRetried = { outcome: 'retried' } | { outcome: 'unchanged' } | { outcome: 'held'; holder: string | null }

/**
 * Jobs of one queue added together, all at `now` with the queue's attempts: each job its
 * `[id, grp, value, state, priority, runAt]`, in the order they are added.
 */
export interface NewJobs {
  queue: string
  maxAttempts: number
  now: number
  /** The trace context of the code that added them (JobRow.traceContext), the same for every job of the batch. */
  traceContext: JsonText | null
  jobs: readonly NewJobTuple[]
}

/** One job of NewJobs: `[id, grp, value, state, priority, runAt]`. */
export type NewJobTuple = readonly [
  id: string,
  grp: string | null,
  value: string,
  state: 'waiting' | 'scheduled',
  priority: number,
  runAt: number,
]

/** A worker's row, as its renewal writes it: the engine's rows always say where the worker runs. */
export interface WorkerLease {
  owner: string
  host: string
  pid: number
  expiresAt: number
  channel: string | null
}

/** A run's lease, as the fence tests it. */
export interface LeaseParams {
  seq: number
  owner: string
  attempt: number
}

/**
 * What an end's fence adds for a rescue: the time (ms) by which the lease it takes had expired when the rescuer
 * read it, so that a lease renewed since is not taken; null for an end by the run's own worker, and for a rescue
 * of a run whose worker's process is gone.
 */
export interface ExpiredBy {
  expiredBy: number | null
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
  /** What the run parked to wait for (jobs_job.waits_for: `sleep:<step>`, `event:<name>`), or null: any other end. */
  waitsFor: string | null
  /**
   * A run parked to wait for an event: the job's `signals` when the run found no event. Where a signal has bumped it
   * since, the end leaves the job due at once (its run_at as it was) and waiting for nothing, so that no signal is
   * lost between the run's look and its end. Null for any other end.
   */
  signals: number | null
}

/** One run's end: its job, its attempt, and the job's next row values. */
export interface JobEnd {
  seq: number
  attempt: number
  transition: RunEndParams
}

/**
 * A worker's flush of one queue, one operation of every driver (Executor.jobFlush): its own ends, then a claim the
 * engine plans from the queue's policy, read in the same transaction.
 */
export interface FlushRequest {
  queue: string
  owner: string
  now: number
  /** The worker's clock, read for the rate's log where the database keeps no clock of its own. */
  clock: () => number
  /** The worker's own ends, each fenced by its run (the job running that attempt for `owner`). */
  ends: readonly JobEnd[]
  /** The engine's plan of the claim, from the queue's policy; null to write the ends alone. */
  claim: ClaimPlanner | null
}

/** What a flush wrote. */
export interface FlushAnswer {
  /** Per end, whether it landed (false: its run had lost its lease). */
  landed: boolean[]
  /** The jobs claimed, in claim order. */
  claimed: ClaimedJob[]
}

/** What changed of a queue's jobs: `added` (jobs that may run), `claimed`, `ended` (runs ended or were taken back), `revoked` (leases taken from running jobs: a cancel), `other`. */
export type ChangeKind = 'added' | 'claimed' | 'ended' | 'revoked' | 'other'

/** How many jobs of one queue entered (positive) or left (negative) each state. */
export type StateCounts = Record<JobState, number>

/**
 * A job's row with its lease, as snapshots (getJob, watch) are built from; its result only once it has
 * ended. Another program may have stored values of other types in any column: queue/read.ts's toSnapshot
 * reads them through StoredColumns.
 */
export type SnapshotRow = Pick<
  JobRow,
  | 'seq'
  | 'queue'
  | 'id'
  | 'grp'
  | 'state'
  | 'priority'
  | 'runAt'
  | 'attempts'
  | 'maxAttempts'
  | 'createdAt'
  | 'finishedAt'
  | 'error'
  | 'result'
> & {
  /** What the job's parked run waits for (JobRow.waitsFor), read only while the job is scheduled: null otherwise. */
  waitsFor: JobRow['waitsFor']
  /** The worker running the job, while it runs. */
  owner: string | null
  /** The attempt it runs (the job's attempts) while it runs, else null. */
  leaseAttempt: number | null
  channel: LeaseRow['channel']
} & SnapshotRate

/**
 * A waiting job's queue rate, for the snapshot's `rateLimitedUntil`: null columns for a job that is not waiting or a
 * queue with no rate. `rateNow`, on PostgreSQL, is the server's clock, which the log is kept with; null on SQLite.
 */
export type SnapshotRate = { [K in keyof StoredRate]: StoredRate[K] | null } & { rateStarts: unknown; rateNow: number | null }

/** Where a job stands in claim order, for counting the jobs ahead of it, up to `limit`. */
export interface AheadParams {
  queue: string
  priority: number
  runAt: number
  seq: number
  now: number
  limit: number
}

/** A job as the admin API answers it; another program may have stored other types in any column (admin/list.ts's toRecord reads them as stored). */
export type AdminJobRow = Pick<
  JobRow,
  | 'seq'
  | 'queue'
  | 'id'
  | 'grp'
  | 'value'
  | 'state'
  | 'priority'
  | 'attempts'
  | 'maxAttempts'
  | 'runAt'
  | 'createdAt'
  | 'finishedAt'
  | 'error'
  | 'errorStack'
  | 'result'
> & {
  /** What the job's parked run waits for (JobRow.waitsFor), read only while the job is scheduled: null otherwise. */
  waitsFor: JobRow['waitsFor']
}

/** A job as `inspectJob` reads it: the admin API's row and the trace context stored with it. */
export type AdminJobDetailRow = AdminJobRow & Pick<JobRow, 'traceContext'>

/** A queue's counters. */
export type CountsRow = Pick<QueueRow, 'name' | 'paused' | 'waiting' | 'scheduled' | 'running' | 'done' | 'failed' | 'canceled'>

/** The orders a listing of jobs walks: each over the index that serves it, so a page costs the same on the millionth job as on the first. */
export type ListingOrder = 'waiting' | 'scheduled' | 'running' | 'ended' | 'newest'

/** A page of a listing: its filters, size, and the sort keys of the last job before it (as the engine writes them, or as another program stored them). */
export interface ListParams {
  queue: string | null
  state: JobState | null
  grp: string | null
  limit: number
  k1: number | string | Buffer
  k2: number | string | Buffer | undefined
  k3: number | string | Buffer | undefined
}

/** Ended jobs of a queue in one state within [since, until). */
export interface EndedWindow {
  queue: string
  state: EndedState
  since: number
  until: number
}
