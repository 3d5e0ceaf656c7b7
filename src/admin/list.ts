/** Reading jobs for operators: a keyset-paginated listing, and one job in full. */
import { answer, connectionOf, runOn, type AnswerOf, type Database } from '../dialect/open.js'
import { describe } from '../duration.js'
import { JobsError } from '../errors.js'
import { lookupText } from '../lookup.js'
import { andThen, ask, type AdminJobRow, type Connection, type Executor, type ListingOrder, type Program } from '../dialect/index.js'
import { STATES, type JobSnapshot, type JobState } from '../types.js'
import { StoredColumns } from '../stored.js'
import { queueNameOf, type QueueRef } from '../queue/ref.js'
import { DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT } from '../limits.js'
import { checkKnownOptions } from '../options.js'
import { traceIdOf } from '../telemetry/trace-id.js'

/** A job's row as the admin API shows it: a snapshot's fields (without the live ones) and the row's own. */
export interface JobRecord extends Omit<JobSnapshot, 'ahead' | 'rateLimitedUntil' | 'progress'> {
  /** The job's place in add order (`jobs_job.seq`). */
  seq: number
  /** The job's value; a value that is not JSON (written by hand) is given as its text. */
  value: unknown
  priority: number
  /** The stack of the error that ended its last failed run, where there was one. */
  errorStack: string | null
}

/**
 * An event of a job (`jobs_event`): sent by `signal` (its payload kept), waited for by a parked run (until its
 * deadline), or whose wait timed out first. A job keeps its events until it is deleted.
 */
export interface JobEvent {
  name: string
  /** Sent, waited for (`waiting`), or `timed_out`; a state another program wrote is given as stored. */
  state: 'waiting' | 'sent' | 'timed_out'
  /** What `signal` sent, once sent; null before. A payload that is not JSON (written by hand) is given as its text. */
  payload: unknown
  /** Until when a waiting run waits for it; null for a wait without a timeout, and once the event was sent. */
  deadline: Date | null
  /** When it took its state: sent, waited for, or timed out. Null only where the stored value is not a time. */
  at: Date | null
}

/** A job with what only its detail shows: its kept steps, its events, and its lease while it runs. */
export interface JobDetail extends JobRecord {
  /** The steps kept so far, in the order they finished (none once the job has ended). */
  steps: { name: string; answer: unknown }[]
  /**
   * Its events (`run.waitForEvent`, `signal`), in the order they took their state (by name within one ms); none for a
   * job that never met one.
   */
  events: JobEvent[]
  /** Who runs it, which attempt, until when (null when the stored expires_at is not a time: see `malformed`); null unless it is running. */
  lease: { owner: string; attempt: number; expiresAt: Date | null } | null
  /**
   * The trace id (32 lowercase hex digits) of the code that added it, from the W3C traceparent stored with it
   * (`jobs_job.trace_context`); null where none is stored, or what is stored is not a valid traceparent.
   */
  traceId: string | null
}

/** What {@link listJobs} selects. Every filter is optional. */
export interface ListJobsOptions {
  queue?: QueueRef
  state?: JobState
  group?: string
  /** Only the job with this id (one per queue at most). */
  id?: string
  /** Jobs per page, 1 to 1,000. Defaults to 50. */
  limit?: number
  /** The `next` of the page before, to get the page after it. */
  cursor?: string
}

/** One page of {@link listJobs}: its jobs, and the cursor of the next page, or null after the last. */
export interface JobPage {
  jobs: JobRecord[]
  next: string | null
}

const LIST_OPTIONS = new Set(['queue', 'state', 'group', 'id', 'limit', 'cursor'])

/** How each listing orders its jobs, and the sort key a cursor carries. */
type Listing = ListingOrder

/**
 * listJobs answers one page of jobs, and a cursor to the next. Pages are
 * cut by keyset, not by offset, over the index that serves the listing, so
 * a page is as fast deep in a million jobs as at the start, and jobs added
 * meanwhile neither shift nor repeat a page.
 *
 * Order, with a queue and a state: waiting jobs in claim order (priority,
 * run_at, seq: the order workers take them, JOB-17); scheduled jobs by the
 * time they run; running jobs newest first; ended jobs most recently ended
 * first. Otherwise newest added first (without a queue, the pages walk
 * every job, which is slower on a large table). A `group` filter is applied
 * on the way. With an `id`, the page holds that job of each queue selected.
 *
 * Throws INVALID_OPTION for an unknown state, a limit out of range or a
 * cursor that is not the `next` of the same listing; SCHEMA_MISSING when the
 * tables were not migrated.
 *
 * @example
 * let cursor: string | undefined
 * do {
 *   const page = listJobs(db, { queue: replies, state: 'failed', cursor })
 *   for (const job of page.jobs) console.log(job.id, job.error)
 *   cursor = page.next ?? undefined
 * } while (cursor)
 */
