/**
 * The tables of drizzle-jobs, as Drizzle schema. Merge them into the
 * app's schema (`export * from 'drizzle-jobs/schema'`) and let drizzle-kit
 * create them: `drizzle-kit generate`, then `drizzle-kit migrate`.
 *
 * The columns are a documented protocol (README, "Tables"): producers and
 * workers in other languages may use them with plain SQL.
 */
import { sql } from 'drizzle-orm'
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core'

/** Now in ms, in an expression every SQLite version understands (unixepoch('subsec') needs 3.42). */
const nowMs = sql`(cast((julianday('now') - 2440587.5) * 86400000 as integer))`

/**
 * One row per queue: its pause flag, its limits across every process, and its jobs counted by state
 * (kept by the engine, and by triggers for other writers).
 */
export const jobsQueue = sqliteTable('jobs_queue', {
  name: text('name').primaryKey(),
  paused: integer('paused').notNull().default(0),
  /** Runs at once across every worker of every process, or null for no limit: stored by the worker started last, enforced by every claim. */
  concurrency: integer('concurrency'),
  /** Runs at once of one group, likewise, or null for no limit. */
  concurrencyPerGroup: integer('concurrency_per_group'),
  /** When a worker last stored the limits (ms), or null if none ever did. */
  limitsSetAt: integer('limits_set_at'),
  /** Run starts allowed in any window of `rate_per` ms across every process, or null for no rate: stored like the limits above. */
  rateLimit: integer('rate_limit'),
  /** The rate's window in ms, or null. */
  ratePer: integer('rate_per'),
  /** Run starts of one group allowed in any window of `rate_per` ms, or null. */
  ratePerGroup: integer('rate_per_group'),
  /** Internal: the recent run starts the rate needs (JSON), written by each claim of a queue with a rate. */
  rateStarts: text('rate_starts'),
  /**
   * Internal: the workers that want more runs than the queue's `concurrency` lets them have now, as JSON
   * `{ "<owner>": expiresAtMs }`, written by claims so that every process gets its share of the limit.
   */
  claimWaiters: text('claim_waiters'),
  waiting: integer('waiting').notNull().default(0),
  scheduled: integer('scheduled').notNull().default(0),
  running: integer('running').notNull().default(0),
  done: integer('done').notNull().default(0),
  failed: integer('failed').notNull().default(0),
  canceled: integer('canceled').notNull().default(0),
})

/** One row per job. `seq` is the add order; claims go by priority, run_at, seq. */
export const jobsJob = sqliteTable(
  'jobs_job',
  {
    seq: integer('seq').primaryKey(),
    queue: text('queue').notNull(),
    id: text('id').notNull().default(sql`(lower(hex(randomblob(16))))`),
    grp: text('grp'),
    value: text('value').notNull().default('null'),
    state: text('state', { enum: ['waiting', 'scheduled', 'running', 'done', 'failed', 'canceled'] })
      .notNull()
      .default('waiting'),
    priority: integer('priority').notNull().default(0),
    attempts: integer('attempts').notNull().default(0),
    maxAttempts: integer('max_attempts').notNull().default(10),
    runAt: integer('run_at').notNull().default(nowMs),
    createdAt: integer('created_at').notNull().default(nowMs),
    finishedAt: integer('finished_at'),
    error: text('error'),
    result: text('result'),
    /** Internal: the stack of the error that ended the last failed run, for the dashboard. */
    errorStack: text('error_stack'),
    /**
     * The worker running the job (its `jobs_lease` row), set by the claim that starts a run and cleared by its end:
     * with `attempts`, the run's fence. Null unless the job is running.
     */
    owner: text('owner'),
    /**
     * The trace context of the code that added the job, as W3C trace context fields in a JSON object
     * (`{"traceparent": "00-…", "tracestate": "…"}`): a run's span is the child of it. Null when no trace was active.
     */
    traceContext: text('trace_context'),
    /**
     * What a parked run waits for while its job is `scheduled`: `sleep:<step>` (until `run_at`), `event:<name>`
     * (a signal of that name, or `run_at`, its timeout); null otherwise. A parked run holds no slot and has its
     * attempt given back.
     */
    waitsFor: text('waits_for'),
    /**
     * Bumped by each signal sent to the job: a run that parks to wait for an event resumes at once when one came
     * since it looked.
     */
    signals: integer('signals').notNull().default(0),
    /**
     * The job's unique key (`unique` of its queue or add), with its window: no two jobs of a queue hold one key
     * in the states of `unique_states` (jobs_job_unique).
     */
    uniqueKey: text('unique_key'),
    /** The states in which the job holds its unique key, as `,waiting,scheduled,running,…,`; null without a key. */
    uniqueStates: text('unique_states'),
    /** The job's debounce id (an add's `debounce.id`): held while the job waits to start its first run (jobs_job_debounce). */
    debounceKey: text('debounce_key'),
    /** Internal: 1 when the last run ended without an outcome (its worker died, or its lease expired); such a job next runs alone in its worker, so a job that kills its process takes no other job down with it. */
    abandoned: integer('abandoned').notNull().default(0),
    /**
     * Internal: bumped by each state change the engine makes, which counts it in `jobs_queue` itself;
     * the triggers count the writes that leave it as it was (other writers': leave it alone).
     */
    engineWrites: integer('engine_writes').notNull().default(0),
  },
  (t) => [
    uniqueIndex('jobs_job_queue_id').on(t.queue, t.id),
    index('jobs_job_claim').on(t.queue, t.priority, t.runAt, t.seq).where(sql`state in ('waiting', 'scheduled')`),
    index('jobs_job_scheduled').on(t.queue, t.runAt).where(sql`state = 'scheduled'`),
    index('jobs_job_abandoned').on(t.queue, t.priority, t.runAt, t.seq).where(sql`abandoned = 1 and state in ('waiting', 'scheduled')`),
    index('jobs_job_ended').on(t.queue, t.state, t.finishedAt).where(sql`state in ('done', 'failed', 'canceled')`),
    /** The runs under way, by queue and worker: a queue's running count, its groups', and the runs of a worker gone. */
    index('jobs_job_running').on(t.queue, t.owner).where(sql`state = 'running'`),
    /** One job of a queue holds a unique key in the states it names. */
    uniqueIndex('jobs_job_unique')
      .on(t.queue, t.uniqueKey)
      .where(sql`unique_key is not null and instr(unique_states, ',' || state || ',') > 0`),
    /** One job of a queue holds a debounce id until it starts. */
    uniqueIndex('jobs_job_debounce').on(t.queue, t.debounceKey).where(sql`debounce_key is not null and state in ('waiting', 'scheduled')`),
  ],
)

