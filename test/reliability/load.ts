/**
 * Load with the app: worker processes drain a backlog of jobs while another
 * process keeps writing app rows, each adding a job in the same transaction.
 * Nobody may see SQLITE_BUSY; the app's transactions are timed.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { defineQueue, enqueueMany } from '../../src/index.js'
import { MIGRATIONS, openDb, tempDir } from '../helpers/db.js'
import { LOAD_MESSAGES_DDL, LOAD_QUEUE, type LoadJob, type LoadSummary } from './load-protocol.js'
import { spawnFixture, stopFixture, waitFor } from './processes.js'

export interface LoadOptions {
  /** Jobs added before the workers start. */
  backlog: number
  workers: number
  /** The app's pause between two transactions. */
  appPauseMs: number
  timeLimitMs: number
}

export interface LoadResult {
  backlog: number
  /** App transactions committed while the backlog drained; the latencies are theirs. */
  appTransactions: number
  /** App transactions committed in all, before, during and after the drain. */
  appTransactionsInAll: number
  p50Ms: number
  p99Ms: number
  maxMs: number
  /** Jobs done at the end: the backlog and one per app row. */
  done: number
  /** Time to drain the backlog, with the app writing all along. */
  drainMs: number
  /** Errors surfaced anywhere: by the app's transactions or by a worker. */
  errors: string[]
  problems: string[]
}

/** Runs one load check and checks that every job, the app's included, ended done. */
export async function runAppLoad(options: LoadOptions): Promise<LoadResult> {
  const file = join(tempDir('drizzle-jobs-load-'), 'load.db')
  const { client, db } = openDb(file)
  migrate(db, { migrationsFolder: MIGRATIONS })
  client.exec(LOAD_MESSAGES_DDL)
  const queue = defineQueue<LoadJob>(LOAD_QUEUE)
  for (let i = 0; i < options.backlog; i += 5_000) {
    const count = Math.min(5_000, options.backlog - i)
    enqueueMany(
      db,
      queue,
      Array.from({ length: count }, (_, k) => ({ value: { messageId: null }, id: `backlog:${i + k}` })),
    )
  }
  const problems: string[] = []
  const app = spawnFixture('load-app.ts', [file, String(options.appPauseMs)])
  await app.ready
  const workers = Array.from({ length: options.workers }, () => spawnFixture('load-worker.ts', [file]))
  await Promise.all(workers.map((worker) => worker.ready))
  // The workers wait for this file, so the drain starts here for all of them, not as each process comes up.
  const started = Date.now()
  writeFileSync(`${file}.go`, '')

  const backlogLeft = client.prepare(`select count(*) from jobs_job where queue = ? and id like 'backlog:%' and state != 'done'`).pluck()
  const notDone = client.prepare(`select count(*) from jobs_job where queue = ? and state != 'done'`).pluck()
  let drainMs = 0
  try {
    await waitFor('the backlog to drain', () => backlogLeft.get(LOAD_QUEUE) === 0, options.timeLimitMs, 50)
    drainMs = Date.now() - started
  } catch (error) {
    problems.push((error as Error).message)
  }
  await stopFixture(app)
  const summaryLine = app.lines.find((line) => line.startsWith('summary '))
  const summary: LoadSummary = summaryLine
    ? (JSON.parse(summaryLine.slice('summary '.length)) as LoadSummary)
    : { samples: [], errors: [`the app printed no summary: ${app.stderr()}`] }
  const during = summary.samples.filter(([at]) => at >= started && at <= started + drainMs).map(([, ms]) => ms)
  during.sort((a, b) => a - b)
  const quantile = (q: number): number => during[Math.min(during.length - 1, Math.floor(q * during.length))] ?? 0
  try {
    await waitFor("the app's jobs to be done", () => notDone.get(LOAD_QUEUE) === 0, options.timeLimitMs, 50)
  } catch (error) {
    problems.push((error as Error).message)
  }
  await Promise.all(workers.map((worker) => stopFixture(worker)))

  const errors = [...summary.errors, ...workers.flatMap((worker) => worker.lines.filter((line) => line.startsWith('error ')))]
  const messages = client.prepare(`select count(*) from load_message`).pluck().get() as number
  const appJobs = client.prepare(`select count(*) from jobs_job where queue = ? and id like 'msg:%'`).pluck().get(LOAD_QUEUE) as number
  const done = client.prepare(`select count(*) from jobs_job where queue = ? and state = 'done'`).pluck().get(LOAD_QUEUE) as number
  if (messages !== summary.samples.length)
    problems.push(`${messages} app rows, but the app committed ${summary.samples.length} transactions`)
  if (appJobs !== messages) problems.push(`${appJobs} jobs for ${messages} app rows`)
  if (done !== options.backlog + appJobs) problems.push(`${done} jobs done of ${options.backlog + appJobs}`)
  if (client.prepare(`select count(*) from jobs_job where owner is not null`).pluck().get() !== 0) problems.push('jobs still name a worker')
  client.close()
  return {
    backlog: options.backlog,
    appTransactions: during.length,
    appTransactionsInAll: summary.samples.length,
    p50Ms: quantile(0.5),
    p99Ms: quantile(0.99),
    maxMs: during.at(-1) ?? 0,
    done,
    drainMs,
    errors,
    problems,
  }
}

/** The figures of a load check as the lines `npm run soak` prints. */
export function describeLoad(result: LoadResult): string[] {
  return [
    `backlog: ${result.backlog} jobs drained by the workers in ${(result.drainMs / 1000).toFixed(1)} s; ${result.done} jobs done in all`,
    `app transactions while it drained: ${result.appTransactions} (${result.appTransactionsInAll} in all), each a row and its job; p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms, max ${result.maxMs.toFixed(2)} ms`,
    `errors surfaced (SQLITE_BUSY or other): ${result.errors.length}`,
  ]
}
