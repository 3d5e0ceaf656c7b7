/**
 * The crash soak: worker processes on one database (a SQLite WAL file, or a
 * PostgreSQL database) drain jobs of two steps and a final app insert each,
 * while a killer SIGKILLs a random worker every 100–500 ms and starts a new
 * one, a poisoned job kills its process every time it runs, and on
 * PostgreSQL the server's end of a random worker connection is ended now and
 * then (pg_terminate_backend). At the end soak-check.ts reads the database and the side log
 * and says what, if anything, was lost, run twice or run too many at once.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { EnqueueItem } from '../../src/index.js'
import { spawnFixture, stopFixture, type Exit, type FixtureProcess } from './processes.js'
import { checkSoak, type SoakVerdict } from './soak-check.js'
import { openSoakDatabase } from './soak-database.js'
import { SOAK_QUEUE, type SoakDialect, type SoakJob, type SoakLogRecord } from './soak-protocol.js'

export interface SoakOptions {
  /** The database the soak runs on: a SQLite file, or a fresh PostgreSQL database. */
  dialect: SoakDialect
  /** PostgreSQL: the server to make the soak's database on (its URL names the maintenance database). */
  server?: string
  /** Regular jobs to add, besides the poisoned one. */
  jobs: number
  groups: number
  workers: number
  /** The killer waits a random time in [min, max] ms between kills. */
  killEveryMs: readonly [number, number]
  /**
   * The killer kills only workers that have been ready for this long (0 by default): a PostgreSQL worker first
   * connects and checks its tables, and on a loaded machine a kill within a few hundred ms of its start would
   * often end it before its first claim.
   */
  minLifeMs?: number
  /** The killer stops after this many kills (no end by default): each kill costs a worker process's start. */
  maxKills?: number
  /** PostgreSQL: a random worker connection is ended with pg_terminate_backend every [min, max] ms. */
  terminateEveryMs?: readonly [number, number]
  /** Attempts of the soak queue: the poisoned job kills this many processes. */
  attempts: number
  /** The soak gives up (and says so) if the jobs have not all ended by then. */
  timeLimitMs: number
  /** Called now and then with a line on how far the soak is. */
  onProgress?: (line: string) => void
}

export interface SoakResult extends SoakVerdict {
  dialect: SoakDialect
  /** Where the database is: a SQLite file, or a PostgreSQL URL. Kept when the soak found a problem, removed otherwise. */
  where: string
}

