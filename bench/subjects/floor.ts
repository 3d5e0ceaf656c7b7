/**
 * The floor: the same job lifecycle written by hand with prepared
 * better-sqlite3 statements, nothing else — add; claim with a lease; mark
 * done, fenced by that lease. What SQLite itself allows on this machine, for
 * drizzle-jobs to be compared to. Either one transaction per step, or claims
 * and completions batched 100 at a time. WAL, synchronous = NORMAL.
 *
 * Its schema is the least a durable queue with the same guarantees needs:
 * ids unique per queue (time-ordered, like drizzle-jobs' generated ids), a
 * partial index in claim order (priority, run_at, seq) over runnable jobs,
 * and a lease row per running job.
 */
import Database from 'better-sqlite3'
import { CREATE_APP_TABLE } from '../app.js'
import type { Ctx, Task } from '../lib/child.js'
import { nowMs } from '../lib/clock.js'
import { copyDb, freshPath } from '../lib/files.js'
import { coordinateWorkers } from '../lib/procs.js'
import { median, quantile } from '../lib/stats.js'
import { newJobId as uuid7 } from '../../src/queue/job-id.js'
import type {
  EnqueueAppArgs,
  EnqueueAppResult,
  EnqueueBatchArgs,
  EnqueueBatchResult,
  FillArgs,
  FillResult,
  InfoResult,
  LifecycleArgs,
  ProcessArgs,
  ProcessesArgs,
  ProcessesResult,
  ProcessResult,
  ScaleArgs,
  ScaleResult,
} from '../lib/tasks.js'

const MODULE = import.meta.filename
const QUEUE = 'bench'
const BATCH = 100
const LEASE_MS = 30_000

const SCHEMA = `
create table if not exists job (
  seq integer primary key, queue text not null, id text not null, value text not null,
  state text not null default 'waiting', priority integer not null default 0, attempts integer not null default 0,
  run_at integer not null, created_at integer not null, finished_at integer);
create unique index if not exists job_queue_id on job (queue, id);
create index if not exists job_claim on job (queue, priority, run_at, seq) where state = 'waiting';
create table if not exists lease (job integer primary key, owner text not null, attempt integer not null, expires_at integer not null);
${CREATE_APP_TABLE};`

interface Claimed {
  seq: number
  value: string
  attempts: number
}

/** One connection's statements. */
class Floor {
  readonly client: Database.Database
  private readonly insertApp: Database.Statement
  private readonly insertJob: Database.Statement
  private readonly claimJobs: Database.Statement
  private readonly insertLease: Database.Statement
  private readonly dropLease: Database.Statement
  private readonly markDone: Database.Statement
  private readonly owner = `floor-${process.pid}`
  readonly addOne: (value: string) => void
  readonly addAppAndJob: (i: number) => void
  readonly addApp: (i: number) => void
  readonly addMany: (values: string[]) => void
  readonly claim: (limit: number) => Claimed[]
  readonly complete: (jobs: Claimed[]) => void

  constructor(file: string) {
    this.client = new Database(file)
    this.client.pragma('journal_mode = WAL')
    this.client.pragma('synchronous = NORMAL')
    this.client.exec(SCHEMA)
    this.insertApp = this.client.prepare('insert into bench_message (chat_id, body, created_at) values (?, ?, ?)')
    this.insertJob = this.client.prepare('insert into job (queue, id, value, run_at, created_at) values (?, ?, ?, ?, ?)')
    this.claimJobs = this.client.prepare(`update job set state = 'running', attempts = attempts + 1
      where seq in (select seq from job where queue = ? and state = 'waiting' and run_at <= ? order by priority, run_at, seq limit ? + 0)
      returning seq, value, attempts`)
    this.insertLease = this.client.prepare('insert into lease (job, owner, attempt, expires_at) values (?, ?, ?, ?)')
    this.dropLease = this.client.prepare('delete from lease where job = ? and owner = ? and attempt = ?')
    this.markDone = this.client.prepare(`update job set state = 'done', finished_at = ? where seq = ?`)
    const add = (value: string, now: number): void => void this.insertJob.run(QUEUE, uuid7(now), value, now, now)
    this.addOne = this.client.transaction((value: string) => add(value, Date.now()))
    this.addApp = this.client.transaction((i: number) => void this.insertApp.run(i % 100, `message ${i}`, Date.now()))
    this.addAppAndJob = this.client.transaction((i: number) => {
      const { lastInsertRowid } = this.insertApp.run(i % 100, `message ${i}`, Date.now())
      add(JSON.stringify({ messageId: Number(lastInsertRowid) }), Date.now())
    })
    this.addMany = this.client.transaction((values: string[]) => {
      const now = Date.now()
      for (const value of values) add(value, now)
    })
    const claim = this.client.transaction((limit: number) => {
      const now = Date.now()
      const jobs = this.claimJobs.all(QUEUE, now, limit) as Claimed[]
      for (const job of jobs) this.insertLease.run(job.seq, this.owner, job.attempts, now + LEASE_MS)
      return jobs
    })
    this.claim = (limit) => claim.immediate(limit) as Claimed[]
    const complete = this.client.transaction((jobs: Claimed[]) => {
      const now = Date.now()
      for (const job of jobs) {
        if (this.dropLease.run(job.seq, this.owner, job.attempts).changes === 1) this.markDone.run(now, job.seq)
      }
    })
    this.complete = (jobs) => void complete.immediate(jobs)
  }

