/**
 * drizzle-jobs/testing: helpers for an app's own tests, as Oban.Testing and
 * rivertest are for theirs. Run a queue's jobs inline with `drain`, and
 * check what was added with `assertEnqueued` / `refuteEnqueued`.
 */
export { drain } from './drain.js'
export type { DrainOptions, DrainResult, DrainedRun } from './drain.js'
export { assertEnqueued, refuteEnqueued } from './assert.js'
export type { EnqueuedMatch, PartialValue } from './assert.js'
export { runSchedule } from './schedules.js'