export function listJobs<D extends Database>(db: D, options?: ListJobsOptions): AnswerOf<D, JobPage>
export function listJobs(db: Database, options: ListJobsOptions = {}): JobPage | Promise<JobPage> {
  const connection = connectionOf(db)
  return answer(connection, () => listWith(connection, options))
}

function listWith(connection: Connection, options: ListJobsOptions): JobPage | Promise<JobPage> {
  if (typeof options !== 'object' || options === null)
    throw new JobsError('INVALID_OPTION', `options: expected an object, got ${describe(options)}`)
  checkKnownOptions(options, LIST_OPTIONS, 'listJobs')
  const queue = options.queue === undefined ? null : queueNameOf(options.queue)
  const state = options.state ?? null
  if (state !== null && !STATES.includes(state)) {
    throw new JobsError('INVALID_OPTION', `state: expected one of ${STATES.join(', ')}, got ${describe(state)}`)
  }
  const grp = options.group === undefined ? null : lookupText(options.group, 'group')
  const limit = options.limit ?? DEFAULT_LIST_LIMIT
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
    throw new JobsError('INVALID_OPTION', `limit: expected a whole number from 1 to ${MAX_LIST_LIMIT}, got ${describe(limit)}`)
  }
  if (options.id !== undefined) return runOn(connection, findById(connection, queue, lookupText(options.id, 'id'), state, grp))

  const listing: Listing =
    queue === null || state === null ? 'newest' : state === 'waiting' || state === 'scheduled' || state === 'running' ? state : 'ended'
  const keys = options.cursor === undefined ? firstKeys(listing) : decodeCursor(options.cursor, listing)
  const params = { queue, state, grp, limit: limit + 1, k1: keys[0], k2: keys[1], k3: keys[2] }
  return andThen(connection.executor.jobList(listing, params), (rows) => {
    const more = rows.length > limit
    const jobs = rows.slice(0, limit).map(toRecord)
    const last = rows[limit - 1]
    return { jobs, next: more && last ? encodeCursor(listing, lastKeys(listing, last)) : null }
  })
}

/**
 * inspectJob answers one job in full: its row (with what a parked run waits
 * for), its kept steps, its events, its lease and the trace id of the code
 * that added it, read in one snapshot; undefined for an id the queue does not
 * hold.
 *
 * Any id a row holds can be inspected, an empty one or one over 1,024 bytes
 * that another program wrote included.
 *
 * Throws INVALID_OPTION or TOO_LARGE for a bad queue name, INVALID_OPTION for
 * an id no row can hold (not a string, U+0000, a lone surrogate),
 * SCHEMA_MISSING when the tables were not migrated.
 *
 * @example
 * const job = inspectJob(db, replies, 'reply:42')
 * if (job?.state === 'failed') console.error(job.errorStack ?? job.error)
 */
export function inspectJob<D extends Database>(db: D, queue: QueueRef, id: string): AnswerOf<D, JobDetail | undefined>
export function inspectJob(db: Database, queue: QueueRef, id: string): JobDetail | undefined | Promise<JobDetail | undefined> {
  const connection = connectionOf(db)
  return answer(connection, () => {
    const name = queueNameOf(queue)
    lookupText(id, 'id')
    return connection.read((db) => readDetail(db, name, id))
  })
}

function* readDetail(db: Executor, name: string, id: string): Program<JobDetail | undefined> {
  const row = yield* ask(db.jobGetRecord(name, id))
  if (!row) return undefined
  const steps = (yield* ask(db.stepList(row.seq))).map((step) => ({
    name: step.name,
    answer: new StoredColumns().json(step.answer, 'answer'),
  }))
  const events = (yield* ask(db.eventList(row.seq))).map((event): JobEvent => {
    const stored = new StoredColumns()
    return {
      name: stored.text(event.name, 'name'),
      state: stored.text(event.state, 'state') as JobEvent['state'],
      payload: stored.json(event.payload, 'payload'),
      deadline: stored.time(event.deadline, 'deadline'),
      at: stored.time(event.at, 'at'),
    }
  })
  const lease = yield* ask(db.leaseGet(row.seq))
  const record = toRecord(row)
  const stored = new StoredColumns()
  const held = lease && {
    owner: stored.text(lease.owner, 'lease.owner'),
    attempt: stored.count(lease.attempt, 'lease.attempt', 1),
    expiresAt: stored.time(lease.expiresAt, 'lease.expires_at'),
  }
  const malformed = record.malformed || stored.malformed ? { ...record.malformed, ...stored.malformed } : null
  return { ...record, steps, events, lease: held ?? null, traceId: traceIdOf(row.traceContext), malformed }
}

