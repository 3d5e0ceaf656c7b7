/**
 * BullMQ 6.7.6 under the benchmark, on ioredis 6.1.0 and a private Redis
 * server per measurement (bench/lib/redis.ts: its append-only file synced
 * every second, no RDB snapshots), set up as its documentation shows: one
 * ioredis connection per process with `maxRetriesPerRequest: null`, shared
 * by the Queue and the Worker (which duplicates it for its blocking pop);
 * `new Worker(name, processor, { connection, concurrency })` with every
 * other option at its default (30 s lock renewed at half, stalled checks
 * every 30 s, no metrics, the events stream capped at 10,000). Completed
 * jobs are kept (`removeOnComplete` off, the default), as drizzle-jobs
 * keeps done jobs until its retention prunes them.
 *
 * Jobs live in Redis, so an add cannot join the app's SQL transaction: the
 * per-transaction rows say n/a. Its batch add is `addBulk`. A drain's
 * waiting jobs are added by the measurement itself before its clock starts
 * (there is no file to copy), except the 1,000,000 of the scale row, which
 * the server loads from a template's append-only file.
 */
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { Queue, Worker, type JobType } from 'bullmq'
import { Redis } from 'ioredis'
import { ROOT, spawnTask, type Ctx, type Task } from '../lib/child.js'
import { nowMs, sleep } from '../lib/clock.js'
import { coordinateWorkers, maxOverlap, parentGate, samplePickups } from '../lib/procs.js'
import type {
  ConcurrencyArgs,
  ConcurrencyResult,
  EnqueueBatchArgs,
  EnqueueBatchResult,
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
const NAME = 'bench'
const LIMITED = 'bench-limited'
const WARM_JOBS = 1_000
/** The states of a job not yet ended: the drain is over when none is left. */
const OPEN_STATES: JobType[] = ['wait', 'active', 'prioritized', 'delayed', 'waiting-children']

interface Reply {
  messageId: number
}

/** What every BullMQ task gets besides its own arguments. */
interface OnRedis {
  redisPort: number
}

function connect(port: number): Redis {
  return new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: null })
}

