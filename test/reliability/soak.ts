/**
 * The crash soak: worker processes on one WAL file drain jobs of two steps
 * and a final app insert each, while a killer SIGKILLs a random worker every
 * 100–500 ms and starts a new one, and a poisoned job kills its process every
 * time it runs. At the end soak-check.ts reads the database and the side log
 * and says what, if anything, was lost, run twice or run too many at once.
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { defineQueue, enqueueMany, type EnqueueItem } from '../../src/index.js'
import { MIGRATIONS, openDb, tempDir } from '../helpers/db.js'
import { spawnFixture, stopFixture, type Exit, type FixtureProcess } from './processes.js'
import { checkSoak, type SoakVerdict } from './soak-check.js'
import { SOAK_QUEUE, type SoakJob, type SoakLogRecord } from './soak-protocol.js'

export interface SoakOptions {
  /** Regular jobs to add, besides the poisoned one. */
  jobs: number
  groups: number
  workers: number
  /** The killer waits a random time in [min, max] ms between kills. */
  killEveryMs: readonly [number, number]
  /** Attempts of the soak queue: the poisoned job kills this many processes. */
  attempts: number
  /** The soak gives up (and says so) if the jobs have not all ended by then. */
  timeLimitMs: number
  /** Called now and then with a line on how far the soak is. */
  onProgress?: (line: string) => void
}

export interface SoakResult extends SoakVerdict {
  /** The database file, left on disk for a look when something failed. */
  file: string
}

/** Runs one crash soak to its end (all jobs ended, or the time limit) and checks it. */
export async function runCrashSoak(options: SoakOptions): Promise<SoakResult> {
  const dir = tempDir('drizzle-jobs-soak-')
  const file = join(dir, 'soak.db')
  const logFile = join(dir, 'side.log')
  const { client, db } = openDb(file)
  migrate(db, { migrationsFolder: MIGRATIONS })
  client.exec(`create table soak_result (job_id text primary key, total integer not null, pid integer not null)`)
  addJobs(db, options)

  const started = Date.now()
  const workers = new Set<FixtureProcess>()
  const kills = new Map<number, number>()
  const exits = new Map<number, Exit>()
  const stopped = new Set<number>()
  let workersStarted = 0
  let finishing = false

  const startWorker = (): void => {
    const worker = spawnFixture('soak-worker.ts', [file, logFile, String(options.attempts)])
    workersStarted++
    workers.add(worker)
    worker.ready.catch(() => {})
    void worker.exited.then((exit) => {
      exits.set(worker.pid, exit)
      workers.delete(worker)
      if (!finishing) startWorker()
    })
  }
  for (let i = 0; i < options.workers; i++) startWorker()

  let killTimer: NodeJS.Timeout | null = null
  const armKiller = (): void => {
    const [min, max] = options.killEveryMs
    killTimer = setTimeout(() => {
      const candidates = [...workers].filter((worker) => worker.isReady() && !kills.has(worker.pid))
      const victim = candidates[Math.floor(Math.random() * candidates.length)]
      if (victim) {
        kills.set(victim.pid, Date.now())
        victim.child.kill('SIGKILL')
      }
      if (!finishing) armKiller()
    }, min + Math.random() * (max - min))
  }
  armKiller()

  const total = options.jobs + 1
  const countEnded = client.prepare(`select count(*) from jobs_job where queue = ? and state in ('done', 'failed', 'canceled')`).pluck()
  let lastProgress = started
  for (;;) {
    const ended = countEnded.get(SOAK_QUEUE.name) as number
    if (ended === total || Date.now() - started > options.timeLimitMs) break
    if (options.onProgress && Date.now() - lastProgress >= 5_000) {
      lastProgress = Date.now()
      options.onProgress(`${ended} of ${total} jobs ended, ${kills.size} kills, ${Math.round((Date.now() - started) / 1000)} s`)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const elapsedMs = Date.now() - started
  finishing = true
  if (killTimer) clearTimeout(killTimer)
  for (const worker of workers) stopped.add(worker.pid)
  await Promise.all([...workers].map((worker) => stopFixture(worker)))

  const log = existsSync(logFile) ? parseLog(readFileSync(logFile, 'utf8')) : []
  const verdict = checkSoak(client, log, { jobs: options.jobs, attempts: options.attempts, kills, exits, stopped, workersStarted, elapsedMs })
  if (elapsedMs > options.timeLimitMs) verdict.problems.unshift(`the jobs had not all ended after the time limit of ${options.timeLimitMs} ms`)
  client.close()
  return { ...verdict, file }
}

/** Adds the regular jobs, `job-<n>` in groups `g<n mod groups>`, with the poisoned job a tenth of the way in. */
function addJobs(db: ReturnType<typeof openDb>['db'], options: SoakOptions): void {
  const queue = defineQueue<SoakJob>(SOAK_QUEUE.name, { attempts: options.attempts })
  const items: EnqueueItem<SoakJob>[] = Array.from({ length: options.jobs }, (_, n) => ({ value: { n }, id: `job-${n}`, group: `g${n % options.groups}` }))
  items.splice(Math.floor(options.jobs / 10), 0, { value: { n: -1, poison: true }, id: 'poison', group: 'poison' })
  db.transaction((tx) => {
    for (let i = 0; i < items.length; i += 1_000) enqueueMany(tx, queue, items.slice(i, i + 1_000))
  })
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
    `kills: ${f.kills} by the killer, ${f.poisonKills} by the poisoned job; ${f.workersStarted} worker processes started`,
    `reruns: ${f.rerunHandlers} handler runs, ${f.rerunSteps} step functions (each after a kill inside it), ${f.rerunInserts} final inserts (found their row)`,
    `max running at once: ${f.maxRunning.global} (limit ${SOAK_QUEUE.concurrency.total}), per group ${f.maxRunning.perGroup} (limit ${SOAK_QUEUE.concurrency.perGroup})`,
    `attempts: at most ${f.maxAttemptsUsed} used by a regular job; leases left ${f.leasesLeft}; step rows left ${f.stepsLeft}; integrity_check ${f.integrity}`,
    `time: ${(f.elapsedMs / 1000).toFixed(1)} s`,
  ]
}
