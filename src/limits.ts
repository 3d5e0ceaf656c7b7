/** Every limit and default of the engine, with its unit in its name. */

/** A queue name, a job id, a group, a step name: 1 to this many bytes of UTF-8. */
export const MAX_NAME_BYTES = 1024
/** A job's value, a step's answer, a handler's result, as JSON text. */
export const MAX_VALUE_BYTES = 1024 * 1024
/** Arrays and objects nested in a value, a step's answer, a result or progress: SQLite's JSON functions read no deeper. */
export const MAX_JSON_DEPTH = 1_000
/** A run's progress, as JSON text: with its run's name, it fits one PostgreSQL notice (under 8,000 bytes). */
export const MAX_PROGRESS_BYTES = 4 * 1024
/** On PostgreSQL, a process sends the progress of its runs at most once per this many ms: each run's latest value since the last send, so at most one notice per run per interval. */
export const PROGRESS_NOTICE_INTERVAL_MS = 50
/** A process that watches no run of another process any more stops listening for progress after this long (a watcher often follows the next attempt at once). */
export const PROGRESS_LISTEN_IDLE_MS = 1_000
/** A kept error message, as UTF-8: a longer one is cut, ending with a marker saying how much was. */
export const MAX_ERROR_BYTES = 64 * 1024
/** A kept stack, as UTF-8, cut as an error message is. */
export const MAX_STACK_BYTES = 64 * 1024
/** `ahead` is counted up to this many jobs. */
export const MAX_AHEAD = 10_000

export const DEFAULT_ATTEMPTS = 10
export const DEFAULT_BACKOFF_INITIAL_MS = 1_000
export const DEFAULT_BACKOFF_MAX_MS = 60 * 60_000
/** The random factor a backoff wait is multiplied by lies in [1 - this, 1 + this]. */
export const BACKOFF_JITTER = 0.1
export const DEFAULT_TIMEOUT_MS = 60_000
export const DEFAULT_MAX_WAITING = 10_000_000
export const DEFAULT_RETENTION_DONE_MS = 24 * 60 * 60_000
export const DEFAULT_RETENTION_FAILED_MS = 7 * 24 * 60 * 60_000
export const DEFAULT_RETENTION_CANCELED_MS = 24 * 60 * 60_000

export const DEFAULT_SLOTS = 10
export const DEFAULT_POLL_INTERVAL_MS = 50
/** The least time between two snapshots of a watch that change only `ahead`. */
export const DEFAULT_AHEAD_INTERVAL_MS = 250
/** The least time between two walks of a queue's line for due `ahead` counts (less when a watch's interval is shorter): counts that fall due close together are made in one walk. */
export const AHEAD_WALK_GAP_MS = 50
export const DEFAULT_LEASE_MS = 30_000
/**
 * The part of a lease kept as a margin for other hosts' clocks: a step's function starts only while its run's lease,
 * just renewed, holds for more than this part of the lease by the worker's own monotonic clock (a third: 10 s of the
 * default 30 s). Other hosts' clocks must agree within it.
 */
export const STEP_LEASE_MARGIN = 1 / 3
/** A worker renews its leases this many times per lease. */
export const LEASE_RENEWALS_PER_LEASE = 3
/** How often a worker takes back expired leases and prunes ended jobs. */
export const MAINTENANCE_INTERVAL_MS = 1_000
/** Ended jobs deleted per pruning transaction. */
export const PRUNE_BATCH_SIZE = 500
/** Expired leases taken back per maintenance transaction. */
export const RESCUE_BATCH_SIZE = 100
/** How long `stop()` lets aborted handlers settle before it releases their leases. */
export const STOP_ABORT_GRACE_MS = 1_000
/** The range of a JavaScript Date, in ms either side of the epoch: a stored time beyond it is no time. */
export const MAX_TIME_MS = 8.64e15
/**
 * The earliest time both databases store, in ms since the epoch: PostgreSQL's timestamptz begins at 4714-11-24 BC
 * (4713 BC in its own notation), 00:00 UTC, where a Date reaches further back. A `runAt` before it is refused on
 * SQLite too, so that a job is good on both databases or on neither.
 */
