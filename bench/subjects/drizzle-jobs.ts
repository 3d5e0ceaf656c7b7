/**
 * drizzle-jobs under the benchmark, imported from ../../src (run by tsx),
 * on files opened as the README says: WAL, synchronous = NORMAL, the
 * driver's default busy timeout, tables made by the project's drizzle-kit
 * migrations. Jobs are added inside the app's Drizzle transaction, workers
 * use their defaults except `slots`. Everything goes through the public API.
 */
import { resolve } from 'node:path'
import Database from 'better-sqlite3'
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import * as jobsSchema from '../../src/schema/index.js'
import * as api from '../../src/index.js'
import { appRow, benchMessages, CREATE_APP_TABLE } from '../app.js'
import { ROOT, spawnTask, type Ctx, type Task } from '../lib/child.js'
import { nowMs } from '../lib/clock.js'
import { setUpTelemetry, traceEachJob } from '../lib/telemetry.js'
import { copyDb, freshPath } from '../lib/files.js'
import { coordinateWorkers, maxOverlap, parentGate, samplePickups } from '../lib/procs.js'
import { median, quantile } from '../lib/stats.js'
import type {
  ConcurrencyArgs,
  ConcurrencyResult,
  DebounceArgs,
  DebounceResult,
  EnqueueAppArgs,
  EnqueueAppResult,
  EnqueueBatchArgs,
  EnqueueBatchResult,
  FillArgs,
  FillResult,
  InfoResult,
  PickupArgs,
  PickupResult,
  ProcessArgs,
  ProcessesArgs,
  ProcessesResult,
  ProcessResult,
  ScaleArgs,
  ScaleResult,
  WatchedArgs,
  WatchedResult,
} from '../lib/tasks.js'

const { defineQueue, enqueue, enqueueMany, watch, work } = api
const MODULE = import.meta.filename
const MIGRATIONS = resolve(ROOT, 'drizzle')
const schema = { ...jobsSchema, benchMessages }
type Db = BetterSQLite3Database<typeof schema>

interface Reply {
  messageId: number
}
const queue = defineQueue<Reply>('bench')
/** The queue of the concurrency row: at most `limit` of its jobs run at once, across every process. */
const limitedQueue = (limit: number) => defineQueue<Reply>('bench-limited', { concurrency: limit })

/**
 * `getJob` (what `ahead` comes from) lives in src/queue/read.ts; it is taken
 * from the public exports when src/index.ts has it, else from that module.
 */
type GetJob = (db: Db, q: typeof queue, id: string) => { state: string; ahead: number | null } | undefined
const exported = (api as Record<string, unknown>).getJob as GetJob | undefined
const getJob: GetJob = exported ?? ((await import('../../src/queue/read.js')).getJob as unknown as GetJob)
export const GET_JOB_SOURCE = exported ? 'drizzle-jobs (src/index.ts)' : 'src/queue/read.ts (not yet exported from src/index.ts)'

function open(file: string): { client: Database.Database; db: Db } {
  const client = new Database(file)
  client.pragma('journal_mode = WAL')
  client.pragma('synchronous = NORMAL')
  return { client, db: drizzle(client, { schema }) }
}

function create(file: string): { client: Database.Database; db: Db } {
  const opened = open(file)
  migrate(opened.db, { migrationsFolder: MIGRATIONS })
  opened.client.exec(CREATE_APP_TABLE)
  return opened
}

function count(client: Database.Database, sql: string): number {
  return client.prepare(sql).pluck().get() as number
}

/** `n` app transactions as a user writes them: the app's row, and (withJob) its job in the same transaction. */
function appTransactions(db: Db, n: number, withJob: boolean): void {
  for (let i = 0; i < n; i++) {
    db.transaction((tx) => {
      const { lastInsertRowid } = tx.insert(benchMessages).values(appRow(i)).run()
      if (withJob) enqueue(tx, queue, { messageId: Number(lastInsertRowid) })
    })
  }
}

