/** Asserting, in a test, that jobs were added (or not), as Oban.Testing's assert_enqueued does. */
import { AssertionError } from 'node:assert'
import { isDeepStrictEqual } from 'node:util'
import { toRecord, type JobRecord } from '../admin/list.js'
import { queueNameOf } from '../queue/ref.js'
import { andThen, type Connection } from '../dialect/index.js'
import { answer, connectionOf, type AnswerOf, type Database } from '../dialect/open.js'
import { describe } from '../duration.js'
import { JobsError } from '../errors.js'
import type { Queue } from '../queue/define.js'
import type { JobState } from '../types.js'

/** A value, with any object in it cut down to the keys that matter. */
export type PartialValue<T> = T extends readonly unknown[]
  ? { [K in keyof T]: PartialValue<T[K]> }
  : T extends object
    ? { [K in keyof T]?: PartialValue<T[K]> }
    : T

/** What a job must have to match. Every field is optional; none matches any job of the queue. */
export interface EnqueuedMatch<T = unknown> {
  /** The job's value holds this: objects match when they have the given keys with matching values; arrays and scalars must be equal. */
  value?: PartialValue<T>
  id?: string
  group?: string | null
  /** The job is in this state, or one of these. Defaults to any state. */
  state?: JobState | readonly JobState[]
}

const MATCH_KEYS = new Set(['value', 'id', 'group', 'state'])

/**
 * assertEnqueued checks that `queue` holds a job that matches, and answers
 * the first one (in add order). It throws an `AssertionError` (from
 * node:assert, which vitest, jest and node:test all report) listing the jobs
 * the queue does hold when none matches.
 *
 * Throws INVALID_OPTION for an unknown key of `match`.
 *
 * @example
 * import { assertEnqueued } from 'drizzle-jobs/testing'
 * await app.request('/messages', { method: 'POST', body: 'hi' })
 * assertEnqueued(db, replies, { value: { messageId: 1 } })
 */
export function assertEnqueued<T, D extends Database = Database>(
  db: D,
  queue: Queue<T> | string,
  match?: EnqueuedMatch<NoInfer<T>>,
): AnswerOf<D, JobRecord>
export function assertEnqueued<T>(
  db: Database,
  queue: Queue<T> | string,
  match: EnqueuedMatch<NoInfer<T>> = {},
): JobRecord | Promise<JobRecord> {
  return findMatching(db, queue, match, assertEnqueued, ({ name, jobs, matching }) => {
    const found = matching[0]
    if (found) return found
    throw new AssertionError({
      message: `expected queue '${name}' to hold a job matching ${JSON.stringify(match)}; it holds ${describeJobs(jobs)}`,
      actual: jobs.map((job) => job.value),
      expected: match.value,
      operator: 'assertEnqueued',
      stackStartFn: assertEnqueued,
    })
  })
}

/**
 * refuteEnqueued checks that `queue` holds no job that matches, and throws an
 * `AssertionError` naming the ones it found otherwise.
 *
 * Throws INVALID_OPTION for an unknown key of `match`.
 *
 * @example
 * refuteEnqueued(db, replies, { value: { messageId: 2 } })
 */
export function refuteEnqueued<T, D extends Database = Database>(
  db: D,
  queue: Queue<T> | string,
  match?: EnqueuedMatch<NoInfer<T>>,
): AnswerOf<D, void>
export function refuteEnqueued<T>(db: Database, queue: Queue<T> | string, match: EnqueuedMatch<NoInfer<T>> = {}): void | Promise<void> {
  return findMatching(db, queue, match, refuteEnqueued, ({ name, matching }) => {
    if (matching.length === 0) return
    throw new AssertionError({
      message: `expected queue '${name}' to hold no job matching ${JSON.stringify(match)}; it holds ${describeJobs(matching)}`,
      actual: matching.map((job) => job.value),
      expected: match.value,
      operator: 'refuteEnqueued',
      stackStartFn: refuteEnqueued,
    })
  })
}

interface Found {
  name: string
  jobs: JobRecord[]
  matching: JobRecord[]
}

/** Reads the queue's jobs and hands `check` those that match; answers what `check` does, at once or as a promise as the database answers. */
function findMatching<U>(
  db: Database,
  queue: Queue | string,
  match: EnqueuedMatch,
  caller: { name: string },
  check: (found: Found) => U,
): U | Promise<U> {
  const connection = connectionOf(db)
  return answer(connection, () => andThen(readMatching(connection, queue, match, caller), check))
}

function readMatching(
  connection: Connection,
  queue: Queue | string,
  match: EnqueuedMatch,
  caller: { name: string },
): Found | Promise<Found> {
  const where = caller.name
  if (typeof match !== 'object' || match === null)
    throw new JobsError('INVALID_OPTION', `${where}: match must be an object, got ${describe(match)}`)
  for (const key of Object.keys(match)) {
    if (!MATCH_KEYS.has(key))
      throw new JobsError('INVALID_OPTION', `${key}: not a field of ${where}'s match (known: ${[...MATCH_KEYS].join(', ')})`)
  }
  const name = queueNameOf(queue)
  return andThen(connection.executor.jobListOfQueue(name), (rows) => matchingOf(name, rows.map(toRecord), match))
}

function matchingOf(name: string, jobs: JobRecord[], match: EnqueuedMatch): Found {
  const states = match.state === undefined ? null : typeof match.state === 'string' ? [match.state] : match.state
  const matching = jobs.filter(
    (job) =>
      (match.id === undefined || job.id === match.id) &&
      (match.group === undefined || job.group === match.group) &&
      (states === null || states.includes(job.state)) &&
      (!('value' in match) || holds(job.value, match.value)),
  )
  return { name, jobs, matching }
}

/** Whether `actual` holds `expected`: plain objects by the keys given, everything else by deep equality. */
function holds(actual: unknown, expected: unknown): boolean {
  if (isPlainObject(expected)) {
    return isPlainObject(actual) && Object.entries(expected).every(([key, value]) => holds(actual[key], value))
  }
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && actual.length === expected.length && expected.every((value, i) => holds(actual[i], value))
  }
  return isDeepStrictEqual(actual, expected)
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function describeJobs(jobs: readonly JobRecord[]): string {
  if (jobs.length === 0) return 'no job'
  const shown = jobs
    .slice(0, 10)
    .map((job) => `\n  ${job.id} (${job.state}${job.group === null ? '' : `, group ${job.group}`}): ${JSON.stringify(job.value)}`)
  return `${jobs.length} job${jobs.length === 1 ? '' : 's'}:${shown.join('')}${jobs.length > 10 ? '\n  …' : ''}`
}
