/**
 * drizzle-jobs on PostgreSQL under the benchmark (`npm run bench -- --pg`), imported from ../../src (run by
 * tsx), through drizzle-orm/node-postgres on a pg.Pool of node-postgres's default size (10), tables made by
 * the project's drizzle-kit migrations (drizzle-pg/). Jobs are added inside the app's Drizzle transaction;
 * workers use their defaults except `slots` (and, where the row says so, `listen: false` with
 * `pollInterval: '50ms'`). Everything goes through the public API.
 */
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres'
import { migrate } from 'drizzle-orm/node-postgres/migrator'
import pg from 'pg'
import * as jobsSchema from '../../src/schema/pg.js'
import { configureTelemetry, defineQueue, enqueue, enqueueMany, getJob, work } from '../../src/index.js'
import { PG_MIGRATIONS } from '../../test/helpers/pg-database.js'
import { spawnTask, type Ctx, type Task } from '../lib/child.js'
import { nowMs, sleep } from '../lib/clock.js'
import { coordinateWorkers, samplePickups } from '../lib/procs.js'
import { median, quantile } from '../lib/stats.js'
import { setUpTelemetry, traceEachJob } from '../lib/telemetry.js'
import type { EnqueueAppResult, EnqueueBatchResult, PickupResult, ProcessesResult, ProcessResult, ScaleResult } from '../lib/tasks.js'
import {
  appRow,
  benchMessages,
  connect,
  counter,
  CREATE_APP_TABLE,
  observer,
  alternatingRates,
  QUEUE,
  WARM_QUEUE,
  type PgEnqueueAppArgs,
  type PgEnqueueBatchArgs,
  type PgFillArgs,
  type PgFillResult,
  type PgPickupArgs,
  type PgProcessArgs,
  type PgProcessesArgs,
  type PgScaleArgs,
  type PgSetupArgs,
} from '../pg/lib.js'

const MODULE = import.meta.filename
const schema = { ...jobsSchema, benchMessages }
type Db = NodePgDatabase<typeof schema>

interface Reply {
  messageId: number
}
const queue = defineQueue<Reply>(QUEUE)
const warmQueue = defineQueue<Reply>(WARM_QUEUE)

function open(url: string, max = 10): { pool: pg.Pool; db: Db } {
  const pool = new pg.Pool({ connectionString: url, max })
  pool.on('error', () => {})
  return { pool, db: drizzle(pool, { schema }) }
}

async function addBatches(db: Db, q: typeof queue, total: number, batch: number): Promise<string | undefined> {
  let last: string | undefined
  for (let done = 0; done < total; done += batch) {
    const items = Array.from({ length: Math.min(batch, total - done) }, (_, k) => ({ value: { messageId: done + k } }))
    const added = await enqueueMany(db, q, items)
    last = added[added.length - 1]?.id
  }
  return last
}

/** Runs a worker of `q` until its handler ran `target` times (or `capMs` passed), then stops it; the time includes the stop (the last completions' flush). */
async function drain(
  db: Db,
  q: typeof queue,
  target: number,
  slots: number,
  capMs?: number,
): Promise<{ elapsedMs: number; handled: number }> {
  const t0 = nowMs()
  const count = counter(target, capMs === undefined ? undefined : t0 + capMs)
  const errors: unknown[] = []
  const worker = work(db, q, async () => count.handle(), { slots, onError: (error) => errors.push(error) })
  await count.reached
  await worker.stop()
  const elapsedMs = nowMs() - t0
  if (errors.length > 0) throw errors[0]
  return { elapsedMs, handled: count.handled() }
}

async function countJobs(pool: pg.Pool, where: string): Promise<number> {
  const { rows } = await pool.query(`select count(*)::int as n from jobs_job where ${where}`)
  return (rows[0] as { n: number }).n
}

