/**
 * plainjob 0.0.14 under the benchmark, in the configuration of its README
 * and of its own benchmark (bench/run-scenario.ts in its repository):
 * `defineQueue({ connection: better(new Database(file)), logger })`, which
 * itself sets WAL, synchronous = 1 (NORMAL) and busy_timeout = 5000; a
 * logger whose info and debug are silent, as its benchmark does (its default,
 * console, prints a debug line per job); concurrency by several
 * `defineWorker`s on one queue (each runs one job at a time), at the default
 * poll interval (1,000 ms). It has no in-process wake-up. Jobs are added in
 * the app's own Drizzle transaction: `queue.add` is a prepared statement on
 * the same better-sqlite3 connection, so it joins the transaction.
 */
import Database from 'better-sqlite3'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { better, defineQueue, defineWorker, JobStatus, type Logger, type Queue, type Worker } from 'plainjob'
import { appRow, benchMessages, CREATE_APP_TABLE } from '../app.js'
import { spawnTask, type Ctx, type Task } from '../lib/child.js'
import { nowMs } from '../lib/clock.js'
import { copyDb, freshPath } from '../lib/files.js'
import { coordinateWorkers, samplePickups } from '../lib/procs.js'
import type {
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
} from '../lib/tasks.js'

const MODULE = import.meta.filename
const TYPE = 'bench'
const silent: Logger = { error: console.error, warn: console.warn, info: () => {}, debug: () => {} }

function open(file: string): { client: Database.Database; queue: Queue } {
  const client = new Database(file)
  const queue = defineQueue({ connection: better(client), logger: silent })
  return { client, queue }
}

function count(client: Database.Database, sql: string): number {
  return client.prepare(sql).pluck().get() as number
}

const DONE = `select count(*) from plainjob_jobs where status = ${JobStatus.Done}`
const PENDING = `select count(*) from plainjob_jobs where status = ${JobStatus.Pending}`

function addBatches(queue: Queue, total: number, batch: number): void {
  for (let done = 0; done < total; done += batch) {
    queue.addMany(
      TYPE,
      Array.from({ length: Math.min(batch, total - done) }, (_, k) => ({ messageId: done + k })),
    )
  }
}

/**
 * `slots` workers on one queue, until `target` jobs are marked done. The
 * time is taken as the target-th `markJobAsDone` returns (counted by
 * wrapping it): plainjob's loops run on promise continuations alone while
 * there is work, so nothing scheduled by a timer would run before the queue
 * is empty.
 */
async function drain(queue: Queue, target: number, slots: number): Promise<{ elapsedMs: number; done: number }> {
  let done = 0
  let elapsedMs = 0
  let reached!: () => void
  const all = new Promise<void>((resolvePromise) => (reached = resolvePromise))
  const markJobAsDone = queue.markJobAsDone
  const t0 = nowMs()
  queue.markJobAsDone = (id) => {
    const written = markJobAsDone(id)
    if (++done === target) {
      elapsedMs = nowMs() - t0
      reached()
    }
    return written
  }
  const workers: Worker[] = []
  for (let i = 0; i < slots; i++) workers.push(defineWorker(TYPE, async () => {}, { queue, logger: silent }))
  const loops = workers.map((worker) => worker.start())
  await all
  await Promise.all(workers.map((worker) => worker.stop()))
  await Promise.all(loops)
  queue.markJobAsDone = markJobAsDone
  return { elapsedMs, done: target }
}

async function warmDrain(dir: string, warmTemplate: string, slots: number): Promise<void> {
  const { client, queue } = open(copyDb(warmTemplate, dir, 'warm'))
  await drain(queue, count(client, PENDING), slots)
  queue.close()
}

function measureAppTransactions(args: EnqueueAppArgs, withJob: boolean): number {
  const run = (file: string, n: number): { client: Database.Database; queue: Queue; ms: number } => {
    const { client, queue } = open(file)
    client.exec(CREATE_APP_TABLE)
    const db = drizzle(client, { schema: { benchMessages } })
    const t0 = nowMs()
    for (let i = 0; i < n; i++) {
      db.transaction((tx) => {
        const { lastInsertRowid } = tx.insert(benchMessages).values(appRow(i)).run()
        if (withJob) queue.add(TYPE, { messageId: Number(lastInsertRowid) })
      })
    }
    return { client, queue, ms: nowMs() - t0 }
  }
  run(freshPath(args.dir, 'warm'), args.warmup).queue.close()
  const { client, queue, ms } = run(freshPath(args.dir, withJob ? 'app-job' : 'app'), args.count)
  const rows = count(client, 'select count(*) from bench_message')
  const jobs = count(client, 'select count(*) from plainjob_jobs')
  if (rows !== args.count || jobs !== (withJob ? args.count : 0))
    throw new Error(`expected ${args.count} rows and jobs, found ${rows} rows, ${jobs} jobs`)
  queue.close()
  return (args.count / ms) * 1000
}

