/**
 * BullMQ 6.7.6 on its PostgreSQL backend under the PostgreSQL benchmark (`npm run bench -- --pg`), from the
 * root's node_modules (the same package the SQLite benchmark drives on Redis), set up as its typings show:
 * `runMigrations()` on a client of its own into the fresh database, then `Queue` and `Worker` bound to the
 * backend with `withBackend(createPostgresBackend)` and given a `{ connectionString, max }` connection, each
 * owning its pool (and a worker a LISTEN client besides). The worker's pool holds max(10, concurrency + 2)
 * connections, as graphile-worker's does (with node-postgres's default 10 a worker at concurrency 64 waits
 * for connections); every other option is at its default (30 s lock renewed at half, stalled checks
 * every 30 s, completed jobs kept). A worker claims one job a slot: each end is one statement that
 * completes the job and fetches the next.
 *
 * Jobs are added with `addBulk` (one statement a call), on the queue's own pool: an add cannot join the app's
 * transaction, so the per-transaction rows say n/a. A drain's clock runs from the worker's construction (it
 * starts on its own) to the `completed` event of the last job, which BullMQ emits once the job is recorded
 * completed.
 */
import { createPostgresBackend, runMigrations, withBackend } from 'bullmq'
import { spawnTask, type Ctx, type Task } from '../lib/child.js'
import { nowMs, sleep } from '../lib/clock.js'
import { coordinateWorkers, samplePickups } from '../lib/procs.js'
import type { EnqueueBatchResult, PickupResult, ProcessesResult, ProcessResult } from '../lib/tasks.js'
import {
  connect,
  counter,
  CREATE_APP_TABLE,
  observer,
  QUEUE,
  WARM_QUEUE,
  type PgEnqueueBatchArgs,
  type PgFillArgs,
  type PgFillResult,
  type PgPickupArgs,
  type PgProcessArgs,
  type PgProcessesArgs,
  type PgSetupArgs,
} from '../pg/lib.js'

const MODULE = import.meta.filename
const { Queue, Worker } = withBackend(createPostgresBackend)
type Queue<D> = InstanceType<typeof Queue<D>>
type Worker<D> = InstanceType<typeof Worker<D>>
/** The states of a job not yet ended (BullMQ's `job_state` enum on PostgreSQL). */
const OPEN = `state in ('waiting', 'active', 'delayed', 'waiting-children')`

interface Reply {
  messageId: number
}

function openQueue(url: string, name: string): Queue<Reply> {
  return new Queue<Reply>(name, { connection: { connectionString: url } })
}

/** A worker of `name` with the row's concurrency and a no-op processor (or `handle`); it starts at once. */
function startWorker(url: string, name: string, slots: number, handle: () => void = () => {}): Worker<Reply> {
  return new Worker<Reply>(name, async () => handle(), {
    connection: { connectionString: url, max: Math.max(10, slots + 2) },
    concurrency: slots,
  })
}

/** Adds `total` jobs to `queue` with `addBulk`, `batch` a call. */
async function addBulk(queue: Queue<Reply>, total: number, batch: number): Promise<void> {
  for (let done = 0; done < total; done += batch) {
    await queue.addBulk(
      Array.from({ length: Math.min(batch, total - done) }, (_, k) => ({ name: queue.name, data: { messageId: done + k } })),
    )
  }
}

async function count(url: string, name: string, where: string): Promise<number> {
  const client = await connect(url)
  try {
    const { rows } = await client.query(`select count(*)::int as n from bullmq.job where queue = $1 and ${where}`, [name])
    return (rows[0] as { n: number }).n
  } finally {
    await client.end()
  }
}

/** Runs a worker of `name` until `target` jobs completed (or `capMs` passed), then closes it. */
async function drain(
  url: string,
  name: string,
  target: number,
  slots: number,
  capMs?: number,
): Promise<{ elapsedMs: number; handled: number }> {
  const t0 = nowMs()
  const counted = counter(target, capMs === undefined ? undefined : t0 + capMs)
  const errors: unknown[] = []
  const worker = startWorker(url, name, slots)
  worker.on('error', (error) => errors.push(error))
  worker.on('failed', (_job, error) => errors.push(error))
  worker.on('completed', () => counted.handle())
  await counted.reached
  const elapsedMs = nowMs() - t0
  const handled = counted.handled()
  await worker.close()
  if (errors.length > 0) throw errors[0]
  return { elapsedMs, handled }
}

