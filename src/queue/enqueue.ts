import { ask, type Executor, type Program } from '../dialect/index.js'
import { andThen, type Answer } from '../dialect/index.js'
import { answer, connectionOf, type AnswerOf, type Database } from '../dialect/open.js'
import { toMs, describe, type Duration } from '../duration.js'
import { JobsError } from '../errors.js'
import { checkName, encodeJson } from '../json.js'
import { MAX_TIME_MS, MAX_VALUE_BYTES, MIN_STORED_TIME_MS } from '../limits.js'
import type { DebouncedJob, JobHolder, NewJob, UniqueJob } from '../dialect/index.js'
import type { Enqueued } from '../types.js'
import { checkQueue, type Queue } from './define.js'
import { uniqueKeyOf, uniqueRule, type UniqueOptions } from './unique.js'
import { noShift, shift, writeShift } from '../engine/counts.js'
import { newJobId } from './job-id.js'
import { jobsChanged, notifyOthers } from '../engine/wake.js'
import { checkKnownOptions } from '../options.js'
import { jobsAdded } from '../telemetry/metrics.js'
import { startSend, type SendSpan } from '../telemetry/trace.js'

/** The options of one added job. `T` is the queue's value type, which `unique.key` reads. */
export interface EnqueueOptions<T = unknown> {
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
  /**
   * Unique windows (JOB-25) for this add, in place of the queue's `unique`; `false` sets the queue's aside. An add
   * whose key a job of the queue holds, in the states that hold it, adds nothing and answers that job's id with
   * `added: false, matched: 'unique'`.
   */
  unique?: UniqueOptions<T> | false
  /**
   * Debounce (JOB-26): while a job of the queue added with the same debounce `id` has not started (it is waiting or
   * scheduled), this add adds nothing: that job takes this add's value and runs `delay` after it, and the add
   * answers its id with `added: false, matched: 'debounce'`. Once that job has started, the add queues a new one.
   * The job's id is generated, and it runs `delay` after the add: not with `id`, `delay`, `runAt` or `unique` (on a
   * queue with `unique`, pass `unique: false`).
   */
  debounce?: DebounceOptions
}

/** `debounce` of an add (JOB-26). */
export interface DebounceOptions {
  /** The debounce id, which the adds that merge share: 1 to 1,024 bytes. */
  id: string
  /** How long after the last add the job runs. */
  delay: Duration
}

/** One job of {@link enqueueMany}: its value and its options. */
export interface EnqueueItem<T> extends EnqueueOptions<T> {
  value: T
}

/** A job checked for its add, and which add it takes: plain, with a unique key, or debounced. */
type JobAdd = { kind: 'plain'; job: NewJob } | { kind: 'unique'; job: UniqueJob } | { kind: 'debounce'; job: DebouncedJob }

/**
 * enqueue adds a job to `queue` inside the caller's Drizzle transaction, so
 * it commits with the app's own writes or not at all (JOB-02), and survives
 * any crash once committed (JOB-01). On SQLite it is synchronous: call it
 * inside `db.transaction((tx) => …)` without awaiting. On PostgreSQL it
 * answers a promise: await it inside `db.transaction(async (tx) => …)`.
 * Given a database rather than a transaction, it commits on its own.
 *
 * An id the queue already holds adds nothing and answers `added: false,
 * matched: 'id'`, whatever that job's state (JOB-03). A unique key held
 * (`unique`, JOB-25) adds nothing and answers the holder's id with `matched:
 * 'unique'`; a debounced add (`debounce`, JOB-26) goes into the job of its
 * debounce id that has not started, answering its id with `matched:
 * 'debounce'`. Workers in this process wake at once.
 *
 * Throws, writing nothing (JOB-13): INVALID_VALUE for a value that is not
 * JSON that round-trips; TOO_LARGE for a value over 1 MiB of JSON or an id or
 * group over 1,024 bytes (and a unique key or debounce id over 1,024 bytes);
 * INVALID_OPTION for a bad option (a unique key that names fields of a value
 * that is not an object, `debounce` with `id`, `delay`, `runAt` or `unique`);
 * QUEUE_FULL when the queue holds `maxWaiting` jobs waiting or scheduled;
 * SCHEMA_MISSING when the tables were not migrated.
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
 * // One digest per user an hour; a burst of edits saved once, 5 s after the last.
 * enqueue(tx, digests, { userId }, { unique: { key: ['userId'], for: '1h' } })
 * enqueue(tx, saves, { docId, text }, { debounce: { id: `doc:${docId}`, delay: '5s' } })
 */
