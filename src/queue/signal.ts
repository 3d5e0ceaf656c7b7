/**
 * Events sent to a job in the app's own transaction (`signal`), for a run that waits for them
 * (`run.waitForEvent`, engine/run.ts).
 */
import { answer, connectionOf, type AnswerOf, type Database } from '../dialect/open.js'
import { andThen, ask, type Executor, type Program } from '../dialect/index.js'
import { JobsError } from '../errors.js'
import { checkName, encodeJson } from '../json.js'
import { MAX_VALUE_BYTES } from '../limits.js'
import { jobsChanged, notifyOthers } from '../engine/wake.js'
import { queueNameOf, type QueueRef } from './ref.js'

/** What {@link signal} did. */
export interface Signalled {
  /**
   * The event was kept for the job: false when the job had ended, or already had an event of that name (sent
   * before, or a wait for it that timed out), which stays as it was.
   */
  sent: boolean
  /** The job's run was parked waiting for this event: it runs again now, in whichever process claims it. */
  woke: boolean
}

/**
 * signal sends the event `name`, with `payload` (JSON of at most 1 MiB), to the job `id` of `queue`, inside the
 * caller's Drizzle transaction: it commits with the app's own writes or not at all, and a transaction that rolls
 * back sends nothing. A run parked in `run.waitForEvent(name)` then runs again at once, in any process, and gets
 * `payload`; an event sent before the run waits is kept, and answered when it does. Each name is sent once: a later
 * signal of a name the job holds, or one whose wait timed out, is refused (`sent: false`). Given a database rather
 * than a transaction, it commits on its own. On SQLite it is synchronous, as `enqueue` is.
 *
 * On PostgreSQL the signal holds the job's row until the transaction ends: the end of a run of that job waits for
 * it, so keep the transaction short.
 *
 * Throws, writing nothing: NOT_FOUND for an id the queue does not hold; INVALID_VALUE or TOO_LARGE for a payload
 * that cannot be kept; INVALID_OPTION or TOO_LARGE for a bad queue name, id or event name; SCHEMA_MISSING when the
 * tables were not migrated.
 *
 * @example
 * db.transaction((tx) => {
 *   tx.update(orders).set({ paid: true }).where(eq(orders.id, orderId)).run()
 *   signal(tx, fulfilment, `order:${orderId}`, 'paid', { at: Date.now() })
 * })
 */
export function signal<D extends Database>(tx: D, queue: QueueRef, id: string, name: string, payload?: unknown): AnswerOf<D, Signalled>
export function signal(tx: Database, queue: QueueRef, id: string, name: string, payload: unknown = null): Signalled | Promise<Signalled> {
  const connection = connectionOf(tx)
  return answer(connection, () => {
    const queueName = queueNameOf(queue)
    checkName(id, 'id')
    checkName(name, 'event name')
    const json = encodeJson(payload, 'payload', MAX_VALUE_BYTES) as string
    const send = (db: Executor) => sendSignal(db, queueName, id, name, json)
    return andThen(connection.inTransaction() ? connection.join(send) : connection.write(send), (signalled) => {
      if (signalled.woke) jobsChanged(connection.key, queueName, 'added', [])
      return signalled
    })
  })
}

function* sendSignal(db: Executor, queue: string, id: string, name: string, payload: string): Program<Signalled> {
  const answered = yield* ask(db.jobSignal({ queue, id, name, payload, now: Date.now() }))
  if (!answered.found) throw new JobsError('NOT_FOUND', `queue '${queue}' holds no job '${id}'`)
  if (answered.woke) yield* notifyOthers(db, queue, 'added')
  return { sent: answered.sent, woke: answered.woke }
}