async function appTransactions(db: Db, n: number, withJob: boolean, from: number): Promise<void> {
  for (let i = from; i < from + n; i++) {
    await db.transaction(async (tx) => {
      const [row] = await tx.insert(benchMessages).values(appRow(i)).returning({ id: benchMessages.id })
      if (withJob) await enqueue(tx, queue, { messageId: (row as { id: number }).id })
    })
  }
}

export const tasks: Record<string, Task> = {
  async setup(args: PgSetupArgs): Promise<object> {
    const { pool, db } = open(args.url)
    await migrate(db, { migrationsFolder: PG_MIGRATIONS })
    await pool.query(CREATE_APP_TABLE)
    // The first add installs the counting triggers (as a writer does); a job of its own queue, removed after.
    await enqueue(db, defineQueue('install'), null)
    await pool.query(`delete from jobs_job where queue = 'install'`)
    await pool.end()
    return {}
  },

  async fill(args: PgFillArgs): Promise<PgFillResult> {
    const { pool, db } = open(args.url)
    const t0 = nowMs()
    await addBatches(db, warmQueue, args.warm, 1000)
    const lastId = await addBatches(db, queue, args.count, 1000)
    const ms = nowMs() - t0
    await pool.end()
    return lastId === undefined ? { ms } : { ms, lastId }
  },

  async 'enqueue-app'(args: PgEnqueueAppArgs): Promise<EnqueueAppResult> {
    const { pool, db } = open(args.url)
    await appTransactions(db, args.warmup, true, 0)
    await appTransactions(db, args.warmup, false, 0)
    const rates = await alternatingRates(args.count, 100, !args.appOnlyFirst, (n, withJob) => appTransactions(db, n, withJob, 0))
    const jobs = await countJobs(pool, `queue = '${QUEUE}'`)
    await pool.end()
    if (jobs !== args.count + args.warmup) throw new Error(`expected ${args.count + args.warmup} jobs, found ${jobs}`)
    return rates
  },

  async 'enqueue-batch'(args: PgEnqueueBatchArgs): Promise<EnqueueBatchResult> {
    const { pool, db } = open(args.url)
    await addBatches(db, warmQueue, args.warmupBatches * args.batch, args.batch)
    const t0 = nowMs()
    await addBatches(db, queue, args.count, args.batch)
    const ms = nowMs() - t0
    const jobs = await countJobs(pool, `queue = '${QUEUE}'`)
    await pool.end()
    if (jobs !== args.count) throw new Error(`expected ${args.count} jobs, found ${jobs}`)
    return { jobsPerSec: (args.count / ms) * 1000 }
  },

  async process(args: PgProcessArgs): Promise<ProcessResult> {
    if (args.telemetry !== undefined) await setUpTelemetry(args.telemetry, configureTelemetry)
    const { pool, db } = open(args.url)
    if (args.telemetry !== undefined) {
      await pool.query(`update jobs_job set trace_context = ${traceEachJob('postgres', args.telemetry)}`)
      await pool.query('vacuum analyze jobs_job')
    }
    await drain(db, warmQueue, await countJobs(pool, `queue = '${WARM_QUEUE}'`), args.slots)
    const { elapsedMs, handled } = await drain(db, queue, args.count, args.slots, args.capMs)
    const done = await countJobs(pool, `queue = '${QUEUE}' and state = 'done'`)
    await pool.end()
    if (done !== handled) throw new Error(`expected ${handled} jobs done, found ${done}`)
    return { jobsPerSec: (done / elapsedMs) * 1000, done, elapsedMs, capped: done < args.count }
  },

  async processes(args: PgProcessesArgs): Promise<ProcessesResult> {
    const client = await connect(args.url)
    const run = await coordinateWorkers({
      module: MODULE,
      procs: args.procs,
      workerArgs: { url: args.url, slots: args.slots },
      observe: observer(
        client,
        `select count(*) filter (where state in ('waiting', 'scheduled', 'running')) as open, count(*) filter (where state = 'running') as running from jobs_job where queue = $1`,
        [QUEUE],
      ),
    })
    const { rows } = await client.query(`select count(*)::int as n from jobs_job where queue = $1 and state = 'done'`, [QUEUE])
    await client.end()
    const done = (rows[0] as { n: number }).n
    if (done !== args.count) throw new Error(`expected ${args.count} jobs done, found ${done}`)
    return { ...run, jobsPerSec: (done / run.elapsedMs) * 1000, done }
  },

  async 'process-worker'(args: { url: string; slots: number }, ctx: Ctx): Promise<{ handled: number }> {
    const { pool, db } = open(args.url)
    // The warm jobs are shared by the processes: each drains what it gets of them within a second.
    await drain(db, warmQueue, Number.POSITIVE_INFINITY, args.slots, 1000)
    ctx.send({ type: 'ready' })
    await ctx.receive('go')
    let handled = 0
    const errors: unknown[] = []
    const worker = work(db, queue, async () => void handled++, { slots: args.slots, onError: (error) => errors.push(error) })
    await ctx.receive('stop', 600_000)
    await worker.stop()
    await pool.end()
    if (errors.length > 0) throw errors[0]
    return { handled }
  },

  async pickup(args: PgPickupArgs): Promise<PickupResult> {
    const { pool, db } = open(args.url)
    const options = args.listen ? {} : { listen: false, pollInterval: '50ms' as const }
    const add = async (i: number): Promise<void> => void (await enqueue(db, queue, { messageId: i }))
    try {
      if (args.otherProcess) {
        const child = spawnTask(MODULE, 'pickup-worker', { url: args.url, listen: args.listen })
        await child.receive('ready')
        const result = await samplePickups({
          ...args,
          add,
          started: async () => (await child.receive<{ type: string; t: number }>('started')).t,
        })
        child.send({ type: 'stop' })
        await child.result
        return result
      }
      let onStart: ((t: number) => void) | null = null
      const worker = work(db, queue, async () => onStart?.(nowMs()), options)
      await sleep(300)
      const result = await samplePickups({
        ...args,
        add,
        started: () => new Promise<number>((resolvePromise) => (onStart = resolvePromise)),
      })
      await worker.stop()
      return result
    } finally {
      await pool.end()
    }
  },

  async 'pickup-worker'(args: { url: string; listen: boolean }, ctx: Ctx): Promise<object> {
    const { pool, db } = open(args.url)
    const options = args.listen ? {} : { listen: false, pollInterval: '50ms' as const }
    const worker = work(db, queue, async () => ctx.send({ type: 'started', t: nowMs() }), options)
    await sleep(300)
    ctx.send({ type: 'ready' })
    await ctx.receive('stop', 600_000)
    await worker.stop()
    await pool.end()
    return {}
  },

  async scale(args: PgScaleArgs): Promise<ScaleResult> {
    const { pool, db } = open(args.url)
    await drain(db, warmQueue, await countJobs(pool, `queue = '${WARM_QUEUE}'`), args.slots)
    const times: number[] = []
    let ahead: number | null = null
    for (let i = 0; i < args.aheadSamples + 5; i++) {
      const t0 = nowMs()
      const job = await getJob(db, queue, args.lastId)
      const ms = nowMs() - t0
      if (job?.state !== 'waiting') throw new Error(`job ${args.lastId} should be waiting, is ${job?.state}`)
      ahead = job.ahead
      if (i >= 5) times.push(ms)
    }
    const { elapsedMs, handled } = await drain(db, queue, args.count, args.slots)
    const done = await countJobs(pool, `queue = '${QUEUE}' and state = 'done'`)
    await pool.end()
    if (done < args.count) throw new Error(`expected ${args.count} jobs done, found ${done}`)
    return {
      jobsPerSec: (handled / elapsedMs) * 1000,
      done,
      elapsedMs,
      capped: false,
      aheadMedianMs: median(times),
      aheadP99Ms: quantile(times, 0.99),
      ...(ahead === null ? {} : { ahead }),
    }
  },
}