export const MIN_STORED_TIME_MS = -210_866_803_200_000
/** The largest count PostgreSQL's integer columns hold (attempts, limits, rates): 2^31 - 1. */
export const MAX_STORED_INT = 2 ** 31 - 1
/** The longest duration that is only compared with times (a delay, a backoff, a retention): the span of a Date, about 273,790 years. */
export const MAX_DURATION_MS = MAX_TIME_MS
/** The longest duration a timer waits on directly (a timeout, a lease, a poll interval): about 24.8 days, the most a Node timer can wait. */
export const MAX_TIMER_MS = 2 ** 31 - 1

/** How long to wait before trying a write again after SQLite said busy. */
export const BUSY_RETRY_MS = 5
/**
 * A worker's flush that found SQLite's write lock held tries again after this long (a Node timer's least), for up
 * to LOCK_QUICK_TRIES tries in a row: another worker's flush holds the lock for about a ms. Then every BUSY_RETRY_MS.
 */
export const LOCK_RETRY_MS = 1
export const LOCK_QUICK_TRIES = 8
/** A step's read or write, or a lease renewal, that met a busy database or a lost connection is tried again after this long, doubling each time... */
export const BUSY_BACKOFF_FIRST_MS = 10
/** ...up to this long between tries. */
export const BUSY_BACKOFF_MAX_MS = 1_000
/** After another connection wrote to a SQLite file, a worker's flushes leave a gap for this long... */
export const CONTENDED_SPELL_MS = 1_000
/** ...some times as long as its last flush held the lock (worker/flush.ts gapFactor), and at least this many ms. */
export const CONTENDED_GAP_MS = 2
/**
 * The most jobs a worker claims ahead of its free slots, to start as runs end (worker/flush.ts), by whether its
 * requests cost round trips (Capabilities.roundTrips): a driver that answers in-process (better-sqlite3) flushes
 * in well under a millisecond; one whose requests may cost round trips (PostgreSQL) pays at least one a flush,
 * which larger batches spread (measured: a no-op drain at 1 slot ran 11,600 jobs/s at 128 and 17,700 at 512; on
 * SQLite 512 gained nothing that held across processes).
 */
export const MAX_CLAIM_AHEAD = { inProcess: 128, roundTrips: 512 } as const
/**
 * A start counts against a queue's rate for its window plus this many ms (at most a tenth of the window): room for
 * the time between a claim's write of its starts and its handlers' calls (the commit, the process's event loop),
 * so that the starts handlers see keep the rate too, on a loaded machine as well.
 */
export const RATE_SLACK_MS = 100
/**
 * A worker waiting for its share of a queue's concurrency is counted among the waiters for this long after it said
 * so, or for CLAIM_WAIT_POLLS of its poll intervals when that is longer; it says so again when half of it is left.
 */
export const CLAIM_WAIT_MS = 1_000
export const CLAIM_WAIT_POLLS = 4
/** How long a due job that must run alone may wait while workers are busy before they stop claiming so that one of them frees up for it. */
export const ABANDONED_PATIENCE_MS = 5_000

/** How many jobs `listJobs` answers when no limit is given, and the most it answers. */
export const DEFAULT_LIST_LIMIT = 50
export const MAX_LIST_LIMIT = 1_000
/** Runs after which `drain` gives up on a queue that never empties, unless told otherwise. */
export const DEFAULT_DRAIN_MAX_RUNS = 10_000
/** A stored value shown in `malformed` or in a job's error is cut to this many characters. */
export const SHOWN_CHARS = 100
/** The longest line a progress channel may send: a run's key and at most 4 KiB of progress, with room to spare. */
export const MAX_CHANNEL_LINE_BYTES = 64 * 1024
/** The longest line a progress channel's subscriber may send: a subscription names a run, whose owner is at most a few kB. */
export const MAX_SUBSCRIBER_LINE_BYTES = 16 * 1024

// Schedules (JOB-21).
/** The most slots one pass adds for one schedule after downtime, with `backfill`: the latest ones within it. */
export const MAX_BACKFILL_SLOTS = 1_000
/** Due schedules of one queue that one pass takes in one transaction; more are taken by the next pass, at once. */
export const SCHEDULE_BATCH_SIZE = 100
/** A schedule's name leaves room in a job id (1,024 bytes) for `@` and the slot's 24 characters. */
export const MAX_SCHEDULE_NAME_BYTES = 999