function addBatches(db: Db, total: number, batch: number, from = 0): string | undefined {
  let last: string | undefined
  for (let done = 0; done < total; done += batch) {
    const items = Array.from({ length: Math.min(batch, total - done) }, (_, k) => ({ value: { messageId: from + done + k } }))
    const added = enqueueMany(db, queue, items)
    last = added[added.length - 1]?.id
  }
  return last
}

/**
 * Runs a worker until its handler has run `target` times, then stops it
 * (which records the last ends); with `until`, also waits for that (the
 * watchers' last snapshots) before the time is taken.
 */
async function drain(
  db: Db,
  target: number,
  slots: number,
  until?: () => Promise<unknown>,
  batch?: number,
): Promise<{ elapsedMs: number }> {
  let handled = 0
  let reached!: () => void
  const all = new Promise<void>((resolvePromise) => (reached = resolvePromise))
  const errors: unknown[] = []
  const t0 = nowMs()
  const onError = (error: unknown) => errors.push(error)
  const worker =
    batch === undefined
      ? work(
          db,
          queue,
          async () => {
            if (++handled === target) reached()
          },
          { slots, onError },
        )
      : // A batch handler that answers at once, as the plain drain's handler does: what is measured is the gathering.
        work(
          db,
          queue,
          (jobs) => {
            handled += jobs.length
            if (handled === target) reached()
            return jobs.map(() => null)
          },
          { slots, onError, batch: { size: batch, wait: '5ms' } },
        )
  await all
  await worker.stop()
  if (until) await until()
  const elapsedMs = nowMs() - t0
  if (errors.length > 0) throw errors[0]
  return { elapsedMs }
}

/**
 * One `watch()` consumer per waiting job of the file, as a chat server
 * streams each reply to its page: each has read its first snapshot; `ended`
 * resolves when every consumer has seen its job end.
 */
async function watchEveryJob(client: Database.Database, db: Db): Promise<{ ended: Promise<unknown>; snapshots: () => number }> {
  const ids = client.prepare(`select id from jobs_job where queue = ? and state = 'waiting'`).pluck().all(queue.name) as string[]
  let snapshots = 0
  const watches = ids.map((id) => watch(db, queue, id))
  const firsts = await Promise.all(watches.map((iterator) => iterator.next()))
  snapshots += firsts.length
  const consumers = watches.map(async (iterator) => {
    // The iterator ends after yielding the job's ended state.
    for await (const _ of iterator) snapshots++
  })
  return { ended: Promise.all(consumers), snapshots: () => snapshots }
}

/** A drain of a fresh file holding `jobs` waiting jobs, with one watcher per job or none. */
async function watchedDrain(
  dir: string,
  jobs: number,
  slots: number,
  watched: boolean,
): Promise<{ jobsPerSec: number; snapshots: number }> {
  const file = freshPath(dir, watched ? 'watched' : 'unwatched')
  const made = create(file)
  addBatches(made.db, jobs, 1000)
  made.client.pragma('wal_checkpoint(TRUNCATE)')
  made.client.close()
  const { client, db } = open(file)
  const watchers = watched ? await watchEveryJob(client, db) : undefined
  const { elapsedMs } = await drain(db, jobs, slots, watchers ? () => watchers.ended : undefined)
  const done = count(client, `select count(*) from jobs_job where state = 'done'`)
  client.close()
  if (done !== jobs) throw new Error(`expected ${jobs} jobs done, found ${done}`)
  return { jobsPerSec: (jobs / elapsedMs) * 1000, snapshots: watchers?.snapshots() ?? 0 }
}

async function warmDrain(dir: string, warmTemplate: string, slots: number): Promise<number> {
  const { client, db } = open(copyDb(warmTemplate, dir, 'warm'))
  const waiting = count(client, `select count(*) from jobs_job where state = 'waiting'`)
  await drain(db, waiting, slots)
  client.close()
  return waiting
}

