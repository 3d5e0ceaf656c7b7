/**
 * A queue's limits across processes, one value for all (JOB-19): the worker
 * that starts stores its definition's limits in `jobs_queue`, replacing any
 * others (the last started wins, as in a rolling deploy), and every claim
 * reads them there, in its own transaction, whatever the claiming process's
 * definition says. Null stored means no limit. The rate (JOB-22: `rate_limit`,
 * `rate_per` in ms, `rate_per_group`) is stored and replaced the same way.
 */
import { ask, type Executor, type Program } from '../dialect/index.js'
import type { QueueDefinition } from './definition.js'
import { rateOf } from './rate.js'

export interface QueueLimits {
  total: number | null
  perGroup: number | null
}

/** A queue's limits as a warning names them: its concurrency and its rate (JOB-22). */
interface NamedLimits extends QueueLimits {
  rate: QueueDefinition['rate']
}

/**
 * Stores the definition's limits as the queue's, in the caller's transaction. Answers the warning to give
 * once it commits when they replaced other limits that a worker had stored, else null.
 */
export function* storeLimits(db: Executor, queue: QueueDefinition, now: number): Program<string | null> {
  const stored = yield* ask(db.queueGetLimits(queue.name))
  const next: NamedLimits = { ...queue.concurrency, rate: queue.rate }
  const rate = queue.rate
  yield* ask(
    db.queueSetLimits({
      queue: queue.name,
      total: next.total,
      perGroup: next.perGroup,
      now,
      rateLimit: rate?.limit ?? null,
      ratePer: rate?.perMs ?? null,
      ratePerGroup: rate?.perGroup ?? null,
    }),
  )
  if (!stored || stored.setAt === null) return null
  const before: NamedLimits = { total: stored.concurrency, perGroup: stored.perGroup, rate: rateOf(stored) }
  if (describeLimits(before) === describeLimits(next)) return null
  return (
    `drizzle-jobs: queue '${queue.name}' ran with ${describeLimits(before)}, stored by a worker started earlier; ` +
    `this worker's definition replaces it with ${describeLimits(next)}, which every worker of the queue now follows`
  )
}

/** Limits as a definition writes them: `concurrency { total: 4, perGroup: 1 }, rate { limit: 60, per: 60000ms }`, or `no concurrency limit`. */
function describeLimits(limits: NamedLimits): string {
  const parts: string[] = []
  if (limits.total !== null) parts.push(`total: ${limits.total}`)
  if (limits.perGroup !== null) parts.push(`perGroup: ${limits.perGroup}`)
  const concurrency = parts.length === 0 ? 'no concurrency limit' : `concurrency { ${parts.join(', ')} }`
  const rate = limits.rate
  if (rate === null) return concurrency
  return `${concurrency}, rate { limit: ${rate.limit}, per: ${rate.perMs}ms${rate.perGroup === null ? '' : `, perGroup: ${rate.perGroup}`} }`
}
