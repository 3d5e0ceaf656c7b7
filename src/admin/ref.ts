/**
 * How the admin API names a queue: by its definition, or by its name alone,
 * as the command-line tool and the dashboard do, which hold no definitions.
 */
import { describe } from '../duration.js'
import { JobsError } from '../errors.js'
import { checkName } from '../json.js'
import type { Queue } from '../queue/define.js'

/** A queue definition, or a queue's name. */
export type QueueRef = Queue | string

export function queueNameOf(queue: QueueRef): string {
  if (typeof queue === 'string') return checkName(queue, 'queue name')
  if (typeof queue === 'object' && queue !== null && typeof queue.name === 'string') return checkName(queue.name, 'queue name')
  throw new JobsError('INVALID_OPTION', `queue: expected a queue from defineQueue or a queue name, got ${describe(queue)}`)
}

export function notFound(queue: string, id: string): JobsError {
  return new JobsError('NOT_FOUND', `queue '${queue}' holds no job with id '${id}' (it may have been pruned)`)
}