function version(pkg: string): string {
  return (JSON.parse(readFileSync(resolve(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version
}

/** Adds `total` jobs to `queue` with `addBulk`, `batch` a call. */
async function addBulk(queue: Queue<Reply>, total: number, batch: number, from = 0): Promise<void> {
  for (let done = 0; done < total; done += batch) {
    await queue.addBulk(
      Array.from({ length: Math.min(batch, total - done) }, (_, k) => ({ name: NAME, data: { messageId: from + done + k } })),
    )
  }
}

async function openCount(queue: Queue<Reply>): Promise<{ open: number; running: number }> {
  const counts = await queue.getJobCounts(...OPEN_STATES)
  return { open: OPEN_STATES.reduce((sum, state) => sum + (counts[state] ?? 0), 0), running: counts.active ?? 0 }
}

/**
 * A worker on queue `name` with a no-op processor, until `target` jobs have
 * completed: the time runs from `run()` to the target-th `completed` event,
 * which BullMQ emits once the job is recorded completed in Redis.
 */
async function drain(connection: Redis, name: string, target: number, slots: number): Promise<{ elapsedMs: number }> {
  let done = 0
  let elapsedMs = 0
  const errors: unknown[] = []
  let reached!: () => void
  const all = new Promise<void>((resolvePromise) => (reached = resolvePromise))
  const worker = new Worker<Reply>(name, async () => {}, { connection, concurrency: slots, autorun: false })
  worker.on('error', (error) => errors.push(error))
  worker.on('failed', (_job, error) => errors.push(error))
  await worker.waitUntilReady()
  const t0 = nowMs()
  worker.on('completed', () => {
    if (++done === target) {
      elapsedMs = nowMs() - t0
      reached()
    }
  })
  const running = worker.run()
  await all
  await worker.close()
  await running
  if (errors.length > 0) throw errors[0]
  return { elapsedMs }
}

/** Fills a throwaway queue and drains it at `slots`: the same work on the same server, before the clock starts. */
async function warmDrain(connection: Redis, slots: number): Promise<void> {
  const name = `warm-${process.pid}`
  const warm = new Queue<Reply>(name, { connection })
  await addBulk(warm, WARM_JOBS, 1000)
  await drain(connection, name, WARM_JOBS, slots)
  await warm.close()
}

/** A coordinated run's worker process: says `ready`, runs the worker from `go`, and closes it on `stop`. */
async function runUntilStopped(ctx: Ctx, worker: Worker<Reply>): Promise<void> {
  await worker.waitUntilReady()
  ctx.send({ type: 'ready' })
  await ctx.receive('go')
  const running = worker.run()
  await ctx.receive('stop', 600_000)
  await worker.close()
  await running
}

export const tasks: Record<string, Task> = {
  async info(args: OnRedis): Promise<InfoResult> {
    const connection = connect(args.redisPort)
    const info = await connection.info('server')
    connection.disconnect()
    return {
      name: 'bullmq',
      version: `${version('bullmq')} (ioredis ${version('ioredis')})`,
      redis: /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown',
    }
  },

  /** The scale row's template: `count` waiting jobs, added `addBulk` 1,000 a call. */
  async fill(args: OnRedis & { count: number }): Promise<{ ms: number }> {
    const connection = connect(args.redisPort)
    const queue = new Queue<Reply>(NAME, { connection })
    const t0 = nowMs()
    await addBulk(queue, args.count, 1000)
    const ms = nowMs() - t0
    const waiting = await queue.getJobCountByTypes('wait')
    await queue.close()
    connection.disconnect()
    if (waiting !== args.count) throw new Error(`expected ${args.count} waiting, found ${waiting}`)
    return { ms }
  },

  async 'enqueue-batch'(args: OnRedis & EnqueueBatchArgs): Promise<EnqueueBatchResult> {
    const connection = connect(args.redisPort)
    const warm = new Queue<Reply>(`warm-${process.pid}`, { connection })
    await addBulk(warm, args.warmupBatches * args.batch, args.batch)
    await warm.close()
    const queue = new Queue<Reply>(NAME, { connection })
    await queue.waitUntilReady()
    const t0 = nowMs()
    await addBulk(queue, args.count, args.batch)
    const ms = nowMs() - t0
    const waiting = await queue.getJobCountByTypes('wait')
    await queue.close()
    connection.disconnect()
    if (waiting !== args.count) throw new Error(`expected ${args.count} jobs, found ${waiting}`)
    return { jobsPerSec: (args.count / ms) * 1000 }
  },

  async process(args: OnRedis & ProcessArgs): Promise<ProcessResult> {
    const connection = connect(args.redisPort)
    await warmDrain(connection, args.slots)
    const queue = new Queue<Reply>(NAME, { connection })
    await addBulk(queue, args.count, 1000)
    const { elapsedMs } = await drain(connection, NAME, args.count, args.slots)
    const done = await queue.getJobCountByTypes('completed')
    await queue.close()
    connection.disconnect()
    if (done !== args.count) throw new Error(`expected ${args.count} jobs completed, found ${done}`)
    return { jobsPerSec: (done / elapsedMs) * 1000, done, elapsedMs, capped: false }
  },

  async processes(args: OnRedis & ProcessesArgs): Promise<ProcessesResult> {
    const connection = connect(args.redisPort)
    const queue = new Queue<Reply>(NAME, { connection })
    await addBulk(queue, args.count, 1000)
    const { answers: _, ...run } = await coordinateWorkers({
      module: MODULE,
      procs: args.procs,
      workerArgs: { redisPort: args.redisPort, slots: args.slots },
      observe: () => openCount(queue),
    })
    const done = await queue.getJobCountByTypes('completed')
    await queue.close()
    connection.disconnect()
    if (done !== args.count) throw new Error(`expected ${args.count} jobs completed, found ${done}`)
    return { ...run, jobsPerSec: (done / run.elapsedMs) * 1000, done }
  },

  async 'process-worker'(args: OnRedis & { slots: number }, ctx: Ctx): Promise<{ handled: number }> {
    const connection = connect(args.redisPort)
    await warmDrain(connection, args.slots)
    let handled = 0
    const worker = new Worker<Reply>(
      NAME,
      async () => {
        handled++
      },
      { connection, concurrency: args.slots, autorun: false },
    )
    await runUntilStopped(ctx, worker)
    connection.disconnect()
    return { handled }
  },

  /** The queue's global concurrency (`setGlobalConcurrency`) is BullMQ's limit across every worker and process. */
  async concurrency(args: OnRedis & ConcurrencyArgs, ctx: Ctx): Promise<ConcurrencyResult> {
    const connection = connect(args.redisPort)
    const queue = new Queue<Reply>(LIMITED, { connection })
    await queue.setGlobalConcurrency(args.limit)
    await addBulk(queue, args.count, 1000)
    const run = await coordinateWorkers<{ handled: number; intervals: Array<[number, number]> }>({
      module: MODULE,
      procs: args.procs,
      task: 'concurrency-worker',
      workerArgs: { redisPort: args.redisPort, slots: args.slots, handlerMs: args.handlerMs },
      observe: () => openCount(queue),
      gate: parentGate(ctx),
    })
    const done = await queue.getJobCountByTypes('completed')
    await queue.close()
    connection.disconnect()
    if (done !== args.count) throw new Error(`expected ${args.count} jobs completed, found ${done}`)
    return {
      elapsedMs: run.elapsedMs,
      maxHandlers: maxOverlap(run.answers.flatMap((answer) => answer.intervals)),
      maxRunning: run.maxConcurrent,
      perProcess: run.perProcess,
    }
  },

  async 'concurrency-worker'(
    args: OnRedis & { slots: number; handlerMs: number },
    ctx: Ctx,
  ): Promise<{ handled: number; intervals: Array<[number, number]> }> {
    const connection = connect(args.redisPort)
    await warmDrain(connection, args.slots)
    const intervals: Array<[number, number]> = []
    const worker = new Worker<Reply>(
      LIMITED,
      async () => {
        const start = nowMs()
        await sleep(args.handlerMs)
        intervals.push([start, nowMs()])
      },
      { connection, concurrency: args.slots, autorun: false },
    )
    await runUntilStopped(ctx, worker)
    connection.disconnect()
    return { handled: intervals.length, intervals }
  },

  async pickup(args: OnRedis & PickupArgs): Promise<PickupResult> {
    const connection = connect(args.redisPort)
    const queue = new Queue<Reply>(NAME, { connection })
    await queue.waitUntilReady()
    const add = async (i: number): Promise<void> => void (await queue.add(NAME, { messageId: i }))
    let result: PickupResult
    if (args.otherProcess) {
      const child = spawnTask(MODULE, 'pickup-worker', { redisPort: args.redisPort })
      await child.receive('ready')
      result = await samplePickups({
        ...args,
        add,
        started: async () => (await child.receive<{ type: string; t: number }>('started')).t,
      })
      child.send({ type: 'stop' })
      await child.result
    } else {
      let onStart: ((t: number) => void) | null = null
      const worker = new Worker<Reply>(
        NAME,
        async () => {
          onStart?.(nowMs())
        },
        { connection },
      )
      await worker.waitUntilReady()
      await sleep(200)
      result = await samplePickups({
        ...args,
        add,
        started: () => new Promise<number>((resolvePromise) => (onStart = resolvePromise)),
      })
      await worker.close()
    }
    await queue.close()
    connection.disconnect()
    return result
  },

  async 'pickup-worker'(args: OnRedis, ctx: Ctx): Promise<object> {
    const connection = connect(args.redisPort)
    const worker = new Worker<Reply>(
      NAME,
      async () => {
        ctx.send({ type: 'started', t: nowMs() })
      },
      { connection },
    )
    await worker.waitUntilReady()
    await sleep(200)
    ctx.send({ type: 'ready' })
    await ctx.receive('stop', 600_000)
    await worker.close()
    connection.disconnect()
    return {}
  },

  /** On a server loaded with the template's 1,000,000 waiting jobs: `count` of them drained. */
  async scale(args: OnRedis & ScaleArgs): Promise<ScaleResult> {
    const connection = connect(args.redisPort)
    await warmDrain(connection, args.slots)
    const queue = new Queue<Reply>(NAME, { connection })
    const waiting = await queue.getJobCountByTypes('wait')
    const { elapsedMs } = await drain(connection, NAME, args.count, args.slots)
    const done = await queue.getJobCountByTypes('completed')
    const left = await queue.getJobCountByTypes('wait')
    await queue.close()
    connection.disconnect()
    if (done < args.count || done + left !== waiting)
      throw new Error(`expected ${args.count} completed and the rest waiting, found ${done} completed, ${left} waiting of ${waiting}`)
    return { jobsPerSec: (args.count / elapsedMs) * 1000, done, elapsedMs, capped: false }
  },
}