function* findById(connection: Connection, queue: string | null, id: string, state: JobState | null, grp: string | null): Program<JobPage> {
  const queues = queue === null ? yield* ask(connection.executor.queueListNames()) : [queue]
  const rows: (AdminJobRow | undefined)[] = []
  for (const name of queues) rows.push(yield* ask(connection.executor.jobGetRecord(name, id)))
  const jobs = rows
    .filter((row): row is AdminJobRow => row !== undefined && (state === null || row.state === state) && (grp === null || row.grp === grp))
    .map(toRecord)
  return { jobs, next: null }
}

/** The row as a record, showing what another program stored as it is (JOB-18). @internal */
export function toRecord(row: AdminJobRow): JobRecord {
  const stored = new StoredColumns()
  const run = {
    seq: row.seq,
    queue: stored.text(row.queue, 'queue'),
    id: stored.text(row.id, 'id'),
    group: stored.optionalText(row.grp, 'grp'),
    value: stored.json(row.value, 'value'),
    state: stored.state(row.state),
    priority: stored.wholeNumber(row.priority, 'priority'),
    ...stored.runFields(row),
  }
  return {
    ...run,
    waitsFor: stored.wait(row.waitsFor, run.runAt),
    errorStack: stored.optionalText(row.errorStack, 'error_stack'),
    result: stored.json(row.result, 'result'),
    malformed: stored.malformed,
  }
}

/** A sort key: a number as the engine writes them, or, stored by another program, a text or a blob (SQLite orders numbers, then texts, then blobs). */
type Key = number | string | Buffer
type Keys = [Key, Key?, Key?]

/**
 * Keys that sort before (or, for descending listings, after) every row. An ended job's finish time sorts
 * before an empty blob whether it is a number or, stored by another program, a text.
 */
function firstKeys(listing: Listing): Keys {
  switch (listing) {
    case 'waiting':
      return [-Infinity, -Infinity, -Infinity]
    case 'scheduled':
      return [-Infinity, -Infinity]
    case 'ended':
      return [Buffer.alloc(0), Infinity]
    default:
      return [Infinity]
  }
}

function lastKeys(listing: Listing, row: AdminJobRow): Keys {
  switch (listing) {
    case 'waiting':
      return [row.priority, row.runAt, row.seq]
    case 'scheduled':
      return [row.runAt, row.seq]
    case 'ended':
      return [row.finishedAt ?? 0, row.seq]
    default:
      return [row.seq]
  }
}

const KEY_COUNT: Record<Listing, number> = { waiting: 3, scheduled: 2, running: 1, ended: 2, newest: 1 }

function encodeCursor(listing: Listing, keys: Keys): string {
  return Buffer.from(JSON.stringify([listing, ...keys.map(encodeKey)])).toString('base64url')
}

/** A key as JSON: what JSON cannot hold (a blob, an infinite number) as a tagged text. */
function encodeKey(key: Key | undefined): unknown {
  if (Buffer.isBuffer(key)) return { blob: key.toString('base64') }
  if (typeof key === 'number' && !Number.isFinite(key)) return { number: String(key) }
  return key
}

function decodeKey(key: unknown): Key | undefined {
  if ((typeof key === 'number' && Number.isFinite(key)) || typeof key === 'string') return key
  if (typeof key !== 'object' || key === null) return undefined
  const { blob, number } = key as { blob?: unknown; number?: unknown }
  if (typeof blob === 'string') return Buffer.from(blob, 'base64')
  if (number === 'Infinity' || number === '-Infinity') return Number(number)
  return undefined
}

function decodeCursor(cursor: unknown, listing: Listing): Keys {
  let parsed: unknown
  try {
    parsed = typeof cursor === 'string' ? JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) : undefined
  } catch {
    parsed = undefined
  }
  if (
    !Array.isArray(parsed) ||
    parsed[0] !== listing ||
    parsed.length !== KEY_COUNT[listing] + 1 ||
    !parsed.slice(1).every((key) => decodeKey(key) !== undefined)
  ) {
    throw new JobsError(
      'INVALID_OPTION',
      'cursor: not the `next` of a page of this same listing (same queue and state); start again without a cursor',
    )
  }
  return parsed.slice(1).map(decodeKey) as Keys
}
