/**
 * `npm run soak`: the long crash soak on SQLite (5,000 jobs in 50 groups, 4
 * worker processes, a kill every 100–500 ms, a poisoned job), then load with
 * the app: one worker process, then 4, drain 50,000 jobs while an app process
 * writes rows with their jobs. Beside one worker the app's p99 must stay under
 * 50 ms; beside 4 draining flat out, under 150 ms (each worker leaves the lock
 * free after each flush, but 4 of them still hold it most of the time). Prints the figures and exits 1 if any promise was broken.
 *
 * `npm run soak -- --pg`: the same crash soak on a fresh PostgreSQL database,
 * made on the server of DATABASE_URL (else postgres://postgres@127.0.0.1:5432/postgres)
 * and dropped afterwards (kept when a promise was broken), with a worker
 * connection ended by pg_terminate_backend every 0.5–2 s besides the kills
 * (which spare a worker for its first 2 s: it connects and checks its tables
 * first, and on a loaded machine a kill every 100–500 ms would end most
 * workers before their first claim).
 * The load with the app is SQLite's only.
 *
 * Options: --pg, --jobs N (5000), --time-limit SECONDS (600), --load-jobs N (50000), --min-life MS (the
 * killer spares a worker for this long after it is ready: 2000 on PostgreSQL, 0 on SQLite).
 */
import { parseArgs } from 'node:util'
import { removeTempDirs } from '../helpers/db.js'
import { describeLoad, runAppLoad } from './load.js'
import { DEFAULT_PG_SERVER } from './soak-database.js'
import { describeSoak, runCrashSoak } from './soak.js'

/** The app's p99 while the backlog drains, by how many worker processes drain it. */
const APP_P99_LIMIT_MS = { 1: 50, 4: 150 } as const

const { values } = parseArgs({
  options: {
    pg: { type: 'boolean', default: false },
    jobs: { type: 'string', default: '5000' },
    'time-limit': { type: 'string', default: '600' },
    'load-jobs': { type: 'string', default: '50000' },
    'min-life': { type: 'string' },
  },
})
const jobs = Number(values.jobs)
const timeLimitMs = Number(values['time-limit']) * 1000
const loadJobs = Number(values['load-jobs'])
const onPg = values.pg === true
const minLifeMs = values['min-life'] === undefined ? undefined : Number(values['min-life'])

const where = onPg ? `a fresh PostgreSQL database on ${new URL(DEFAULT_PG_SERVER).host}` : 'a SQLite file'
const terminations = onPg ? ', a worker connection ended by pg_terminate_backend every 0.5–2 s' : ''
const spared = (minLifeMs ?? (onPg ? 2_000 : 0)) > 0 ? ` (of a worker ready for ${minLifeMs ?? 2_000} ms)` : ''
console.log(
  `crash soak on ${where}: ${jobs} jobs in 50 groups, 4 worker processes, { total: 6, perGroup: 1 }, a SIGKILL every 100–500 ms${spared}${terminations}, one poisoned job`,
)
const soak = await runCrashSoak({
  dialect: onPg ? 'postgres' : 'sqlite',
  server: onPg ? DEFAULT_PG_SERVER : undefined,
  terminateEveryMs: onPg ? [500, 2_000] : undefined,
  // A PostgreSQL worker connects and checks its tables before its first claim: the killer spares it for a while.
  minLifeMs: minLifeMs ?? (onPg ? 2_000 : 0),
  jobs,
  groups: 50,
  workers: 4,
  killEveryMs: [100, 500],
  attempts: 8,
  timeLimitMs,
  onProgress: (line) => console.log(`  … ${line}`),
})
for (const line of describeSoak(soak)) console.log(`  ${line}`)

const loads: Array<{ workers: 1 | 4; result: Awaited<ReturnType<typeof runAppLoad>> }> = []
if (!onPg) {
  for (const workers of [1, 4] as const) {
    console.log(
      `load with the app: ${workers} worker process${workers === 1 ? '' : 'es'} drain ${loadJobs} jobs while an app process writes rows, each with its job`,
    )
    const result = await runAppLoad({ backlog: loadJobs, workers, appPauseMs: 1, timeLimitMs })
    for (const line of describeLoad(result)) console.log(`  ${line}`)
    loads.push({ workers, result })
  }
}

const problems = [
  ...soak.problems.map((problem) => `crash soak: ${problem}`),
  ...loads.flatMap(({ workers, result }) => [
    ...result.problems.map((problem) => `load beside ${workers}: ${problem}`),
    ...result.errors.map((error) => `load beside ${workers}: surfaced ${error}`),
    ...(result.p99Ms >= APP_P99_LIMIT_MS[workers]
      ? [`load beside ${workers}: the app's p99 is ${result.p99Ms.toFixed(2)} ms, over ${APP_P99_LIMIT_MS[workers]} ms`]
      : []),
  ]),
]
if (problems.length > 0) {
  console.log(`\nbroken promises (${problems.length}); the soak's database is kept at ${soak.where}:`)
  for (const problem of problems) console.log(`  - ${problem}`)
  process.exitCode = 1
} else {
  removeTempDirs()
  console.log('\nevery promise held')
}