function measureAppTransactions(args: EnqueueAppArgs, withJob: boolean): number {
  const warm = create(freshPath(args.dir, 'warm'))
  appTransactions(warm.db, args.warmup, withJob)
  warm.client.close()
  const { client, db } = create(freshPath(args.dir, withJob ? 'app-job' : 'app'))
  const t0 = nowMs()
  appTransactions(db, args.count, withJob)
  const ms = nowMs() - t0
  const rows = count(client, 'select count(*) from bench_message')
  const jobs = count(client, 'select count(*) from jobs_job')
  if (rows !== args.count || jobs !== (withJob ? args.count : 0))
    throw new Error(`expected ${args.count} rows and jobs, found ${rows} rows, ${jobs} jobs`)
  client.close()
  return (args.count / ms) * 1000
}

export const tasks: Record<string, Task> = {
  async info(): Promise<InfoResult> {
    const client = new Database(':memory:')
    const sqlite = client.prepare('select sqlite_version()').pluck().get() as string
    client.close()
    return { name: 'drizzle-jobs', version: 'src (this checkout, via tsx)', sqlite }
  },

  async fill(args: FillArgs): Promise<FillResult> {
    const template = freshPath(args.dir, args.name)
    const { client, db } = create(template)
    const t0 = nowMs()
    const lastId = addBatches(db, args.count, 1000)
    const ms = nowMs() - t0
    client.pragma('wal_checkpoint(TRUNCATE)')
    client.close()
    return lastId === undefined ? { template, ms } : { template, ms, lastId }
  },

  async 'enqueue-app'(args: EnqueueAppArgs): Promise<EnqueueAppResult> {
    const order = args.appOnlyFirst ? [false, true] : [true, false]
    const rates = new Map(order.map((withJob) => [withJob, measureAppTransactions(args, withJob)]))
    return { txPerSec: rates.get(true) as number, appOnlyTxPerSec: rates.get(false) as number }
  },

  async debounce(args: DebounceArgs): Promise<DebounceResult> {
    const { client, db } = create(freshPath(args.dir, 'debounce'))
    const adds = (debounced: boolean) => {
      const t0 = nowMs()
      for (let i = 0; i < args.count; i++) {
        const burst = Math.floor(i / args.burst)
        db.transaction((tx) =>
          enqueue(tx, queue, { messageId: i }, debounced ? { debounce: { id: `burst-${burst}`, delay: '1h' } } : { delay: '1h' }),
        )
      }
      return (args.count / (nowMs() - t0)) * 1000
    }
    adds(false)
    client.exec('delete from jobs_job')
    const plainPerSec = adds(false)
    client.exec('delete from jobs_job')
    const debouncedPerSec = adds(true)
    const jobs = count(client, 'select count(*) from jobs_job')
    client.close()
    if (jobs !== Math.ceil(args.count / args.burst)) throw new Error(`expected one job per burst, found ${jobs}`)
    return { debouncedPerSec, plainPerSec, jobs }
  },

  async 'enqueue-batch'(args: EnqueueBatchArgs): Promise<EnqueueBatchResult> {
    const warm = create(freshPath(args.dir, 'warm'))
    addBatches(warm.db, args.warmupBatches * args.batch, args.batch)
    warm.client.close()
    const { client, db } = create(freshPath(args.dir, 'batch'))
    const t0 = nowMs()
    addBatches(db, args.count, args.batch)
    const ms = nowMs() - t0
    const jobs = count(client, 'select count(*) from jobs_job')
    if (jobs !== args.count) throw new Error(`expected ${args.count} jobs, found ${jobs}`)
    client.close()
    return { jobsPerSec: (args.count / ms) * 1000 }
  },

  async process(args: ProcessArgs): Promise<ProcessResult> {
    if (args.telemetry !== undefined) await setUpTelemetry(args.telemetry, api.configureTelemetry)
    await warmDrain(args.dir, args.warmTemplate, args.slots)
    const { client, db } = open(copyDb(args.template, args.dir, 'process'))
    if (args.telemetry !== undefined) client.prepare(`update jobs_job set trace_context = ${traceEachJob('sqlite', args.telemetry)}`).run()
    const { elapsedMs } = await drain(db, args.count, args.slots, undefined, args.batch)
    const done = count(client, `select count(*) from jobs_job where state = 'done'`)
    if (done !== args.count) throw new Error(`expected ${args.count} jobs done, found ${done}`)
    client.close()
    return { jobsPerSec: (done / elapsedMs) * 1000, done, elapsedMs, capped: false }
  },

  async processes(args: ProcessesArgs): Promise<ProcessesResult> {
    const file = copyDb(args.template, args.dir, 'processes')
    const { client } = open(file)
    const observe = client.prepare(`select waiting + scheduled + running as open, running from jobs_queue where name = ?`)
    const run = await coordinateWorkers({
      module: MODULE,
      procs: args.procs,
      workerArgs: { file, dir: args.dir, warmTemplate: args.warmTemplate, slots: args.slots },
      observe: () => observe.get(queue.name) as { open: number; running: number },
    })
    const done = count(client, `select count(*) from jobs_job where state = 'done'`)
    client.close()
    if (done !== args.count) throw new Error(`expected ${args.count} jobs done, found ${done}`)
    return { ...run, jobsPerSec: (done / run.elapsedMs) * 1000, done }
  },

  async 'process-worker'(args: { file: string; dir: string; warmTemplate: string; slots: number }, ctx: Ctx): Promise<{ handled: number }> {
    await warmDrain(args.dir, args.warmTemplate, args.slots)
    const { db } = open(args.file)
    ctx.send({ type: 'ready' })
    await ctx.receive('go')
    let handled = 0
    const errors: unknown[] = []
    const worker = work(
      db,
      queue,
      async () => {
        handled++
      },
      { slots: args.slots, onError: (error) => errors.push(error) },
    )
    await ctx.receive('stop', 600_000)
    await worker.stop()
    if (errors.length > 0) throw errors[0]
    return { handled }
  },

  /** The same drain with and without one `watch()` consumer per job, in the order given, after a warm-up of both. */
  async watched(args: WatchedArgs): Promise<WatchedResult> {
    await warmDrain(args.dir, args.warmTemplate, args.slots)
    await watchedDrain(args.dir, Math.min(200, args.count), args.slots, true)
    const order = args.watchedFirst ? [true, false] : [false, true]
    const runs = new Map<boolean, { jobsPerSec: number; snapshots: number }>()
    for (const watched of order) runs.set(watched, await watchedDrain(args.dir, args.count, args.slots, watched))
    const watched = runs.get(true) as { jobsPerSec: number; snapshots: number }
    const unwatched = runs.get(false) as { jobsPerSec: number; snapshots: number }
    return {
      unwatchedJobsPerSec: unwatched.jobsPerSec,
      watchedJobsPerSec: watched.jobsPerSec,
      snapshotsPerJob: watched.snapshots / args.count,
    }
  },

  async concurrency(args: ConcurrencyArgs, ctx: Ctx): Promise<ConcurrencyResult> {
    const limited = limitedQueue(args.limit)
    const file = freshPath(args.dir, 'concurrency')
    const made = create(file)
    enqueueMany(
      made.db,
      limited,
      Array.from({ length: args.count }, (_, i) => ({ value: { messageId: i } })),
    )
    made.client.pragma('wal_checkpoint(TRUNCATE)')
    made.client.close()
    const { client } = open(file)
    const observe = client.prepare(`select waiting + scheduled + running as open, running from jobs_queue where name = ?`)
    const run = await coordinateWorkers<{ handled: number; intervals: Array<[number, number]> }>({
      module: MODULE,
      procs: args.procs,
      task: 'concurrency-worker',
      workerArgs: { file, dir: args.dir, warmTemplate: args.warmTemplate, limit: args.limit, slots: args.slots, handlerMs: args.handlerMs },
      observe: () => observe.get(limited.name) as { open: number; running: number },
      gate: parentGate(ctx),
    })
    const done = count(client, `select count(*) from jobs_job where state = 'done'`)
    client.close()
    if (done !== args.count) throw new Error(`expected ${args.count} jobs done, found ${done}`)
    return {
      elapsedMs: run.elapsedMs,
      maxHandlers: maxOverlap(run.answers.flatMap((answer) => answer.intervals)),
      maxRunning: run.maxConcurrent,
      perProcess: run.perProcess,
    }
  },

  async 'concurrency-worker'(
    args: { file: string; dir: string; warmTemplate: string; limit: number; slots: number; handlerMs: number },
    ctx: Ctx,
  ): Promise<{ handled: number; intervals: Array<[number, number]> }> {
    await warmDrain(args.dir, args.warmTemplate, args.slots)
    const { db } = open(args.file)
    ctx.send({ type: 'ready' })
    await ctx.receive('go')
    const intervals: Array<[number, number]> = []
    const errors: unknown[] = []
    const worker = work(
      db,
      limitedQueue(args.limit),
      async () => {
        const start = nowMs()
        await new Promise((resolvePromise) => setTimeout(resolvePromise, args.handlerMs))
        intervals.push([start, nowMs()])
      },
      { slots: args.slots, onError: (error) => errors.push(error) },
    )
    await ctx.receive('stop', 600_000)
    await worker.stop()
    if (errors.length > 0) throw errors[0]
    return { handled: intervals.length, intervals }
  },

  async pickup(args: PickupArgs): Promise<PickupResult> {
    const file = freshPath(args.dir, 'pickup')
    const { db } = create(file)
    if (args.otherProcess) {
      const child = spawnTask(MODULE, 'pickup-worker', { file })
      await child.receive('ready')
      const result = await samplePickups({
        ...args,
        add: (i) => void enqueue(db, queue, { messageId: i }),
        started: async () => (await child.receive<{ type: string; t: number }>('started')).t,
      })
      child.send({ type: 'stop' })
      await child.result
      return result
    }
    let onStart: ((t: number) => void) | null = null
    const worker = work(db, queue, async () => {
      onStart?.(nowMs())
    })
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 200))
    const result = await samplePickups({
      ...args,
      add: (i) => void enqueue(db, queue, { messageId: i }),
      started: () => new Promise<number>((resolvePromise) => (onStart = resolvePromise)),
    })
    await worker.stop()
    return result
  },

  async 'pickup-worker'(args: { file: string }, ctx: Ctx): Promise<object> {
    const { db } = open(args.file)
    const worker = work(db, queue, async () => {
      ctx.send({ type: 'started', t: nowMs() })
    })
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 200))
    ctx.send({ type: 'ready' })
    await ctx.receive('stop', 600_000)
    await worker.stop()
    return {}
  },

  async scale(args: ScaleArgs): Promise<ScaleResult> {
    await warmDrain(args.dir, args.warmTemplate, args.slots)
    const { client, db } = open(copyDb(args.template, args.dir, 'scale'))
    const id = args.lastId as string
    const times: number[] = []
    let ahead: number | null = null
    for (let i = 0; i < args.aheadSamples + 5; i++) {
      const t0 = nowMs()
      const job = getJob(db, queue, id)
      const ms = nowMs() - t0
      if (job?.state !== 'waiting') throw new Error(`job ${id} should be waiting, is ${job?.state}`)
      ahead = job.ahead
      if (i >= 5) times.push(ms)
    }
    const { elapsedMs } = await drain(db, args.count, args.slots)
    const done = count(client, `select count(*) from jobs_job where state = 'done'`)
    const total = count(client, `select count(*) from jobs_job`)
    const waiting = count(client, `select count(*) from jobs_job where state = 'waiting'`)
    if (done < args.count || done + waiting !== total)
      throw new Error(`expected ${args.count} done and the rest waiting, found ${done} done, ${waiting} waiting of ${total}`)
    client.close()
    return {
      jobsPerSec: (done / elapsedMs) * 1000,
      done,
      elapsedMs,
      capped: false,
      aheadMedianMs: median(times),
      aheadP99Ms: quantile(times, 0.99),
      ...(ahead === null ? {} : { ahead }),
    }
  },
}
