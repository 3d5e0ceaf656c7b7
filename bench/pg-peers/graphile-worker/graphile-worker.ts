/**
 * graphile-worker 0.17.3 under the PostgreSQL benchmark, from this folder's own node_modules (installed on
 * first use by bench/pg/install.ts). Its fastest configuration for a backlog: `concurrency` as the row says,
 * `preset.worker.localQueue.size = 100` (the pool locks and hands out 100 jobs at a time),
 * `completeJobBatchDelay: 0` and `failJobBatchDelay: 0` (completions batched), a pool of
 * max(10, concurrency + 2) connections; it wakes on LISTEN (pollInterval default 2 s). Jobs are added
 * with `graphile_worker.add_job()` inside the app's Drizzle transaction, and in batches with
 * WorkerUtils' `addJobs`.
 */
import { drizzle } from 'drizzle-orm/node-postgres'
import { sql } from 'drizzle-orm'
import { Logger, makeWorkerUtils, run, runMigrations, type Runner, type RunnerOptions } from 'graphile-worker'
import pg from 'pg'
import { spawnTask, type Ctx, type Task } from '../../lib/child.js'
import { nowMs, sleep } from '../../lib/clock.js'
import { coordinateWorkers, samplePickups } from '../../lib/procs.js'
import type { EnqueueAppResult, EnqueueBatchResult, PickupResult, ProcessesResult, ProcessResult } from '../../lib/tasks.js'
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
  type PgSetupArgs,
} from '../../pg/lib.js'

const MODULE = import.meta.filename
const silent = new Logger(() => () => {})

