/** Firing a schedule's next slot in a test, without waiting for it. */
import { andThen } from '../dialect/index.js'
import { answer, connectionOf, type AnswerOf, type Database } from '../dialect/open.js'
import { JobsError } from '../errors.js'
import { checkName } from '../json.js'
import { checkQueue, type Queue } from '../queue/define.js'
import { fireNextSlot } from '../engine/schedules.js'
import { jobsChanged } from '../engine/wake.js'
import type { Enqueued } from '../types.js'

/**
 * runSchedule fires the next slot of the schedule `name` of `queue` now, as
 * a worker's pass does once the slot is due: in one transaction it moves the
 * schedule's next slot past it and adds the slot's job (id `name@slot`),
 * due now, so that `drain` runs it at once. Answers the job's id, and
 * `added: false, matched: 'id'` when that slot's job was there already.
 *
 * Throws NOT_FOUND when the queue has no such schedule, INVALID_OPTION for a
 * bad queue or name.
 *
 * @example
 * schedule(db, digests, 'daily-digest', { cron: '0 8 * * *', value: { kind: 'daily' } })
 * const { id } = runSchedule(db, digests, 'daily-digest')
 * drain(db, digests, sendDigest)
 */
export function runSchedule<D extends Database>(db: D, queue: Queue, name: string): AnswerOf<D, Enqueued>
export function runSchedule(db: Database, queue: Queue, name: string): Enqueued | Promise<Enqueued> {
  const connection = connectionOf(db)
  return answer(connection, () => {
    const definition = checkQueue(queue)
    checkName(name, 'schedule name')
    return andThen(
      connection.write((db) => fireNextSlot(db, definition, name, Date.now())),
      (fired): Enqueued => {
        if (!fired) throw new JobsError('NOT_FOUND', `queue '${definition.name}' has no schedule named '${name}'`)
        if (!fired.added) return { id: fired.id, added: false, matched: 'id' }
        jobsChanged(connection.key, definition.name, 'added', [])
        return { id: fired.id, added: true }
      },
    )
  })
}
