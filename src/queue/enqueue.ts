import { ask, type Executor, type Program } from '../dialect/index.js'
import { andThen, type Answer } from '../dialect/index.js'
import { answer, connectionOf, type AnswerOf, type Database } from '../dialect/open.js'
import { toMs, describe, type Duration } from '../duration.js'
import { JobsError } from '../errors.js'
import { checkName, encodeJson } from '../json.js'
import { MAX_TIME_MS, MAX_VALUE_BYTES, MIN_STORED_TIME_MS } from '../limits.js'
import type { NewJob } from '../dialect/index.js'
import type { Enqueued } from '../types.js'
import { checkQueue, type Queue } from './define.js'
import { noShift, shift, writeShift } from '../engine/counts.js'
import { newJobId } from './job-id.js'
import { jobsChanged, notifyOthers } from '../engine/wake.js'
import { checkKnownOptions } from '../options.js'
import { jobsAdded } from '../telemetry/metrics.js'
import { startSend, type SendSpan } from '../telemetry/trace.js'

/** The options of one added job. */
export interface EnqueueOptions {
  /** The job's id, unique in its queue: 1 to 1,024 bytes. A time-ordered UUID (v7) when absent. An id the queue holds adds nothing (JOB-03). */
  id?: string
  /** The job's group, for `concurrency.perGroup`: 1 to 1,024 bytes. */
  group?: string
  /** Lower runs first. Defaults to 0. */
  priority?: number
  /** Run no sooner than this long from now. */
  delay?: Duration
  /** Run no sooner than this time (a Date or ms since the epoch). */
  runAt?: Date | number
}

/** One job of {@link enqueueMany}: its value and its options. */
export interface EnqueueItem<T> extends EnqueueOptions {
  value: T
}

/**
 * enqueue adds a job to `queue` inside the caller's Drizzle transaction, so
 * it commits with the app's own writes or not at all (JOB-02), and survives
 * any crash once committed (JOB-01). On SQLite it is synchronous: call it
 * inside `db.transaction((tx) => …)` without awaiting. On PostgreSQL it
 * answers a promise: await it inside `db.transaction(async (tx) => …)`.
 * Given a database rather than a transaction, it commits on its own.
 *
 * An id the queue already holds adds nothing and answers `added: false`,
 * whatever that job's state (JOB-03). Workers in this process wake at once.
 *
 * Throws, writing nothing (JOB-13): INVALID_VALUE for a value that is not
 * JSON that round-trips; TOO_LARGE for a value over 1 MiB of JSON or an id or
 * group over 1,024 bytes; INVALID_OPTION for a bad option; QUEUE_FULL when the
 * queue holds `maxWaiting` jobs waiting or scheduled; SCHEMA_MISSING when the
 * tables were not migrated.
 *
 * @example
 * db.transaction((tx) => {
 *   const msg = tx.insert(messages).values({ text }).returning().get()
 *   enqueue(tx, replies, { messageId: msg.id }, { id: `reply:${msg.id}` })
 * })
 * // PostgreSQL
 * await db.transaction(async (tx) => {
 *   const [msg] = await tx.insert(messages).values({ text }).returning()
 *   await enqueue(tx, replies, { messageId: msg.id }, { id: `reply:${msg.id}` })
 * })
 */
export function enqueue<T, D extends Database = Database>(
  tx: D,
  queue: Queue<T>,
  value: NoInfer<T>,
  options?: EnqueueOptions,
): AnswerOf<D, Enqueued>
export function enqueue<T>(tx: Database, queue: Queue<T>, value: NoInfer<T>, options?: EnqueueOptions): Enqueued | Promise<Enqueued> {
  const connection = connectionOf(tx)
  return answer(connection, () => {
    checkQueue(queue)
    const row = jobRow(queue, value, options, Date.now())
    const send = startSend(queue.name, { id: row.id, count: 1 })
    row.traceContext = send.traceContext
    // The row and its count commit together: in the caller's transaction, or in one of their own.
    const add = (db: Executor) => addJob(db, queue, row)
    return sent(
      send,
      () => (connection.inTransaction() ? connection.join(add) : connection.write(add)),
      (added): Enqueued => {
        if (added) {
          jobsChanged(connection.key, queue.name, 'added', [])
          jobsAdded(queue.name, 1)
        }
        return { id: row.id, added }
      },
    )
  })
}