/** The runner options of the benchmark: the fastest configuration graphile-worker 0.17 documents. */
function runnerOptions(url: string, concurrency: number, taskList: RunnerOptions['taskList']): RunnerOptions {
  return {
    connectionString: url,
    maxPoolSize: Math.max(10, concurrency + 2),
    concurrency,
    noHandleSignals: true,
    logger: silent,
    taskList,
    preset: { worker: { localQueue: { size: 100 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
  }
}

async function addBatches(url: string, identifier: string, total: number, batch: number): Promise<void> {
  const utils = await makeWorkerUtils({ connectionString: url, logger: silent })
  try {
    for (let done = 0; done < total; done += batch) {
      await utils.addJobs(
        Array.from({ length: Math.min(batch, total - done) }, (_, k) => ({ identifier, payload: { messageId: done + k } })),
      )
    }
  } finally {
    await utils.release()
  }
}

async function count(url: string, where = 'true'): Promise<number> {
  const client = await connect(url)
  try {
    const { rows } = await client.query(
      `select count(*)::int as n from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id where ${where}`,
    )
    return (rows[0] as { n: number }).n
  } finally {
    await client.end()
  }
}

/** Runs a runner for `identifier` until its handler ran `target` times (or `capMs` passed), then stops it. */
async function drain(
  url: string,
  identifier: string,
  target: number,
  concurrency: number,
  capMs?: number,
): Promise<{ elapsedMs: number; handled: number }> {
  const t0 = nowMs()
  const counted = counter(target, capMs === undefined ? undefined : t0 + capMs)
  const runner = await run(runnerOptions(url, concurrency, { [identifier]: async () => counted.handle() }))
  await counted.reached
  await runner.stop()
  return { elapsedMs: nowMs() - t0, handled: counted.handled() }
}

async function appTransactions(db: ReturnType<typeof drizzle>, n: number, withJob: boolean): Promise<void> {
  for (let i = 0; i < n; i++) {
    await db.transaction(async (tx) => {
      const [row] = await tx.insert(benchMessages).values(appRow(i)).returning({ id: benchMessages.id })
      if (withJob)
        await tx.execute(sql`select graphile_worker.add_job(${QUEUE}, ${JSON.stringify({ messageId: (row as { id: number }).id })}::json)`)
    })
  }
}

export const tasks: Record<string, Task> = {
  async setup(args: PgSetupArgs): Promise<object> {
    await runMigrations({ connectionString: args.url, logger: silent })
    const client = await connect(args.url)
    await client.query(CREATE_APP_TABLE)
    await client.end()
    return {}
  },

  async fill(args: PgFillArgs): Promise<PgFillResult> {
    const t0 = nowMs()
    await addBatches(args.url, WARM_QUEUE, args.warm, 1000)
    await addBatches(args.url, QUEUE, args.count, 1000)
    return { ms: nowMs() - t0 }
  },

  async 'enqueue-app'(args: PgEnqueueAppArgs): Promise<EnqueueAppResult> {
    const pool = new pg.Pool({ connectionString: args.url })
    const db = drizzle(pool)
    await appTransactions(db, args.warmup, true)
    await appTransactions(db, args.warmup, false)
    const rates = await alternatingRates(args.count, 100, !args.appOnlyFirst, (n, withJob) => appTransactions(db, n, withJob))
    await pool.end()
    const jobs = await count(args.url)
    if (jobs !== args.count + args.warmup) throw new Error(`expected ${args.count + args.warmup} jobs, found ${jobs}`)
    return rates
  },

  async 'enqueue-batch'(args: PgEnqueueBatchArgs): Promise<EnqueueBatchResult> {
    await addBatches(args.url, WARM_QUEUE, args.warmupBatches * args.batch, args.batch)
    const t0 = nowMs()
    await addBatches(args.url, QUEUE, args.count, args.batch)
    const ms = nowMs() - t0
    const jobs = await count(args.url, `t.identifier = '${QUEUE}'`)
    if (jobs !== args.count) throw new Error(`expected ${args.count} jobs, found ${jobs}`)
    return { jobsPerSec: (args.count / ms) * 1000 }
  },

  async process(args: PgProcessArgs): Promise<ProcessResult> {
    await drain(args.url, WARM_QUEUE, await count(args.url, `t.identifier = '${WARM_QUEUE}'`), args.slots)
    const { elapsedMs, handled } = await drain(args.url, QUEUE, args.count, args.slots, args.capMs)
    const left = await count(args.url, `t.identifier = '${QUEUE}'`)
    if (handled + left !== args.count)
      throw new Error(`expected ${args.count} jobs handled or left, found ${handled} handled, ${left} left`)
    return { jobsPerSec: (handled / elapsedMs) * 1000, done: handled, elapsedMs, capped: handled < args.count }
  },

  async processes(args: PgProcessesArgs): Promise<ProcessesResult> {
    const client = await connect(args.url)
    const { rows } = await client.query(`select id from graphile_worker._private_tasks where identifier = $1`, [QUEUE])
    const taskId = (rows[0] as { id: number }).id
    const run = await coordinateWorkers({
      module: MODULE,
      procs: args.procs,
      workerArgs: { url: args.url, slots: args.slots },
      observe: observer(
        client,
        `select count(*) as open, count(*) filter (where locked_at is not null) as running from graphile_worker._private_jobs where task_id = $1`,
        [taskId],
      ),
    })
    await client.end()
    const done = run.perProcess.reduce((a, b) => a + b, 0)
    if (done !== args.count) throw new Error(`expected ${args.count} jobs handled, found ${done}`)
    return { ...run, jobsPerSec: (done / run.elapsedMs) * 1000, done }
  },

  async 'process-worker'(args: { url: string; slots: number }, ctx: Ctx): Promise<{ handled: number }> {
    await drain(args.url, WARM_QUEUE, Number.POSITIVE_INFINITY, args.slots, 1000)
    ctx.send({ type: 'ready' })
    await ctx.receive('go')
    let handled = 0
    const runner = await run(runnerOptions(args.url, args.slots, { [QUEUE]: async () => void handled++ }))
    await ctx.receive('stop', 600_000)
    await runner.stop()
    return { handled }
  },

  async pickup(args: PgPickupArgs): Promise<PickupResult> {
    const utils = await makeWorkerUtils({ connectionString: args.url, logger: silent })
    const add = async (i: number): Promise<void> => void (await utils.addJob(QUEUE, { messageId: i }))
    let runner: Runner | undefined
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
      runner = await run(runnerOptions(args.url, 1, { [QUEUE]: async () => onStart?.(nowMs()) }))
      await sleep(300)
      return await samplePickups({ ...args, add, started: () => new Promise<number>((resolvePromise) => (onStart = resolvePromise)) })
    } finally {
      await runner?.stop()
      await utils.release()
    }
  },

  async 'pickup-worker'(args: { url: string }, ctx: Ctx): Promise<object> {
    const runner = await run(runnerOptions(args.url, 1, { [QUEUE]: async () => ctx.send({ type: 'started', t: nowMs() }) }))
    await sleep(300)
    ctx.send({ type: 'ready' })
    await ctx.receive('stop', 600_000)
    await runner.stop()
    return {}
  },
}
