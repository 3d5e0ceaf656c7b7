/**
 * pg-boss 10.4.2 (the newest that runs on Node 20) under the PostgreSQL benchmark, from this folder's own
 * node_modules (installed on first use by bench/pg/install.ts). Its fastest settings for a backlog: one
 * `work()` per process with `batchSize` = the row's concurrency (its handler gets that many jobs at once
 * and runs them together) and `pollingIntervalSeconds: 0.5`, its minimum. pg-boss 10 has no LISTEN: its
 * worker fetches, runs the batch, completes it, and then waits out the rest of its poll interval before
 * the next fetch even with a backlog, so a worker runs at most `batchSize` jobs per interval (a `send()`
 * in the same instance wakes its local worker early). Jobs are added with `send(…, { db })` inside the
 * app's Drizzle transaction, and in batches with `insert()`.
 */
import { drizzle } from 'drizzle-orm/node-postgres'
import PgBoss from 'pg-boss'
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
export const POLLING_INTERVAL_SECONDS = 0.5

async function start(url: string): Promise<PgBoss> {
  const boss = new PgBoss({ connectionString: url })
  boss.on('error', () => {})
  await boss.start()
  return boss
}

function workOptions(slots: number): PgBoss.WorkOptions {
  return { batchSize: slots, pollingIntervalSeconds: POLLING_INTERVAL_SECONDS }
}

async function addBatches(boss: PgBoss, name: string, total: number, batch: number): Promise<void> {
  for (let done = 0; done < total; done += batch) {
    await boss.insert(Array.from({ length: Math.min(batch, total - done) }, (_, k) => ({ name, data: { messageId: done + k } })))
  }
}

async function count(url: string, name: string, where = 'true'): Promise<number> {
  const client = await connect(url)
  try {
    const { rows } = await client.query(`select count(*)::int as n from pgboss.job where name = $1 and ${where}`, [name])
    return (rows[0] as { n: number }).n
  } finally {
    await client.end()
  }
}

/** Runs one worker of `name` until its handler ran `target` jobs (or `capMs` passed), then stops pg-boss (waiting for the batch in hand). */
async function drain(
  url: string,
  name: string,
  target: number,
  slots: number,
  capMs?: number,
): Promise<{ elapsedMs: number; handled: number }> {
  const boss = await start(url)
  const t0 = nowMs()
  const counted = counter(target, capMs === undefined ? undefined : t0 + capMs)
  await boss.work(name, workOptions(slots), async (jobs) => {
    await Promise.all(jobs.map(async () => counted.handle()))
  })
  await counted.reached
  await boss.stop({ graceful: true, wait: true })
  return { elapsedMs: nowMs() - t0, handled: counted.handled() }
}