  count(sql: string): number {
    return this.client.prepare(sql).pluck().get() as number
  }
}

/** The handler the floor runs: the job's value parsed, nothing done with it. */
function handle(job: Claimed): void {
  JSON.parse(job.value)
}

/** Claims and completes until `target` jobs are done or none is left; answers how many were done. */
function drain(floor: Floor, mode: 'per-step' | 'batched', target = Number.POSITIVE_INFINITY): number {
  const limit = mode === 'batched' ? BATCH : 1
  let done = 0
  while (done < target) {
    const jobs = floor.claim(Math.min(limit, target - done))
    if (jobs.length === 0) break
    for (const job of jobs) handle(job)
    floor.complete(jobs)
    done += jobs.length
  }
  return done
}

function values(from: number, n: number): string[] {
  return Array.from({ length: n }, (_, k) => JSON.stringify({ messageId: from + k }))
}

function warmDrain(dir: string, warmTemplate: string, mode: 'per-step' | 'batched'): void {
  const floor = new Floor(copyDb(warmTemplate, dir, 'warm'))
  drain(floor, mode)
  floor.client.close()
}

export const tasks: Record<string, Task> = {
  async info(): Promise<InfoResult> {
    const client = new Database(':memory:')
    const sqlite = client.prepare('select sqlite_version()').pluck().get() as string
    client.close()
    return { name: 'floor', version: 'better-sqlite3 12.11.1, hand-written statements', sqlite }
  },

  async fill(args: FillArgs): Promise<FillResult> {
    const template = freshPath(args.dir, args.name)
    const floor = new Floor(template)
    const t0 = nowMs()
    for (let done = 0; done < args.count; done += 1000) floor.addMany(values(done, Math.min(1000, args.count - done)))
    const ms = nowMs() - t0
    const lastId = floor.client.prepare('select id from job order by seq desc limit 1').pluck().get() as string
    floor.client.pragma('wal_checkpoint(TRUNCATE)')
    floor.client.close()
    return { template, ms, lastId }
  },

  async 'enqueue-app'(args: EnqueueAppArgs): Promise<EnqueueAppResult> {
    const measure = (withJob: boolean): number => {
      const warm = new Floor(freshPath(args.dir, 'warm'))
      for (let i = 0; i < args.warmup; i++) (withJob ? warm.addAppAndJob : warm.addApp)(i)
      warm.client.close()
      const floor = new Floor(freshPath(args.dir, 'app'))
      const t0 = nowMs()
      for (let i = 0; i < args.count; i++) (withJob ? floor.addAppAndJob : floor.addApp)(i)
      const ms = nowMs() - t0
      if (
        floor.count('select count(*) from bench_message') !== args.count ||
        floor.count('select count(*) from job') !== (withJob ? args.count : 0)
      ) {
        throw new Error('the floor did not write what it should')
      }
      floor.client.close()
      return (args.count / ms) * 1000
    }
    const order = args.appOnlyFirst ? [false, true] : [true, false]
    const rates = new Map(order.map((withJob) => [withJob, measure(withJob)]))
    return { txPerSec: rates.get(true) as number, appOnlyTxPerSec: rates.get(false) as number }
  },

  async 'enqueue-batch'(args: EnqueueBatchArgs): Promise<EnqueueBatchResult> {
    const warm = new Floor(freshPath(args.dir, 'warm'))
    for (let b = 0; b < args.warmupBatches; b++) warm.addMany(values(b * args.batch, args.batch))
    warm.client.close()
    const floor = new Floor(freshPath(args.dir, 'batch'))
    const t0 = nowMs()
    for (let done = 0; done < args.count; done += args.batch) floor.addMany(values(done, Math.min(args.batch, args.count - done)))
    const ms = nowMs() - t0
    if (floor.count('select count(*) from job') !== args.count) throw new Error('the floor did not write what it should')
    floor.client.close()
    return { jobsPerSec: (args.count / ms) * 1000 }
  },

  async process(args: ProcessArgs): Promise<ProcessResult> {
    const mode = args.mode ?? 'batched'
    warmDrain(args.dir, args.warmTemplate, mode)
    const floor = new Floor(copyDb(args.template, args.dir, 'process'))
    const t0 = nowMs()
    drain(floor, mode)
    const elapsedMs = nowMs() - t0
    const done = floor.count(`select count(*) from job where state = 'done'`)
    if (done !== args.count || floor.count('select count(*) from lease') !== 0)
      throw new Error(`expected ${args.count} done, found ${done}`)
    floor.client.close()
    return { jobsPerSec: (done / elapsedMs) * 1000, done, elapsedMs, capped: false }
  },

  /**
   * Add, claim and complete `count` jobs on a fresh file. Per step: each add, claim and completion in its own
   * transaction. Batched: each add in its own transaction (as an app adds its jobs), claims and completions
   * 100 at a time.
   */
  async lifecycle(args: LifecycleArgs): Promise<ProcessResult> {
    const warm = new Floor(freshPath(args.dir, 'warm'))
    const run = (floor: Floor, n: number): void => {
      if (args.mode === 'per-step') {
        for (let i = 0; i < n; i++) {
          floor.addOne(JSON.stringify({ messageId: i }))
          const jobs = floor.claim(1)
          for (const job of jobs) handle(job)
          floor.complete(jobs)
        }
      } else {
        for (let i = 0; i < n; i += BATCH) {
          for (let k = 0; k < BATCH; k++) floor.addOne(JSON.stringify({ messageId: i + k }))
          const jobs = floor.claim(BATCH)
          for (const job of jobs) handle(job)
          floor.complete(jobs)
        }
      }
    }
    run(warm, 1000)
    warm.client.close()
    const floor = new Floor(freshPath(args.dir, 'lifecycle'))
    const t0 = nowMs()
    run(floor, args.count)
    const elapsedMs = nowMs() - t0
    const done = floor.count(`select count(*) from job where state = 'done'`)
    if (done !== args.count) throw new Error(`expected ${args.count} done, found ${done}`)
    floor.client.close()
    return { jobsPerSec: (done / elapsedMs) * 1000, done, elapsedMs, capped: false }
  },

  async processes(args: ProcessesArgs): Promise<ProcessesResult> {
    const file = copyDb(args.template, args.dir, 'processes')
    const floor = new Floor(file)
    const observe = floor.client.prepare(
      `select exists (select 1 from job where state in ('waiting', 'running')) as open, (select count(*) from lease) as running`,
    )
    const run = await coordinateWorkers({
      module: MODULE,
      procs: args.procs,
      workerArgs: { file, dir: args.dir, warmTemplate: args.warmTemplate, mode: args.mode ?? 'batched' },
      observe: () => observe.get() as { open: number; running: number },
    })
    const done = floor.count(`select count(*) from job where state = 'done'`)
    floor.client.close()
    if (done !== args.count) throw new Error(`expected ${args.count} done, found ${done}`)
    return { ...run, jobsPerSec: (done / run.elapsedMs) * 1000, done }
  },

  async 'process-worker'(
    args: { file: string; dir: string; warmTemplate: string; mode: 'per-step' | 'batched' },
    ctx: Ctx,
  ): Promise<{ handled: number }> {
    warmDrain(args.dir, args.warmTemplate, args.mode)
    const floor = new Floor(args.file)
    ctx.send({ type: 'ready' })
    await ctx.receive('go')
    const handled = drain(floor, args.mode)
    await ctx.receive('stop', 600_000)
    floor.client.close()
    return { handled }
  },

  async scale(args: ScaleArgs): Promise<ScaleResult> {
    const mode = args.mode ?? 'batched'
    warmDrain(args.dir, args.warmTemplate, mode)
    const floor = new Floor(copyDb(args.template, args.dir, 'scale'))
    const row = floor.client.prepare(`select seq, state, priority, run_at as runAt from job where queue = ? and id = ?`)
    const ahead = floor.client
      .prepare(
        `select count(*) from (select 1 from job where queue = @queue and state = 'waiting'
          and (priority, run_at, seq) < (@priority, @runAt, @seq) limit 10000)`,
      )
      .pluck()
    const read = floor.client.transaction((id: string) => {
      const job = row.get(QUEUE, id) as { seq: number; state: string; priority: number; runAt: number }
      return { state: job.state, ahead: ahead.get({ queue: QUEUE, priority: job.priority, runAt: job.runAt, seq: job.seq }) as number }
    })
    const times: number[] = []
    let counted = 0
    for (let i = 0; i < args.aheadSamples + 5; i++) {
      const t0 = nowMs()
      const job = read.deferred(args.lastId as string) as { state: string; ahead: number }
      const ms = nowMs() - t0
      counted = job.ahead
      if (i >= 5) times.push(ms)
    }
    const t0 = nowMs()
    const done = drain(floor, mode, args.count)
    const elapsedMs = nowMs() - t0
    floor.client.close()
    return {
      jobsPerSec: (done / elapsedMs) * 1000,
      done,
      elapsedMs,
      capped: false,
      aheadMedianMs: median(times),
      aheadP99Ms: quantile(times, 0.99),
      ahead: counted,
    }
  },
}