/** Writes an add under its producer span, which ends with the add: written, or refused with its error. */
function sent<T, U>(send: SendSpan, write: () => Answer<T>, next: (value: T) => U): Answer<U> {
  let written: Answer<T>
  try {
    written = write()
  } catch (error) {
    send.end(error)
    throw error
  }
  return andThen(
    written,
    (value) => {
      send.end()
      return next(value)
    },
    (error) => {
      send.end(error)
      throw error
    },
  )
}

/**
 * enqueueMany adds a batch of jobs in a few statements (on SQLite one per 100
 * jobs; on PostgreSQL one per 4 MiB of values), all or none: inside the
 * caller's transaction it uses a savepoint, so a refused batch leaves the
 * transaction as it was. Every item is checked before anything is written.
 * Answers one `{ id, added }` per item, in order.
 *
 * Throws as {@link enqueue} does; QUEUE_FULL when the batch would take the
 * queue past `maxWaiting`.
 */
export function enqueueMany<T, D extends Database = Database>(
  tx: D,
  queue: Queue<T>,
  items: ReadonlyArray<EnqueueItem<NoInfer<T>>>,
): AnswerOf<D, Enqueued[]>
export function enqueueMany<T>(
  tx: Database,
  queue: Queue<T>,
  items: ReadonlyArray<EnqueueItem<NoInfer<T>>>,
): Enqueued[] | Promise<Enqueued[]> {
  const connection = connectionOf(tx)
  return answer(connection, () => {
    checkQueue(queue)
    if (!Array.isArray(items))
      throw new JobsError('INVALID_OPTION', `items: expected an array of { value, ...options }, got ${describe(items)}`)
    const now = Date.now()
    const rows = items.map((item, i) => {
      if (typeof item !== 'object' || item === null)
        throw new JobsError('INVALID_OPTION', `items[${i}]: expected { value, ...options }, got ${describe(item)}`)
      return jobRow(queue, item.value, item, now, i)
    })
    if (rows.length === 0) return []
    const send = startSend(queue.name, { id: rows.length === 1 ? rows[0]!.id : undefined, count: rows.length })
    return sent(
      send,
      () => connection.write((db) => addJobs(db, queue, rows, send.traceContext)),
      (results) => {
        if (results.some((result) => result.added)) jobsChanged(connection.key, queue.name, 'added', [])
        jobsAdded(queue.name, results.filter((result) => result.added).length)
        return results
      },
    )
  })
}

/** Adds one job unless its id is taken; throws QUEUE_FULL, having written nothing, when the queue is full. */
function* addJob(db: Executor, queue: Queue, row: NewJob): Program<boolean> {
  if (yield* ask(db.jobAdd(row))) return true
  if (yield* ask(db.jobExists(queue.name, row.id))) return false
  throw queueFull(queue)
}

/**
 * Adds the jobs whose ids are not taken, one jobInsertMany per chunk of up to {@link BATCH_VALUE_BYTES} of
 * values; throws QUEUE_FULL when they take the queue past its maxWaiting (the caller's savepoint undoes
 * them). Of items that repeat an id, the first is added, as separate adds would.
 */
function* addJobs(db: Executor, queue: Queue, rows: NewJob[], traceContext: string | null): Program<Enqueued[]> {
  const counts = noShift()
  const results: Enqueued[] = []
  for (let from = 0; from < rows.length; ) {
    let to = from
    let bytes = 0
    while (to < rows.length && (to === from || bytes + rows[to]!.value.length <= BATCH_VALUE_BYTES)) bytes += rows[to++]!.value.length
    const chunk = rows.slice(from, to)
    const jobs = chunk.map((row) => [row.id, row.grp, row.value, row.state, row.priority, row.runAt] as const)
    const ids = yield* ask(db.jobInsertMany({ queue: queue.name, maxAttempts: queue.attempts, now: chunk[0]!.now, traceContext, jobs }))
    // As many added as given: each was added, and there is no id to look up.
    const inserted = ids.length === chunk.length ? null : new Set(ids)
    for (const row of chunk) {
      // The first item with an id took it; a repeat of it (in this chunk or an earlier one) added nothing.
      const added = inserted === null || inserted.delete(row.id)
      if (added) shift(counts, null, row.state)
      results.push({ id: row.id, added })
    }
    from = to
  }
  yield* writeShift(db, queue.name, counts)
  if (results.some((result) => result.added)) {
    yield* notifyOthers(db, queue.name, 'added')
    const held = yield* ask(db.queueCountWaiting(queue.name))
    if ((held ?? 0) > queue.maxWaiting) throw queueFull(queue)
  }
  return results
}