export function enqueue<T, D extends Database = Database>(
  tx: D,
  queue: Queue<T>,
  value: NoInfer<T>,
  options?: EnqueueOptions<NoInfer<T>>,
): AnswerOf<D, Enqueued>
export function enqueue<T>(
  tx: Database,
  queue: Queue<T>,
  value: NoInfer<T>,
  options?: EnqueueOptions<NoInfer<T>>,
): Enqueued | Promise<Enqueued> {
  const connection = connectionOf(tx)
  return answer(connection, () => {
    checkQueue(queue)
    const checked = jobAdd(queue, value, options, Date.now())
    const send = startSend(queue.name, { id: checked.job.id, count: 1 })
    checked.job.traceContext = send.traceContext
    // The row and its count commit together: in the caller's transaction, or in one of their own.
    const add = (db: Executor) => addJob(db, queue, checked)
    return sent(
      send,
      () => (connection.inTransaction() ? connection.join(add) : connection.write(add)),
      (answer): Enqueued => {
        if (answer.added || answer.matched === 'debounce') jobsChanged(connection.key, queue.name, 'added', [])
        if (answer.added) jobsAdded(queue.name, 1)
        return answer
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
 * Answers one `{ id, added }` per item, in order, as {@link enqueue} would:
 * an item whose id, unique key or debounce id an earlier item of the batch
 * took meets that item's job. Items with `unique` or `debounce` are added one
 * statement each.
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
      return jobAdd(queue, item.value, item, now, i)
    })
    if (rows.length === 0) return []
    const send = startSend(queue.name, { id: rows.length === 1 ? rows[0]!.job.id : undefined, count: rows.length })
    return sent(
      send,
      () => connection.write((db) => addJobs(db, queue, rows, send.traceContext)),
      (results) => {
        if (results.some((result) => result.added || result.matched === 'debounce')) jobsChanged(connection.key, queue.name, 'added', [])
        jobsAdded(queue.name, results.filter((result) => result.added).length)
        return results
      },
    )
  })
}

/** Adds one job unless its id is taken (or its unique key held, or its debounce id's job waiting); throws QUEUE_FULL, having written nothing, when the queue is full. */
function* addJob(db: Executor, queue: Queue, add: JobAdd): Program<Enqueued> {
  if (add.kind !== 'plain') return yield* addKeyed(db, queue, add)
  const { job } = add
  if (yield* ask(db.jobAdd(job))) return { id: job.id, added: true }
  if (yield* ask(db.jobExists(queue.name, job.id))) return { id: job.id, added: false, matched: 'id' }
  throw queueFull(queue)
}

/**
 * Adds a job with a unique key or a debounce id, whole, through the unique indexes (jobs_job_unique,
 * jobs_job_debounce), never a read before the insert: answers the job added, or the job its add met. An add that
 * added nothing and met nothing found the queue full, or met a job that left its index (ended, deleted, started)
 * before the add could read it (on PostgreSQL, one committed while the add waited for it): it is tried again.
 */
function* addKeyed(db: Executor, queue: Queue, add: Exclude<JobAdd, { kind: 'plain' }>): Program<Enqueued> {
  const { job } = add
  for (;;) {
    const answer = add.kind === 'unique' ? yield* ask(db.jobAddUnique(add.job)) : yield* ask(db.jobAddDebounced(add.job))
    if (answer.added) return { id: job.id, added: true }
    let holder: JobHolder | null | undefined = answer.holder
    if (holder === null && add.kind === 'unique')
      holder = yield* ask(db.jobGetHolder({ queue: queue.name, id: job.id, uniqueKey: add.job.uniqueKey }))
    if (holder) return { id: holder.id, added: false, matched: holder.matched }
    if (((yield* ask(db.queueCountWaiting(queue.name))) ?? 0) >= job.maxWaiting) throw queueFull(queue)
  }
}

/**
 * Adds the jobs whose ids are not taken, one jobInsertMany per run of plain items of up to
 * {@link BATCH_VALUE_BYTES} of values, and each item with a unique key or a debounce id alone, in order; throws
 * QUEUE_FULL when they take the queue past its maxWaiting (the caller's savepoint undoes them). Of items that repeat
 * an id, the first is added, as separate adds would.
 */