/** One row per finished step of a job; deleted when the job ends. */
export const jobsStep = sqliteTable(
  'jobs_step',
  {
    job: integer('job')
      .notNull()
      .references(() => jobsJob.seq, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    answer: text('answer'),
  },
  (t) => [primaryKey({ columns: [t.job, t.name] })],
)

/**
 * One row per event of a job, by name: sent to it (`signal`), waited for by its run (`waitForEvent`), or both.
 * `state` says which: `sent` (by `signal`, or a producer's plain insert), `waiting` (a run waits, until `deadline`
 * when it gave a timeout), `timed_out` (the wait ended without one). A signal takes a row that is absent or
 * `waiting`; a run's wait answers what the row holds, in this run or any later one. Kept until the job is deleted.
 */
export const jobsEvent = sqliteTable(
  'jobs_event',
  {
    job: integer('job')
      .notNull()
      .references(() => jobsJob.seq, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    state: text('state', { enum: ['waiting', 'sent', 'timed_out'] })
      .notNull()
      .default('sent'),
    /** The event's payload as JSON, once sent. */
    payload: text('payload'),
    /** Until when (ms) a waiting run waits, or null for no timeout. */
    deadline: integer('deadline'),
    /** When the row took its state (ms). */
    at: integer('at').notNull().default(nowMs),
  },
  (t) => [primaryKey({ columns: [t.job, t.name] })],
)

/**
 * One row per worker: its lease on every job it runs. A worker renews its row every third of the lease, however
 * many jobs it runs; a job whose worker's row expired (or is gone) is taken back by the others. The owner names
 * its host and process, so that a worker on the same host takes back a dead process's jobs at once; `host` and
 * `pid` say the same in columns of their own, for a tool that reads the table.
 */
export const jobsLease = sqliteTable('jobs_lease', {
  owner: text('owner').primaryKey(),
  /** The worker's host as its owner names it (its pid namespace after an `@`, where Linux shows one), or null when its writer did not say. */
  host: text('host'),
  /** The worker's process id on that host, or null when its writer did not say. */
  pid: integer('pid'),
  /** Until when (ms) the worker holds the jobs it runs. */
  expiresAt: integer('expires_at').notNull(),
  /** Internal: where the worker's process publishes its runs' live progress (a local socket path), or null. */
  channel: text('channel'),
})

/**
 * One row per recurring schedule. A worker of the queue adds the job of each due slot (its id is
 * `name@slot`, the slot in ISO 8601) in the transaction that moves `next_at` past it.
 */
export const jobsSchedule = sqliteTable(
  'jobs_schedule',
  {
    queue: text('queue').notNull(),
    name: text('name').notNull(),
    /** A cron expression (5 or 6 fields). */
    cron: text('cron').notNull(),
    /** The IANA time zone the expression is read in. */
    tz: text('tz').notNull().default('UTC'),
    /** The value of each job it adds (JSON). */
    value: text('value').notNull().default('null'),
    /** How far back missed slots are added after downtime (ms), or null for the latest missed slot only. */
    backfill: integer('backfill'),
    /** The next slot not yet added (ms). */
    nextAt: integer('next_at').notNull(),
    /** The last slot whose job was added (ms), or null. */
    lastSlot: integer('last_slot'),
    /** When the schedule was last created or changed (ms). */
    updatedAt: integer('updated_at').notNull().default(nowMs),
  },
  (t) => [primaryKey({ columns: [t.queue, t.name] })],
)
