/**
 * liteque 0.8.0 under the benchmark, in the configuration of its README:
 * `buildDBClient(file, { runMigrations: true })` (WAL, synchronous = NORMAL,
 * a 64 MiB cache, temp_store = MEMORY), `new SqliteQueue(name, db,
 * { defaultJobArgs: { numRetries: 2 }, keepFailedJobs: false })`, and a
 * `Runner` with `{ concurrency, pollIntervalMs: 1000, timeoutSecs: 60 }`
 * (the README's values; `concurrency` is the row's slots). The README's zod
 * `validator` is left out: it would only add per-job parsing.
 *
 * It runs on its own better-sqlite3 11.9.1 (this folder's package.json):
 * its dequeue passes an async function to a transaction, which
 * better-sqlite3 12 refuses. Its `enqueue` is async and goes through its own
 * Drizzle handle, so it cannot join the app's transaction, and it has no
 * batch add: those rows say n/a.
 *
 * This file sits outside the project's typecheck (its imports resolve only
 * once this folder is installed); tsx runs it.
 */
import Database from 'better-sqlite3'
import { buildDBClient, Runner, SqliteQueue } from 'liteque'
import type { Ctx, Task } from '../lib/child.js'
import { spawnTask } from '../lib/child.js'
import { nowMs } from '../lib/clock.js'
import { copyDb, freshPath } from '../lib/files.js'
import { coordinateWorkers, samplePickups } from '../lib/procs.js'
import type {
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
const QUEUE = 'bench'
/** Above this many jobs a fill writes liteque's rows with one prepared statement instead of `enqueue` (150 s for 1,000,000). */
const API_FILL_LIMIT = 100_000

interface Reply {
  messageId: number
}

type Db = ReturnType<typeof buildDBClient>

function open(file: string): { db: Db; client: Database.Database; queue: SqliteQueue<Reply> } {
  const db = buildDBClient(file, { runMigrations: true })
  const client = (db as unknown as { session: { client: Database.Database } }).session.client
  const queue = new SqliteQueue<Reply>(QUEUE, db, { defaultJobArgs: { numRetries: 2 }, keepFailedJobs: false })
  return { db, client, queue }
}

function count(client: Database.Database, sql: string): number {
  return client.prepare(sql).pluck().get() as number
}

function runner(queue: SqliteQueue<Reply>, run: () => Promise<void>, concurrency: number): Runner<Reply> {
  return new Runner<Reply>(queue, { run }, { concurrency, pollIntervalMs: 1000, timeoutSecs: 60 })
}

/**
 * Drains with a Runner until the queue is empty (or past `deadline`).
 * The time taken is up to the last job's completion: runUntilEmpty itself
 * returns only after one more poll interval when jobs were in flight as the
 * queue emptied, which is not work.
 */
async function drain(
  queue: SqliteQueue<Reply>,
  slots: number,
  deadline = Number.POSITIVE_INFINITY,
): Promise<{ elapsedMs: number; done: number; capped: boolean }> {
  let done = 0
  let last = 0
  let capped = false
  const finalize = queue.finalize.bind(queue)
  queue.finalize = async (...args: Parameters<typeof finalize>) => {
    await finalize(...args)
    done++
    last = nowMs()
  }
  let r: Runner<Reply>
  const t0 = nowMs()
  r = runner(
    queue,
    async () => {
      if (nowMs() > deadline) {
        capped = true
        r.stop()
      }
    },
    slots,
  )
  await r.runUntilEmpty()
  queue.finalize = finalize
  return { elapsedMs: (last || nowMs()) - t0, done, capped }
}

async function warmDrain(dir: string, warmTemplate: string, slots: number): Promise<void> {
  const { client, queue } = open(copyDb(warmTemplate, dir, 'warm'))
  await drain(queue, slots)
  client.close()
}

export const tasks: Record<string, Task> = {
  async info(): Promise<InfoResult> {
    const client = new Database(':memory:')
    const sqlite = client.prepare('select sqlite_version()').pluck().get() as string
    client.close()
    return { name: 'liteque', version: '0.8.0 (better-sqlite3 11.9.1)', sqlite }
  },

  async fill(args: FillArgs): Promise<FillResult> {
    const template = freshPath(args.dir, args.name)
    const { client, queue } = open(template)
    const t0 = nowMs()
    if (args.count <= API_FILL_LIMIT) {
      for (let i = 0; i < args.count; i++) await queue.enqueue({ messageId: i })
    } else {
      // The row liteque's enqueue writes (src/queue.ts): createdAt in seconds, availableAt in ms, three runs.
      const insert =
        client.prepare(`insert into tasks (queue, payload, createdAt, availableAt, status, allocationId, numRunsLeft, maxNumRuns, priority)
        values (?, ?, ?, ?, 'pending', ?, 3, 3, 0)`)
      const batch = client.transaction((from: number, n: number) => {
        const now = Date.now()
        for (let k = 0; k < n; k++)
          insert.run(
            QUEUE,
            JSON.stringify({ messageId: from + k }),
            Math.floor(now / 1000),
            now,
            Math.random().toString(36).substring(2, 15),
          )
      })
      for (let done = 0; done < args.count; done += 1000) batch(done, Math.min(1000, args.count - done))
    }
    const ms = nowMs() - t0
    client.pragma('wal_checkpoint(TRUNCATE)')
    client.close()
    return { template, ms }
  },

  async process(args: ProcessArgs): Promise<ProcessResult> {
    await warmDrain(args.dir, args.warmTemplate, args.slots)
    const { client, queue } = open(copyDb(args.template, args.dir, 'process'))
    const run = await drain(queue, args.slots, args.capMs === undefined ? undefined : nowMs() + args.capMs)
    const left = count(client, 'select count(*) from tasks')
    if (run.done !== args.count - left) throw new Error(`counted ${run.done} jobs done, the file says ${args.count - left}`)
    if (!run.capped && left !== 0) throw new Error(`${left} jobs left`)
    client.close()
    return { jobsPerSec: (run.done / run.elapsedMs) * 1000, ...run }
  },

  async processes(args: ProcessesArgs): Promise<ProcessesResult> {
    const file = copyDb(args.template, args.dir, 'processes')
    const client = new Database(file)
    const observe = client.prepare(
      `select exists (select 1 from tasks) as open, (select count(*) from tasks where status = 'running') as running`,
    )
    const run = await coordinateWorkers({
      module: MODULE,
      procs: args.procs,
      workerArgs: { file, dir: args.dir, warmTemplate: args.warmTemplate, slots: args.slots },
      observe: () => observe.get() as { open: number; running: number },
      ...(args.capMs === undefined ? {} : { capMs: args.capMs }),
    })
    const done = args.count - count(client, 'select count(*) from tasks')
    client.close()
    if (!run.capped && done !== args.count) throw new Error(`expected ${args.count} done, found ${done}`)
    return { ...run, jobsPerSec: (done / run.elapsedMs) * 1000, done }
  },

  async 'process-worker'(args: { file: string; dir: string; warmTemplate: string; slots: number }, ctx: Ctx): Promise<{ handled: number }> {
    await warmDrain(args.dir, args.warmTemplate, args.slots)
    const { client, queue } = open(args.file)
    ctx.send({ type: 'ready' })
    const go = await ctx.receive<{ type: string; deadline: number | null }>('go')
    const deadline = go.deadline ?? Number.POSITIVE_INFINITY
    let handled = 0
    const r = runner(
      queue,
      async () => {
        handled++
        if (nowMs() > deadline) r.stop()
      },
      args.slots,
    )
    const running = r.run()
    await ctx.receive('stop', 600_000)
    r.stop()
    await running
    client.close()
    return { handled }
  },

  async pickup(args: PickupArgs): Promise<PickupResult> {
    const file = freshPath(args.dir, 'pickup')
    const { client, queue } = open(file)
    if (args.otherProcess) {
      const child = spawnTask(MODULE, 'pickup-worker', { file })
      await child.receive('ready')
      const result = await samplePickups({
        ...args,
        add: async (i) => void (await queue.enqueue({ messageId: i })),
        started: async () => (await child.receive<{ type: string; t: number }>('started')).t,
      })
      child.send({ type: 'stop' })
      await child.result
      client.close()
      return result
    }
    let onStart: ((t: number) => void) | null = null
    const r = runner(
      queue,
      async () => {
        onStart?.(nowMs())
      },
      1,
    )
    const running = r.run()
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 200))
    const result = await samplePickups({
      ...args,
      add: async (i) => void (await queue.enqueue({ messageId: i })),
      started: () => new Promise<number>((resolvePromise) => (onStart = resolvePromise)),
    })
    r.stop()
    await running
    client.close()
    return result
  },

  async 'pickup-worker'(args: { file: string }, ctx: Ctx): Promise<object> {
    const { client, queue } = open(args.file)
    const r = runner(
      queue,
      async () => {
        ctx.send({ type: 'started', t: nowMs() })
      },
      1,
    )
    const running = r.run()
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 200))
    ctx.send({ type: 'ready' })
    await ctx.receive('stop', 600_000)
    r.stop()
    await running
    client.close()
    return {}
  },

  async scale(args: ScaleArgs): Promise<ScaleResult> {
    await warmDrain(args.dir, args.warmTemplate, args.slots)
    const { client, queue } = open(copyDb(args.template, args.dir, 'scale'))
    let done = 0
    let last = 0
    const finalize = queue.finalize.bind(queue)
    queue.finalize = async (...a: Parameters<typeof finalize>) => {
      await finalize(...a)
      done++
      last = nowMs()
    }
    const deadline = args.capMs === undefined ? Number.POSITIVE_INFINITY : nowMs() + args.capMs
    let capped = false
    let r: Runner<Reply>
    const t0 = nowMs()
    r = runner(
      queue,
      async () => {
        if (done + 1 >= args.count || nowMs() > deadline) {
          capped = done + 1 < args.count
          r.stop()
        }
      },
      args.slots,
    )
    await r.run()
    const elapsedMs = (last || nowMs()) - t0
    client.close()
    return { jobsPerSec: (done / elapsedMs) * 1000, done, elapsedMs, capped }
  },
}