export const tasks: Record<string, Task> = {
  async setup(args: PgSetupArgs): Promise<object> {
    const boss = await start(args.url)
    await boss.createQueue(QUEUE)
    await boss.createQueue(WARM_QUEUE)
    await boss.stop({ graceful: true, wait: true })
    const client = await connect(args.url)
    await client.query(CREATE_APP_TABLE)
    await client.end()
    return {}
  },

  async fill(args: PgFillArgs): Promise<PgFillResult> {
    const boss = await start(args.url)
    const t0 = nowMs()
    await addBatches(boss, WARM_QUEUE, args.warm, 1000)
    await addBatches(boss, QUEUE, args.count, 1000)
    const ms = nowMs() - t0
    await boss.stop({ graceful: true, wait: true })
    return { ms }
  },

  async 'enqueue-app'(args: PgEnqueueAppArgs): Promise<EnqueueAppResult> {
    const boss = await start(args.url)
    const pool = new pg.Pool({ connectionString: args.url })
    const db = drizzle(pool)
    const transactions = async (n: number, withJob: boolean): Promise<void> => {
      for (let i = 0; i < n; i++) {
        await db.transaction(async (tx) => {
          const [row] = await tx.insert(benchMessages).values(appRow(i)).returning({ id: benchMessages.id })
          if (!withJob) return
          // pg-boss joins a transaction through `db: { executeSql }`: the transaction's own client.
          const client = (tx as unknown as { session: { client: pg.PoolClient } }).session.client
          await boss.send(
            QUEUE,
            { messageId: (row as { id: number }).id },
            { db: { executeSql: (text: string, values: unknown[]) => client.query(text, values) } },
          )
        })
      }
    }
    await transactions(args.warmup, true)
    await transactions(args.warmup, false)
    const rates = await alternatingRates(args.count, 100, !args.appOnlyFirst, transactions)
    await pool.end()
    await boss.stop({ graceful: true, wait: true })
    const jobs = await count(args.url, QUEUE)
    if (jobs !== args.count + args.warmup) throw new Error(`expected ${args.count + args.warmup} jobs, found ${jobs}`)
    return rates
  },

  async 'enqueue-batch'(args: PgEnqueueBatchArgs): Promise<EnqueueBatchResult> {
    const boss = await start(args.url)
    await addBatches(boss, WARM_QUEUE, args.warmupBatches * args.batch, args.batch)
    const t0 = nowMs()
    await addBatches(boss, QUEUE, args.count, args.batch)
    const ms = nowMs() - t0
    await boss.stop({ graceful: true, wait: true })
    const jobs = await count(args.url, QUEUE)
    if (jobs !== args.count) throw new Error(`expected ${args.count} jobs, found ${jobs}`)
    return { jobsPerSec: (args.count / ms) * 1000 }
  },

  async process(args: PgProcessArgs): Promise<ProcessResult> {
    await drain(args.url, WARM_QUEUE, Number.POSITIVE_INFINITY, Math.max(args.slots, 100), 1000)
    const { elapsedMs, handled } = await drain(args.url, QUEUE, args.count, args.slots, args.capMs)
    const done = await count(args.url, QUEUE, `state = 'completed'`)
    if (done !== handled) throw new Error(`expected ${handled} jobs completed, found ${done}`)
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
        `select count(*) filter (where state < 'completed') as open, count(*) filter (where state = 'active') as running from pgboss.job where name = $1`,
        [QUEUE],
      ),
      ...(args.capMs === undefined ? {} : { capMs: args.capMs }),
    })
    await client.end()
    const done = run.perProcess.reduce((a, b) => a + b, 0)
    return { ...run, jobsPerSec: (done / run.elapsedMs) * 1000, done }
  },

  async 'process-worker'(args: { url: string; slots: number }, ctx: Ctx): Promise<{ handled: number }> {
    await drain(args.url, WARM_QUEUE, Number.POSITIVE_INFINITY, Math.max(args.slots, 100), 1000)
    const boss = await start(args.url)
    ctx.send({ type: 'ready' })
    await ctx.receive('go')
    let handled = 0
    await boss.work(QUEUE, workOptions(args.slots), async (jobs) => {
      await Promise.all(jobs.map(async () => void handled++))
    })
    await ctx.receive('stop', 600_000)
    await boss.stop({ graceful: true, wait: true })
    return { handled }
  },

  async pickup(args: PgPickupArgs): Promise<PickupResult> {
    const boss = await start(args.url)
    const add = async (i: number): Promise<void> => void (await boss.send(QUEUE, { messageId: i }))
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
      await boss.work(QUEUE, workOptions(1), async () => onStart?.(nowMs()))
      await sleep(300)
      return await samplePickups({ ...args, add, started: () => new Promise<number>((resolvePromise) => (onStart = resolvePromise)) })
    } finally {
      await boss.stop({ graceful: true, wait: true })
    }
  },

  async 'pickup-worker'(args: { url: string }, ctx: Ctx): Promise<object> {
    const boss = await start(args.url)
    await boss.work(QUEUE, workOptions(1), async () => ctx.send({ type: 'started', t: nowMs() }))
    await sleep(300)
    ctx.send({ type: 'ready' })
    await ctx.receive('stop', 600_000)
    await boss.stop({ graceful: true, wait: true })
    return {}
  },
}