export const tasks: Record<string, Task> = {
  async info(): Promise<InfoResult> {
    const client = new Database(':memory:')
    const sqlite = client.prepare('select sqlite_version()').pluck().get() as string
    client.close()
    return { name: 'plainjob', version: '0.0.14', sqlite }
  },

  async fill(args: FillArgs): Promise<FillResult> {
    const template = freshPath(args.dir, args.name)
    const { client, queue } = open(template)
    const t0 = nowMs()
    addBatches(queue, args.count, 1000)
    const ms = nowMs() - t0
    client.pragma('wal_checkpoint(TRUNCATE)')
    queue.close()
    return { template, ms }
  },

  async 'enqueue-app'(args: EnqueueAppArgs): Promise<EnqueueAppResult> {
    const order = args.appOnlyFirst ? [false, true] : [true, false]
    const rates = new Map(order.map((withJob) => [withJob, measureAppTransactions(args, withJob)]))
    return { txPerSec: rates.get(true) as number, appOnlyTxPerSec: rates.get(false) as number }
  },

  async 'enqueue-batch'(args: EnqueueBatchArgs): Promise<EnqueueBatchResult> {
    const warm = open(freshPath(args.dir, 'warm'))
    addBatches(warm.queue, args.warmupBatches * args.batch, args.batch)
    warm.queue.close()
    const { client, queue } = open(freshPath(args.dir, 'batch'))
    const t0 = nowMs()
    addBatches(queue, args.count, args.batch)
    const ms = nowMs() - t0
    const jobs = count(client, 'select count(*) from plainjob_jobs')
    if (jobs !== args.count) throw new Error(`expected ${args.count} jobs, found ${jobs}`)
    queue.close()
    return { jobsPerSec: (args.count / ms) * 1000 }
  },

  async process(args: ProcessArgs): Promise<ProcessResult> {
    await warmDrain(args.dir, args.warmTemplate, args.slots)
    const { client, queue } = open(copyDb(args.template, args.dir, 'process'))
    const { elapsedMs, done } = await drain(queue, args.count, args.slots)
    if (done !== args.count || count(client, DONE) !== args.count) throw new Error(`expected ${args.count} jobs done, found ${done}`)
    queue.close()
    return { jobsPerSec: (done / elapsedMs) * 1000, done, elapsedMs, capped: false }
  },

  async processes(args: ProcessesArgs): Promise<ProcessesResult> {
    const file = copyDb(args.template, args.dir, 'processes')
    const client = new Database(file)
    const observe = client.prepare(
      `select exists (select 1 from plainjob_jobs where status in (${JobStatus.Pending}, ${JobStatus.Processing})) as open,
        (select count(*) from plainjob_jobs where status = ${JobStatus.Processing}) as running`,
    )
    const run = await coordinateWorkers({
      module: MODULE,
      procs: args.procs,
      workerArgs: { file, dir: args.dir, warmTemplate: args.warmTemplate, slots: args.slots },
      observe: () => observe.get() as { open: number; running: number },
    })
    const done = count(client, DONE)
    client.close()
    if (done !== args.count) throw new Error(`expected ${args.count} jobs done, found ${done}`)
    return { ...run, jobsPerSec: (done / run.elapsedMs) * 1000, done }
  },

  async 'process-worker'(args: { file: string; dir: string; warmTemplate: string; slots: number }, ctx: Ctx): Promise<{ handled: number }> {
    await warmDrain(args.dir, args.warmTemplate, args.slots)
    const { queue } = open(args.file)
    ctx.send({ type: 'ready' })
    await ctx.receive('go')
    let handled = 0
    const workers: Worker[] = []
    for (let i = 0; i < args.slots; i++) {
      workers.push(
        defineWorker(
          TYPE,
          async () => {
            handled++
          },
          { queue, logger: silent },
        ),
      )
    }
    const loops = workers.map((worker) => worker.start())
    await ctx.receive('stop', 600_000)
    await Promise.all(workers.map((worker) => worker.stop()))
    await Promise.all(loops)
    queue.close()
    return { handled }
  },

  async pickup(args: PickupArgs): Promise<PickupResult> {
    const file = freshPath(args.dir, 'pickup')
    const { queue } = open(file)
    if (args.otherProcess) {
      const child = spawnTask(MODULE, 'pickup-worker', { file })
      await child.receive('ready')
      const result = await samplePickups({
        ...args,
        add: (i) => void queue.add(TYPE, { messageId: i }),
        started: async () => (await child.receive<{ type: string; t: number }>('started')).t,
      })
      child.send({ type: 'stop' })
      await child.result
      queue.close()
      return result
    }
    let onStart: ((t: number) => void) | null = null
    const worker = defineWorker(
      TYPE,
      async () => {
        onStart?.(nowMs())
      },
      { queue, logger: silent },
    )
    const loop = worker.start()
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 200))
    const result = await samplePickups({
      ...args,
      add: (i) => void queue.add(TYPE, { messageId: i }),
      started: () => new Promise<number>((resolvePromise) => (onStart = resolvePromise)),
    })
    await worker.stop()
    await loop
    queue.close()
    return result
  },

  async 'pickup-worker'(args: { file: string }, ctx: Ctx): Promise<object> {
    const { queue } = open(args.file)
    const worker = defineWorker(
      TYPE,
      async () => {
        ctx.send({ type: 'started', t: nowMs() })
      },
      { queue, logger: silent },
    )
    const loop = worker.start()
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 200))
    ctx.send({ type: 'ready' })
    await ctx.receive('stop', 600_000)
    await worker.stop()
    await loop
    queue.close()
    return {}
  },

  async scale(args: ScaleArgs): Promise<ScaleResult> {
    await warmDrain(args.dir, args.warmTemplate, args.slots)
    const { queue } = open(copyDb(args.template, args.dir, 'scale'))
    const { elapsedMs, done } = await drain(queue, args.count, args.slots)
    if (done < args.count) throw new Error(`expected at least ${args.count} done, found ${done}`)
    queue.close()
    return { jobsPerSec: (done / elapsedMs) * 1000, done, elapsedMs, capped: false }
  },
}