export const tasks: Record<string, Task> = {
  async setup(args: PgSetupArgs): Promise<object> {
    const client = await connect(args.url)
    await runMigrations(client)
    await client.query(CREATE_APP_TABLE)
    await client.end()
    return {}
  },

  async fill(args: PgFillArgs): Promise<PgFillResult> {
    const warm = openQueue(args.url, WARM_QUEUE)
    const queue = openQueue(args.url, QUEUE)
    const t0 = nowMs()
    await addBulk(warm, args.warm, 1000)
    await addBulk(queue, args.count, 1000)
    const ms = nowMs() - t0
    await warm.close()
    await queue.close()
    const waiting = await count(args.url, QUEUE, `state = 'waiting'`)
    if (waiting !== args.count) throw new Error(`expected ${args.count} waiting, found ${waiting}`)
    return { ms }
  },

  async 'enqueue-batch'(args: PgEnqueueBatchArgs): Promise<EnqueueBatchResult> {
    const warm = openQueue(args.url, WARM_QUEUE)
    await addBulk(warm, args.warmupBatches * args.batch, args.batch)
    await warm.close()
    const queue = openQueue(args.url, QUEUE)
    await queue.waitUntilReady()
    const t0 = nowMs()
    await addBulk(queue, args.count, args.batch)
    const ms = nowMs() - t0
    await queue.close()
    const jobs = await count(args.url, QUEUE, 'true')
    if (jobs !== args.count) throw new Error(`expected ${args.count} jobs, found ${jobs}`)
    return { jobsPerSec: (args.count / ms) * 1000 }
  },

  async process(args: PgProcessArgs): Promise<ProcessResult> {
    await drain(args.url, WARM_QUEUE, await count(args.url, WARM_QUEUE, OPEN), args.slots)
    const { elapsedMs, handled } = await drain(args.url, QUEUE, args.count, args.slots, args.capMs)
    const done = await count(args.url, QUEUE, `state = 'completed'`)
    const left = await count(args.url, QUEUE, OPEN)
    // Closing a capped worker lets the jobs it holds complete: they are done, but after the clock stopped.
    if (done < handled || done + left !== args.count)
      throw new Error(`expected ${handled} or more completed and the rest open, found ${done} completed, ${left} open`)
    return { jobsPerSec: (handled / elapsedMs) * 1000, done: handled, elapsedMs, capped: handled < args.count }
  },

  async processes(args: PgProcessesArgs): Promise<ProcessesResult> {
    const client = await connect(args.url)
    const run = await coordinateWorkers({
      module: MODULE,
      procs: args.procs,
      workerArgs: { url: args.url, slots: args.slots },
      observe: observer(
        client,
        `select count(*) filter (where ${OPEN}) as open, count(*) filter (where state = 'active') as running from bullmq.job where queue = $1`,
        [QUEUE],
      ),
      ...(args.capMs === undefined ? {} : { capMs: args.capMs }),
    })
    await client.end()
    const completed = await count(args.url, QUEUE, `state = 'completed'`)
    const done = run.perProcess.reduce((a, b) => a + b, 0)
    if (run.capped ? completed < done : completed !== args.count || done !== args.count)
      throw new Error(`expected ${args.count} jobs completed, found ${completed} (${done} counted by the workers)`)
    return { ...run, jobsPerSec: (done / run.elapsedMs) * 1000, done }
  },

  async 'process-worker'(args: { url: string; slots: number }, ctx: Ctx): Promise<{ handled: number }> {
    // The warm jobs are shared by the processes: each drains what it gets of them within a second.
    await drain(args.url, WARM_QUEUE, Number.POSITIVE_INFINITY, args.slots, 1000)
    ctx.send({ type: 'ready' })
    const { deadline } = await ctx.receive<{ type: string; deadline: number | null }>('go')
    let handled = 0
    const worker = startWorker(args.url, QUEUE, args.slots)
    // Completions after a cap's deadline are not counted: the coordinator's clock stopped there.
    worker.on('completed', () => {
      if (deadline === null || nowMs() <= deadline) handled++
    })
    await ctx.receive('stop', 600_000)
    await worker.close()
    return { handled }
  },

  async pickup(args: PgPickupArgs): Promise<PickupResult> {
    const queue = openQueue(args.url, QUEUE)
    await queue.waitUntilReady()
    const add = async (i: number): Promise<void> => void (await queue.add(QUEUE, { messageId: i }))
    try {
      if (args.otherProcess) {
        const child = spawnTask(MODULE, 'pickup-worker', { url: args.url })
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
      const worker = startWorker(args.url, QUEUE, 1, () => onStart?.(nowMs()))
      await worker.waitUntilReady()
      await sleep(300)
      const result = await samplePickups({
        ...args,
        add,
        started: () => new Promise<number>((resolvePromise) => (onStart = resolvePromise)),
      })
      await worker.close()
      return result
    } finally {
      await queue.close()
    }
  },

  async 'pickup-worker'(args: { url: string }, ctx: Ctx): Promise<object> {
    const worker = startWorker(args.url, QUEUE, 1, () => ctx.send({ type: 'started', t: nowMs() }))
    await worker.waitUntilReady()
    await sleep(300)
    ctx.send({ type: 'ready' })
    await ctx.receive('stop', 600_000)
    await worker.close()
    return {}
  },
}
