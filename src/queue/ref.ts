/**
 * How a queue is named where only its name matters: reading, watching and
 * operating it. The command-line tool and the dashboard hold no
 * definitions, so they name queues as strings.
 */
import { describe } from '../duration.js'
import { JobsError } from '../errors.js'
import { checkName } from '../json.js'
import type { Json } from '../types.js'
import type { Queue } from './define.js'

/** A queue known by its definition, or by its name alone. */
export type QueueRef = Queue | string

/** The type of a queue's results as a snapshot shows them: the definition's `R`, or any JSON for a queue known by name or with no result type. */
export type ResultOf<Q extends QueueRef> = Q extends Queue<unknown, infer R> ? (unknown extends R ? Json : R) : Json

/** The name of a queue reference; throws INVALID_OPTION for anything else. @internal */
export function queueNameOf(queue: QueueRef): string {
  if (typeof queue === 'string') return checkName(queue, 'queue name')
  if (typeof queue === 'object' && queue !== null && typeof queue.name === 'string') return checkName(queue.name, 'queue name')
  throw new JobsError('INVALID_OPTION', `queue: expected a queue from defineQueue or a queue name, got ${describe(queue)}`)
}
