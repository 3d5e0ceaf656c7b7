/**
 * Acting on one job: cancel it, or run a failed or canceled one again.
 * Each call is one short write transaction.
 */
import { answer, connectionOf, type AnswerOf, type Database } from '../dialect/open.js'
import { JobsError } from '../errors.js'
import { checkName } from '../json.js'
import { queueNameOf, type QueueRef } from '../queue/ref.js'
import { jobsChanged, notifyOthers } from '../engine/wake.js'
import { andThen, ask, type Executor, type Program } from '../dialect/index.js'

/**
 * cancel ends a job `canceled`. A waiting or scheduled job never runs. A
 * running job loses its lease and its steps in the same transaction: its
 * `run.signal` aborts at once in this process and within the worker's
 * `pollInterval` in any other, and whatever the run does afterwards (a step,
 * its outcome) is refused by the lease fence (JOB-16). No step row outlives
 * the job (JOB-14).
 *
 * Answers true when this call canceled the job, false when it had already
 * ended (`done`, `failed`, `canceled`), which it leaves as it was.
 *
 * Throws NOT_FOUND for an id the queue does not hold, INVALID_OPTION or
 * TOO_LARGE for a bad queue name or id, SCHEMA_MISSING when the tables were
 * not migrated.
 *
 * @example
 * if (!cancel(db, replies, `reply:${messageId}`)) console.log('it had already ended')
 */
export function cancel<D extends Database>(db: D, queue: QueueRef, id: string): AnswerOf<D, boolean>
export function cancel(db: Database, queue: QueueRef, id: string): boolean | Promise<boolean> {
  const connection = connectionOf(db)
  return answer(connection, () => {
    const name = queueNameOf(queue)
    checkName(id, 'id')
    return andThen(
      connection.write((db) => cancelJob(db, name, id, Date.now())),
      (previous) => {
        if (previous === null) return false
        jobsChanged(connection.key, name, previous === 'running' ? 'revoked' : 'ended')
        return true
      },
    )
  })
}

/**
 * retryJob runs a `failed` or `canceled` job again: it becomes `waiting`
 * with fresh attempts (0 counted of its `max_attempts`), due now, with its
 * error, result and finish time cleared and no step of its old runs kept,
 * so every step runs again. Workers in this process wake at once; workers
 * elsewhere find it within their `pollInterval`.
 *
 * Answers true when this call put the job back, false when it is in any
 * other state (waiting, scheduled, running, done), which it leaves as it was.
 * A job with a unique key (JOB-25) would hold it again once waiting: where
 * another job holds that key in a state that holds it, nothing changes and
 * the call throws UNIQUE_KEY_HELD naming that job. A retried job takes no
 * more debounced adds (JOB-26).
 *
 * Throws NOT_FOUND for an id the queue does not hold (a pruned job cannot
 * be retried), UNIQUE_KEY_HELD as above, INVALID_OPTION or TOO_LARGE for a
 * bad queue name or id, SCHEMA_MISSING when the tables were not migrated.
 *
 * @example
 * for (const job of listJobs(db, { queue: replies, state: 'failed' }).jobs) retryJob(db, replies, job.id)
 */
export function retryJob<D extends Database>(db: D, queue: QueueRef, id: string): AnswerOf<D, boolean>
export function retryJob(db: Database, queue: QueueRef, id: string): boolean | Promise<boolean> {
  const connection = connectionOf(db)
  return answer(connection, () => {
    const name = queueNameOf(queue)
    checkName(id, 'id')
    return andThen(
      connection.write((db) => retryEndedJob(db, name, id, Date.now())),
      (retried) => {
        if (retried) jobsChanged(connection.key, name, 'added')
        return retried
      },
    )
  })
}

/** Cancels the job (which clears its worker, so its run's lease is lost), deleting its steps; answers the state it was in, or null when it had ended. */
function* cancelJob(db: Executor, queue: string, id: string, now: number): Program<string | null> {
  const job = yield* ask(db.jobFind(queue, id))
  if (!job) throw notFound(queue, id)
  if (!(yield* ask(db.jobCancel(job.seq, now)))) return null
  yield* ask(db.stepDeleteMany([job.seq]))
  yield* notifyOthers(db, queue, job.state === 'running' ? 'revoked' : 'ended')
  return job.state
}

/** Puts a failed or canceled job back to waiting, deleting its steps; answers whether it did. */
function* retryEndedJob(db: Executor, queue: string, id: string, now: number): Program<boolean> {
  const job = yield* ask(db.jobFind(queue, id))
  if (!job) throw notFound(queue, id)
  const retried = yield* ask(db.jobRetry(job.seq, now))
  if (retried.outcome === 'held') {
    const holder = retried.holder === null ? 'another job, added meanwhile,' : `job '${retried.holder}'`
    throw new JobsError(
      'UNIQUE_KEY_HELD',
      `job '${id}' of queue '${queue}' was not retried: ${holder} holds its unique key, which the job would hold again once waiting; retry it once that job has let the key go (ended in a state its unique.states leave out), or cancel that job first`,
    )
  }
  if (retried.outcome === 'unchanged') return false
  yield* ask(db.stepDeleteMany([job.seq]))
  yield* notifyOthers(db, queue, 'added')
  return true
}

function notFound(queue: string, id: string): JobsError {
  return new JobsError('NOT_FOUND', `queue '${queue}' holds no job with id '${id}' (it may have been pruned)`)
}