function* addJobs(db: Executor, queue: Queue, adds: JobAdd[], traceContext: string | null): Program<Enqueued[]> {
  const counts = noShift()
  const results: Enqueued[] = []
  for (let from = 0; from < adds.length; ) {
    const first = adds[from]!
    if (first.kind !== 'plain') {
      // The batch is held to maxWaiting once, after its last item.
      const unbounded = { traceContext, maxWaiting: Number.MAX_SAFE_INTEGER }
      results.push(
        yield* addKeyed(
          db,
          queue,
          first.kind === 'unique'
            ? { kind: 'unique', job: { ...first.job, ...unbounded } }
            : { kind: 'debounce', job: { ...first.job, ...unbounded } },
        ),
      )
      from++
      continue
    }
    let to = from
    let bytes = 0
    const chunk: NewJob[] = []
    for (
      let add = adds[to];
      add?.kind === 'plain' && (to === from || bytes + add.job.value.length <= BATCH_VALUE_BYTES);
      add = adds[++to]
    ) {
      bytes += add.job.value.length
      chunk.push(add.job)
    }
    const jobs = chunk.map((row) => [row.id, row.grp, row.value, row.state, row.priority, row.runAt] as const)
    const ids = yield* ask(db.jobInsertMany({ queue: queue.name, maxAttempts: queue.attempts, now: chunk[0]!.now, traceContext, jobs }))
    // As many added as given: each was added, and there is no id to look up.
    const inserted = ids.length === chunk.length ? null : new Set(ids)
    for (const row of chunk) {
      // The first item with an id took it; a repeat of it (in this chunk or an earlier one) added nothing.
      if (inserted === null || inserted.delete(row.id)) {
        shift(counts, null, row.state)
        results.push({ id: row.id, added: true })
      } else results.push({ id: row.id, added: false, matched: 'id' })
    }
    from = to
  }
  yield* writeShift(db, queue.name, counts)
  if (results.some((result) => result.added || result.matched === 'debounce')) {
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

const ENQUEUE_OPTIONS = new Set(['id', 'group', 'priority', 'delay', 'runAt', 'unique', 'debounce'])

/** The values (in UTF-16 units of their JSON) one jobInsertMany of enqueueMany carries at most: a batch of large values is added in several. */
const BATCH_VALUE_BYTES = 4 * 1024 * 1024

/**
 * Checks one job's value and options and turns them into its row and the add it takes; throws before anything is
 * written. The options are those of enqueue, or item `item` of enqueueMany, which holds its value beside them.
 */
function jobAdd(queue: Queue, value: unknown, options: EnqueueOptions<never> | undefined, now: number, item?: number): JobAdd {
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
  const debounceKey = opts.debounce === undefined ? null : debounceOption(queue, opts)
  let runAt = now
  if (debounceKey !== null) runAt = delayOption(opts.debounce!.delay, now, 'debounce.delay')
  else if (opts.delay !== undefined) runAt = delayOption(opts.delay, now, 'delay')
  else if (opts.runAt !== undefined) runAt = timeOption(opts.runAt)
  const job: NewJob = {
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
  if (debounceKey !== null) return { kind: 'debounce', job: { ...job, debounceKey } }
  const unique = opts.unique === undefined ? queue.unique : opts.unique === false ? null : uniqueRule(opts.unique, 'unique')
  if (unique === null) return { kind: 'plain', job }
  return { kind: 'unique', job: { ...job, uniqueKey: uniqueKeyOf(unique, value, runAt), uniqueStates: unique.states } }
}

/** Checks `debounce`, and that the add names nothing it decides (its id, when it runs, a unique key); answers its id. */
function debounceOption(queue: Queue, opts: EnqueueOptions<never>): string {
  const debounce: unknown = opts.debounce
  if (typeof debounce !== 'object' || debounce === null || Array.isArray(debounce))
    throw new JobsError('INVALID_OPTION', `debounce: expected { id, delay }, got ${describe(debounce)}`)
  for (const key of Object.keys(debounce))
    if (key !== 'id' && key !== 'delay') throw new JobsError('INVALID_OPTION', `debounce.${key}: not an option (known: id, delay)`)
  const { id, delay } = debounce as Record<string, unknown>
  if (delay === undefined)
    throw new JobsError(
      'INVALID_OPTION',
      "debounce.delay: required, how long after the last add the job runs (debounce: { id, delay: '5s' })",
    )
  for (const option of ['id', 'delay', 'runAt'] as const)
    if (opts[option] !== undefined)
      throw new JobsError(
        'INVALID_OPTION',
        `debounce and ${option}: a debounced add goes into the job of its debounce id, which keeps its own id and runs debounce.delay after the last add`,
      )
  if (opts.unique !== undefined && opts.unique !== false)
    throw new JobsError(
      'INVALID_OPTION',
      'debounce and unique: give one or the other: a debounced add replaces the value a unique key was made from',
    )
  if (opts.unique === undefined && queue.unique !== null)
    throw new JobsError(
      'INVALID_OPTION',
      `debounce: queue '${queue.name}' has a unique key, which a debounced add would replace the value of; pass unique: false to set it aside for this add`,
    )
  return checkName(id, 'debounce.id')
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

function delayOption(value: unknown, now: number, option: string): number {
  const runAt = now + toMs(value, option)
  if (runAt > MAX_TIME_MS)
    throw new JobsError(
      'INVALID_OPTION',
      `${option}: ${String(value)} from now is past the latest time a Date holds (${MAX_TIME_MS} ms since the epoch)`,
    )
  return runAt
}
