/**
 * drizzle-jobs: a durable background-job queue for Drizzle ORM, on SQLite and PostgreSQL.
 * The tables are in `drizzle-jobs/schema`, the web dashboard in
 * `drizzle-jobs/dashboard`, so an app that never opens it does not load it.
 */

/** Declaring queues. */
export { defineQueue } from './queue/define.js'
export type { Queue, QueueOptions } from './queue/define.js'

/** Adding jobs inside the app's own transaction. */
export { enqueue, enqueueMany } from './queue/enqueue.js'
export type { DebounceOptions, EnqueueItem, EnqueueOptions } from './queue/enqueue.js'
export type { UniqueOptions } from './queue/unique.js'
export type { EnqueueMatch } from './types.js'

/** Sending events, inside the app's own transaction, to runs that wait for them (`run.waitForEvent`). */
export { signal } from './queue/signal.js'
export type { Signalled } from './queue/signal.js'

/** Running jobs. */
export { work } from './worker/worker.js'
export type { BatchWorkOptions, Handler, HandlerAnswer, HandlerResult, WorkOptions, Worker } from './worker/worker.js'
export type { BatchAnswer, BatchHandler, BatchJob, BatchOptions } from './worker/batch.js'
export type { EventWait, Run } from './engine/run.js'
export type { Outcome } from './engine/outcome.js'

/** Operating queues: cancel or retry a job, pause a queue, count, list and prune (each one short transaction). */
export { cancel, retryJob } from './admin/jobs.js'
export { pauseQueue, resumeQueue, queueCounts } from './admin/queues.js'
export type { QueueCounts } from './admin/queues.js'
export { listJobs, inspectJob } from './admin/list.js'
export type { JobDetail, JobEvent, JobPage, JobRecord, ListJobsOptions } from './admin/list.js'
export { prune } from './admin/prune.js'
export type { PruneOptions } from './admin/prune.js'
export type { QueueRef, ResultOf } from './queue/ref.js'

/** Recurring schedules: any worker of the queue adds the job of each due slot, once (JOB-21). */
export { schedule, unschedule, listSchedules } from './admin/schedules.js'
export type { ScheduleInfo, ScheduleOptions } from './admin/schedules.js'

/** Reading and watching jobs: snapshots with `ahead` and live progress. Server-sent events are in `drizzle-jobs/sse`. */
export { getJob } from './queue/read.js'
export { watch } from './queue/watch.js'
export type { JobWatch, WatchOptions } from './queue/watch.js'

/** Errors, and the shared types. */
/** OpenTelemetry (an optional peer): spans of adds, runs and steps, on the global tracer provider or the app's. */
export { configureTelemetry } from './telemetry/api.js'
export type { MeterProviderLike, TelemetryOptions, TracerProviderLike } from './telemetry/api.js'

export { JobsError, isJobsError } from './errors.js'
export type { JobsErrorCode } from './errors.js'
export type { Duration } from './duration.js'
export type { Enqueued, EndedState, JobSnapshot, JobState, JobWait, Json, JsonShape } from './types.js'
export type { AnswerOf, AsyncSqliteDatabase, Database, PgDatabase, SyncDatabase } from './dialect/open.js'