/** Runs one crash soak to its end (all jobs ended, or the time limit) and checks it. */
export async function runCrashSoak(options: SoakOptions): Promise<SoakResult> {
  // The side log's folder is removed here when every promise held, and kept (with the database) for a look otherwise.
  const logDir = mkdtempSync(join(tmpdir(), 'drizzle-jobs-soak-log-'))
  const logFile = join(logDir, 'side.log')
  const database = await openSoakDatabase(options.dialect, { server: options.server })
  await database.addJobs(jobsOf(options), options.attempts)

  const started = Date.now()
  const workers = new Set<FixtureProcess>()
  const kills = new Map<number, number>()
  const exits = new Map<number, Exit>()
  const stopped = new Set<number>()
  const readyAt = new Map<number, number>()
  /** What the worker processes that exited with an error code printed on stderr. */
  const stderrs = new Map<number, string>()
  let workersStarted = 0
  let terminations = 0
  let finishing = false

  const startWorker = (): void => {
    const worker = spawnFixture('soak-worker.ts', [options.dialect, database.target, logFile, String(options.attempts)])
    workersStarted++
    workers.add(worker)
    worker.ready.then(
      () => void readyAt.set(worker.pid, Date.now()),
      () => {},
    )
    void worker.exited.then((exit) => {
      // A killed process dies when the signal lands, not when it was sent: what it logged meanwhile was before its death.
      if (kills.has(worker.pid)) kills.set(worker.pid, Date.now())
      exits.set(worker.pid, exit)
      if (exit.code !== null && exit.code !== 0) stderrs.set(worker.pid, worker.stderr().slice(-2_000))
      workers.delete(worker)
      if (!finishing) startWorker()
    })
  }
  for (let i = 0; i < options.workers; i++) startWorker()

  const timers = new Set<NodeJS.Timeout>()
  /** Calls `act` after a random wait in [min, max] ms, again and again until the soak finishes. */
  const every = ([min, max]: readonly [number, number], act: () => unknown): void => {
    const timer = setTimeout(
      async () => {
        timers.delete(timer)
        await act()
        if (!finishing) every([min, max], act)
      },
      min + Math.random() * (max - min),
    )
    timers.add(timer)
  }
  every(options.killEveryMs, () => {
    const now = Date.now()
    const candidates = [...workers].filter(
      (worker) => now - (readyAt.get(worker.pid) ?? now) >= (options.minLifeMs ?? 0) && worker.isReady() && !kills.has(worker.pid),
    )
    const victim = candidates[Math.floor(Math.random() * candidates.length)]
    if (victim && kills.size < (options.maxKills ?? Infinity)) {
      kills.set(victim.pid, Date.now())
      victim.child.kill('SIGKILL')
    }
  })
  const terminate = database.terminateWorkerConnection?.bind(database)
  if (options.terminateEveryMs && terminate) {
    every(options.terminateEveryMs, async () => {
      if (await terminate().catch(() => false)) terminations++
    })
  }

  const total = options.jobs + 1
  let lastProgress = started
  for (;;) {
    const ended = await database.countEnded()
    if (ended === total || Date.now() - started > options.timeLimitMs) break
    if (options.onProgress && Date.now() - lastProgress >= 5_000) {
      lastProgress = Date.now()
      const ending = terminate ? `, ${terminations} connections ended` : ''
      options.onProgress(`${ended} of ${total} jobs ended, ${kills.size} kills${ending}, ${Math.round((Date.now() - started) / 1000)} s`)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const elapsedMs = Date.now() - started
  finishing = true
  for (const timer of timers) clearTimeout(timer)
  for (const worker of workers) stopped.add(worker.pid)
  await Promise.all([...workers].map((worker) => stopFixture(worker)))

  const log = existsSync(logFile) ? parseLog(readFileSync(logFile, 'utf8')) : []
  const verdict = checkSoak(await database.snapshot(), log, {
    jobs: options.jobs,
    attempts: options.attempts,
    kills,
    terminations,
    exits,
    stopped,
    workersStarted,
    elapsedMs,
  })
  if (elapsedMs > options.timeLimitMs)
    verdict.problems.unshift(`the jobs had not all ended after the time limit of ${options.timeLimitMs} ms`)
  const [crashed] = stderrs
  if (crashed)
    verdict.problems.push(
      `worker process ${crashed[0]} exited with code ${exits.get(crashed[0])?.code} after printing: ${crashed[1].trim() || 'nothing'}`,
    )
  const failed = verdict.problems.length > 0
  await database.close(failed)
  if (failed) verdict.problems.push(`the side log is kept at ${logFile}`)
  else rmSync(logDir, { recursive: true, force: true })
  return { ...verdict, dialect: options.dialect, where: database.where }
}

/** The regular jobs, `job-<n>` in groups `g<n mod groups>`, with the poisoned job a tenth of the way in. */
function jobsOf(options: SoakOptions): EnqueueItem<SoakJob>[] {
  const items: EnqueueItem<SoakJob>[] = Array.from({ length: options.jobs }, (_, n) => ({
    value: { n },
    id: `job-${n}`,
    group: `g${n % options.groups}`,
  }))
  items.splice(Math.floor(options.jobs / 10), 0, { value: { n: -1, poison: true }, id: 'poison', group: 'poison' })
  return items
}

function parseLog(text: string): SoakLogRecord[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as SoakLogRecord)
}

/** The figures of a soak as the lines `npm run soak` prints. */
export function describeSoak(result: SoakResult): string[] {
  const f = result.figures
  return [
    `jobs: ${f.done} of ${f.jobs} done; the poisoned job ${f.poison?.state ?? 'missing'} after ${f.poison?.attempts ?? 0} of ${f.poison?.maxAttempts ?? 0} attempts`,
    `kills: ${f.kills} by the killer, ${f.poisonKills} by the poisoned job; ${f.workersStarted} worker processes started${result.dialect === 'postgres' ? `; ${f.terminations} worker connections ended by pg_terminate_backend` : ''}`,
    `reruns: ${f.rerunHandlers} handler runs, ${f.rerunSteps} step functions (each after a kill inside it), ${f.rerunInserts} final inserts (found their row)`,
    `max running at once: ${f.maxRunning.global} (limit ${SOAK_QUEUE.concurrency.total}), per group ${f.maxRunning.perGroup} (limit ${SOAK_QUEUE.concurrency.perGroup})`,
    `attempts: at most ${f.maxAttemptsUsed} used by a regular job; leases left ${f.leasesLeft}; step rows left ${f.stepsLeft}${f.integrity === null ? '' : `; integrity_check ${f.integrity}`}`,
    `time: ${(f.elapsedMs / 1000).toFixed(1)} s, ${((f.jobs + 1) / (f.elapsedMs / 1000)).toFixed(0)} jobs/s`,
  ]
}
