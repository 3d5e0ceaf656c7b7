/** Deleting ended jobs, as an operator asks, beside the pruning workers do by `retention`. */
import { answer, connectionOf, runOn, type AnswerOf, type Database } from '../dialect/open.js'
import { describe } from '../duration.js'
import { JobsError } from '../errors.js'
import { PRUNE_BATCH_SIZE } from '../limits.js'
import { jobsChanged, notifyOthers } from '../engine/wake.js'
import { ask, type Connection } from '../dialect/index.js'
import { ENDED_STATES, type EndedState } from '../types.js'
import { queueNameOf, type QueueRef } from '../queue/ref.js'
import { checkKnownOptions } from '../options.js'

/** What {@link prune} deletes. */
export interface PruneOptions {
  /** Jobs that ended before this time (a Date or ms since the epoch) are deleted. Required. */
  before: Date | number
  /** Only this queue's jobs. Defaults to every queue. */
  queue?: QueueRef
  /** Only jobs ended in these states. Defaults to all three: done, failed, canceled. */
  states?: readonly EndedState[]
}

const PRUNE_OPTIONS = new Set(['before', 'queue', 'states'])

/**
 * prune deletes ended jobs (`done`, `failed`, `canceled`) that ended before
 * `before`, whatever the queues' `retention`, and answers how many it
 * deleted. Waiting, scheduled and running jobs are never touched. It writes
 * in short transactions of 500 jobs, so that workers and the app are never
 * held up behind one long delete; a job added meanwhile is not affected.
 * Workers already prune by `retention` on their own: this is for an operator
 * who wants room now, or a database no worker runs on.
 *
 * Throws INVALID_OPTION for a missing or bad `before`, an unknown state or
 * option; SCHEMA_MISSING when the tables were not migrated.
 *
 * @example
 * prune(db, { before: Date.now() - 24 * 60 * 60_000, states: ['done'] })
 */
export function prune<D extends Database>(db: D, options: PruneOptions): AnswerOf<D, number>
export function prune(db: Database, options: PruneOptions): number | Promise<number> {
  const connection = connectionOf(db)
  return answer(connection, () => pruneWith(connection, options))
}

function pruneWith(connection: Connection, options: PruneOptions): number | Promise<number> {
  if (typeof options !== 'object' || options === null)
    throw new JobsError('INVALID_OPTION', `options: expected { before, queue?, states? }, got ${describe(options)}`)
  checkKnownOptions(options, PRUNE_OPTIONS, 'prune')
  const before = options.before instanceof Date ? options.before.getTime() : options.before
  if (typeof before !== 'number' || !Number.isFinite(before)) {
    throw new JobsError('INVALID_OPTION', `before: expected a valid Date or ms since the epoch, got ${describe(options.before)}`)
  }
  const states = options.states ?? ENDED_STATES
  if (!Array.isArray(states) || states.length === 0 || !states.every((state) => ENDED_STATES.includes(state))) {
    throw new JobsError('INVALID_OPTION', `states: expected a non-empty array of ${ENDED_STATES.join(', ')}, got ${describe(states)}`)
  }
  const named = options.queue === undefined ? null : queueNameOf(options.queue)
  return runOn(
    connection,
    (function* () {
      const queues = named === null ? yield* ask(connection.executor.queueListNames()) : [named]
      let deleted = 0
      for (const queue of queues) {
        let fromQueue = 0
        for (const state of states) {
          // A batch a transaction, so a long prune never holds the write lock for long.
          for (;;) {
            const batch = yield* ask(
              connection.write(function* (db) {
                const deleted = yield* ask(db.jobDeleteEnded({ queue, state, before, limit: PRUNE_BATCH_SIZE }))
                if (deleted > 0) yield* notifyOthers(db, queue, 'other')
                return deleted
              }),
            )
            fromQueue += batch
            if (batch < PRUNE_BATCH_SIZE) break
          }
        }
        if (fromQueue > 0) jobsChanged(connection.key, queue, 'other')
        deleted += fromQueue
      }
      return deleted
    })(),
  )
}
