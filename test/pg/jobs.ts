/**
 * What the PostgreSQL executor and connection tests share: jobs as enqueue adds them, and the engine's own
 * requests (the flush, jobEndMany, counting, storeLimits) run in a connection's write transaction, as a
 * worker's flush runs them.
 */
import {
  ask,
  type ClaimedJob,
  type Connection,
  type FlushAnswer,
  type Executor,
  type ExpiredBy,
  type LeaseParams,
  type NewJob,
  type Program,
  type WorkerLease,
} from '../../src/dialect/index.js'
import type { PgConnection } from '../../src/dialect/pg/connection.js'
import { claimPlanner, type ClaimReport, type ClaimRequest } from '../../src/engine/claim.js'
import { counting, writeShift } from '../../src/engine/counts.js'
import type { QueueDefinition } from '../../src/engine/definition.js'
import { storeLimits } from '../../src/engine/queue-limits.js'
import { jobEndMany, type RunEndRecord } from '../../src/engine/record.js'
import type { Transition } from '../../src/engine/outcome.js'

/** A fixed "now", with milliseconds, so that times are seen to round-trip to the millisecond. */
export const NOW = 1_700_000_000_123

/** A job of `queue` as enqueue would add it, waiting and due at NOW unless `fields` say otherwise. */
export function newJob(queue: string, id: string, fields: Partial<NewJob> = {}): NewJob {
  const runAt = fields.runAt ?? NOW
  return {
    queue,
    id,
    grp: null,
    value: JSON.stringify({ id }),
    priority: 0,
    maxAttempts: 3,
    runAt,
    now: NOW,
    state: runAt > NOW ? 'scheduled' : 'waiting',
    maxWaiting: 10_000_000,
    ...fields,
    traceContext: fields.traceContext ?? null,
  }
}

/** Adds jobs in one transaction as enqueueMany does, creating the queue's row; answers their seqs by id. */
export async function addJobs(connection: PgConnection, jobs: NewJob[]): Promise<Map<string, number>> {
  await connection.write(function* (db) {
    for (const job of jobs) yield* ask(db.jobInsert(job))
    for (const queue of new Set(jobs.map((job) => job.queue))) {
      yield* writeShift(db, queue, { waiting: 1, scheduled: 0, running: 0, done: 0, failed: 0, canceled: 0 })
    }
  })
  const seqs = new Map<string, number>()
  for (const job of jobs) {
    const found = await connection.executor.jobFind(job.queue, job.id)
    if (found) seqs.set(job.id, found.seq)
  }
  return seqs
}

/** Where the workers of these tests run, as their rows say: the engine writes its own process's. */
export const WORKER_HOST_AND_PID = { host: 'test-host', pid: 4242 } as const

/** A worker's row as its renewal writes it: held for 30 s from NOW unless `fields` say otherwise. */
export function workerLease(owner: string, fields: Partial<WorkerLease> = {}): WorkerLease {
  return { owner, ...WORKER_HOST_AND_PID, expiresAt: NOW + 30_000, channel: null, ...fields }
}

/** A claim request of `owner` for up to `limit` jobs at `now`, writing the worker's row (workerLease) as a first claim does. */
export function request(owner: string, limit: number, fields: Partial<ClaimRequest> = {}): ClaimRequest {
  return { limit, idle: true, owner, now: NOW, renewLease: workerLease(owner), clock: () => NOW, ...fields }
}

/** Claims as a worker's flush does, with no ends: the driver's flush, in a write transaction of its own. */
export function claim(
  connection: Connection,
  queue: QueueDefinition,
  claimRequest: ClaimRequest,
  report?: ClaimReport,
): Promise<ClaimedJob[]> {
  return flush(connection, queue.name, claimRequest, [], report).then((answer) => answer.claimed)
}

/** A worker's flush of `ends` and of a claim for `claimRequest` (null: ends alone), in a write transaction of its own. */
export function flush(
  connection: Connection,
  queue: string,
  claimRequest: ClaimRequest | null,
  ends: readonly RunEndRecord[] = [],
  report?: ClaimReport,
): Promise<FlushAnswer> {
  const owner = claimRequest?.owner ?? ends[0]?.owner ?? 'nobody'
  const now = claimRequest?.now ?? NOW
  const planner = claimRequest && claimPlanner(queue, claimRequest, report)
  return Promise.resolve(
    connection.write((db) => ask(db.jobFlush({ queue, owner, now, clock: claimRequest?.clock ?? (() => NOW), ends, claim: planner }))),
  )
}

/** Records ends as a worker's flush does; answers, per record, whether it landed. */
export function end(connection: PgConnection, queue: string, records: RunEndRecord[]): Promise<boolean[]> {
  return connection.write((db) => counting(db, queue, (moved) => jobEndMany(db, records, moved)))
}

/** Stores the definition's limits as a worker's first flush does; answers the warning it would give. */
export function store(connection: PgConnection, queue: QueueDefinition, now = NOW): Promise<string | null> {
  return connection.write((db) => storeLimits(db, queue, now))
}

/** A run's end as done, finished at `finishedAt`, with `result` (JSON text). */
export function done(finishedAt = NOW + 1_000, result: string | null = null): Transition {
  return {
    state: 'done',
    runAt: null,
    finishedAt,
    result,
    error: null,
    errorStack: null,
    refund: 0,
    abandoned: 0,
    waitsFor: null,
    signals: null,
  }
}

/** A run's end as a retry, scheduled at `runAt`. */
export function retried(runAt: number, error = 'it threw'): Transition {
  return {
    state: 'scheduled',
    runAt,
    finishedAt: null,
    result: null,
    error,
    errorStack: 'Error: it threw\n    at handler',
    refund: 0,
    abandoned: 0,
    waitsFor: null,
    signals: null,
  }
}

/** One run's end straight through the request (Executor.jobEndMany), in the transaction under way: whether it landed. */
export function* endOne(db: Executor, end: Transition & LeaseParams & ExpiredBy): Program<boolean> {
  const { seq, owner, attempt, expiredBy, ...transition } = end
  return (yield* ask(db.jobEndMany({ owner, expiredBy, ends: [{ transition, seq, attempt }] }))).includes(seq)
}