function queueFull(queue: Queue): JobsError {
  return new JobsError(
    'QUEUE_FULL',
    `queue '${queue.name}' holds its maxWaiting of ${queue.maxWaiting} jobs waiting or scheduled; nothing was added`,
  )
}

const ENQUEUE_OPTIONS = new Set(['id', 'group', 'priority', 'delay', 'runAt'])

/** The values (in UTF-16 units of their JSON) one jobInsertMany of enqueueMany carries at most: a batch of large values is added in several. */
const BATCH_VALUE_BYTES = 4 * 1024 * 1024

/**
 * Checks one job's value and options and turns them into its row; throws before anything is written. The
 * options are those of enqueue, or item `item` of enqueueMany, which holds its value beside them.
 */
function jobRow(queue: Queue, value: unknown, options: EnqueueOptions | undefined, now: number, item?: number): NewJob {
  const json = encodeJson(value, 'value', MAX_VALUE_BYTES) as string
  // Only a missing options argument means none: null, an array or any other non-object is refused.
  const opts = options === undefined ? {} : options
  if (typeof opts !== 'object' || opts === null || Array.isArray(opts)) {
    throw new JobsError(
      'INVALID_OPTION',
      `${callOf(item)}: options must be an object, got ${opts === null ? 'null' : Array.isArray(opts) ? 'an array' : describe(opts)}`,
    )
  }
  checkKnownOptions(opts, ENQUEUE_OPTIONS, callOf(item), item === undefined ? undefined : 'value')
  const id = opts.id === undefined ? newJobId(now) : checkName(opts.id, 'id')
  const grp = opts.group === undefined ? null : checkName(opts.group, 'group')
  const priority = opts.priority === undefined ? 0 : opts.priority
  if (!Number.isSafeInteger(priority)) throw new JobsError('INVALID_OPTION', `priority: expected a whole number, got ${describe(priority)}`)
  if (opts.delay !== undefined && opts.runAt !== undefined) throw new JobsError('INVALID_OPTION', 'delay and runAt: give one or the other')
  let runAt = now
  if (opts.delay !== undefined) runAt = delayOption(opts.delay, now)
  else if (opts.runAt !== undefined) runAt = timeOption(opts.runAt)
  return {
    queue: queue.name,
    id,
    grp,
    value: json,
    state: runAt > now ? 'scheduled' : 'waiting',
    priority,
    maxAttempts: queue.attempts,
    runAt,
    now,
    maxWaiting: queue.maxWaiting,
    traceContext: null,
  }
}

/** The call an error names: enqueue, or item `item` of enqueueMany. */
function callOf(item: number | undefined): string {
  return item === undefined ? 'enqueue' : `items[${item}]`
}

function timeOption(value: unknown): number {
  const ms = value instanceof Date ? value.getTime() : value
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms > MAX_TIME_MS || ms < MIN_STORED_TIME_MS) {
    throw new JobsError(
      'INVALID_OPTION',
      `runAt: expected a valid Date or ms since the epoch from ${MIN_STORED_TIME_MS} (4714-11-24 BC, the earliest time PostgreSQL stores) to ${MAX_TIME_MS}, got ${describe(value)}`,
    )
  }
  return Math.round(ms)
}

function delayOption(value: unknown, now: number): number {
  const runAt = now + toMs(value, 'delay')
  if (runAt > MAX_TIME_MS)
    throw new JobsError(
      'INVALID_OPTION',
      `delay: ${String(value)} from now is past the latest time a Date holds (${MAX_TIME_MS} ms since the epoch)`,
    )
  return runAt
}
