/**
 * The measurements every subject (drizzle-jobs, each peer, the floor)
 * implements as tasks, with their arguments and answers. A subject that
 * cannot do what a row asks leaves that task out, and the table says why.
 *
 * BullMQ's tasks get `redisPort` besides: the port of the fresh private
 * Redis server the parent started for that measurement (bench/lib/redis.ts).
 * Its tasks that drain fill the server themselves first, untimed, since it
 * has no file to copy.
 */

/** `fill`: a closed, checkpointed database file holding `count` waiting jobs, copied by the tasks below. */
export interface FillArgs {
  dir: string
  count: number
  name: string
}
export interface FillResult {
  template: string
  ms: number
  /** The id of the last job added, where the subject's jobs have ids to look up. */
  lastId?: string
}

/** `enqueue-app`: `count` transactions, each inserting an app row and adding its job; and the same without the job. */
export interface EnqueueAppArgs {
  dir: string
  count: number
  warmup: number
  /** Measure the app-only transactions first (alternated between runs). */
  appOnlyFirst: boolean
}
export interface EnqueueAppResult {
  txPerSec: number
  appOnlyTxPerSec: number
}

/** `debounce`: bursts of `burst` adds, each in a transaction of its own, debounced into one job, and as plain adds. */
export interface DebounceArgs {
  dir: string
  /** Adds in all, in bursts of `burst` with one debounce id each. */
  count: number
  burst: number
}
export interface DebounceResult {
  /** Debounced adds a second (each merged into its burst's waiting job). */
  debouncedPerSec: number
  /** Plain adds a second, each a job of its own, measured the same way. */
  plainPerSec: number
  /** Jobs the debounced adds left: one per burst. */
  jobs: number
}

/** `enqueue-batch`: `count` jobs added `batch` per transaction through the subject's batch call. */
export interface EnqueueBatchArgs {
  dir: string
  count: number
  batch: number
  warmupBatches: number
}
export interface EnqueueBatchResult {
  jobsPerSec: number
}

/** `process`: drains a copy of `template` (`count` waiting jobs) with a no-op handler. */
export interface ProcessArgs {
  dir: string
  template: string
  warmTemplate: string
  count: number
  slots: number
  /** Stop early after this long (only for subjects whose full drain does not fit the run's time). */
  capMs?: number
  /** The floor's way: 'per-step' (one transaction per claim and per completion) or 'batched' (100 at a time). */
  mode?: 'per-step' | 'batched'
  /**
   * drizzle-jobs only, the telemetry row: each job carries a trace context of its own, and OpenTelemetry is
   * 'absent' (the app has no `@opentelemetry/api`), 'api' (installed, no SDK registered), 'sdk' (the SDK records
   * every run) or 'sampled' (the same SDK, one request in ten sampled at its root: bench/lib/telemetry.ts).
   */
  telemetry?: TelemetryMode
  /** drizzle-jobs only, the batch row: a batch handler of this size (waiting 5 ms to fill), in place of a handler per job. */
  batch?: number
}
export type TelemetryMode = 'absent' | 'api' | 'sdk' | 'sampled'
export interface ProcessResult {
  jobsPerSec: number
  done: number
  elapsedMs: number
  capped: boolean
}

/** `processes`: the same drain by `procs` worker processes on one file. */
export interface ProcessesArgs extends ProcessArgs {
  procs: number
}
export interface ProcessesResult extends ProcessResult {
  /** The most jobs seen in the running state at once, polled every few ms from another connection. */
  maxConcurrent: number
  perProcess: number[]
}

/** `pickup`: from the commit of a job's add to its handler's start, worker idle, at the default poll interval. */
export interface PickupArgs {
  dir: string
  samples: number
  warmup: number
  /** The wait before each add is uniform in [0, gapMaxMs): a random phase against the worker's timers. */
  gapMaxMs: number
  otherProcess: boolean
}
export interface PickupResult {
  medianMs: number
  p99Ms: number
  samples: number
}

/** `scale`: on a copy of a template with 1,000,000 waiting jobs, time `ahead` of the last job, then drain `count`. */
export interface ScaleArgs extends ProcessArgs {
  lastId?: string
  aheadSamples: number
}
export interface ScaleResult extends ProcessResult {
  aheadMedianMs?: number
  aheadP99Ms?: number
  ahead?: number
}

/** `lifecycle` (floor only): add, claim with lease and complete `count` jobs, per step or batched. */
export interface LifecycleArgs {
  dir: string
  count: number
  mode: 'per-step' | 'batched'
}

/**
 * `concurrency`: `count` jobs of a queue limited to `limit` running at once across processes, drained by
 * `procs` worker processes with `slots` each (at least the limit, so that only the limit holds them back),
 * each handler sleeping `handlerMs`. Run side by side with another subject's: the task tells its parent
 * `ready` once its workers are, and starts them on the parent's `go`.
 */
export interface ConcurrencyArgs {
  dir: string
  warmTemplate?: string
  procs: number
  limit: number
  slots: number
  count: number
  handlerMs: number
}
export interface ConcurrencyResult {
  /** From the workers' go until no job is open, seen from the coordinator's own connection. */
  elapsedMs: number
  /** The most handlers running at once, from every handler's start and end on the shared monotonic clock. */
  maxHandlers: number
  /** The most jobs seen in the running state at once, polled every few ms. */
  maxRunning: number
  /** Jobs each process's handler ran. */
  perProcess: number[]
}

/** `watched` (drizzle-jobs): drains of `count` waiting jobs at `slots`, with one `watch()` consumer per job and without. */
export interface WatchedArgs {
  dir: string
  warmTemplate: string
  count: number
  slots: number
  /** Measure the watched drain first (alternated between runs). */
  watchedFirst: boolean
}
export interface WatchedResult {
  unwatchedJobsPerSec: number
  watchedJobsPerSec: number
  /** Snapshots the consumers received, over the jobs (each consumer's first snapshot included). */
  snapshotsPerJob: number
}

/** `info`: what the subject is, and which store it runs on. */
export interface InfoResult {
  name: string
  version: string
  /** The SQLite library's version, for the subjects on SQLite. */
  sqlite?: string
  /** The Redis server's version, for BullMQ. */
  redis?: string
}
