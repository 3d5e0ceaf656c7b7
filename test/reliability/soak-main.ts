/**
 * `npm run soak`: the long crash soak (5,000 jobs in 50 groups, 4 worker
 * processes, a kill every 100–500 ms, a poisoned job), then load with the
 * app (4 worker processes drain 50,000 jobs while an app process writes rows
 * with their jobs; its p99 must stay under 50 ms). Prints the figures and
 * exits 1 if any promise was broken.
 *
 * Options: --jobs N (5000), --time-limit SECONDS (600), --load-jobs N (50000).
 */
import { parseArgs } from 'node:util'
import { removeTempDirs } from '../helpers/db.js'
import { describeLoad, runAppLoad } from './load.js'
import { describeSoak, runCrashSoak } from './soak.js'

const APP_P99_LIMIT_MS = 50

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '5000' },
    'time-limit': { type: 'string', default: '600' },
    'load-jobs': { type: 'string', default: '50000' },
  },
})
const jobs = Number(values.jobs)
const timeLimitMs = Number(values['time-limit']) * 1000
const loadJobs = Number(values['load-jobs'])

console.log(`crash soak: ${jobs} jobs in 50 groups, 4 worker processes, { total: 6, perGroup: 1 }, a SIGKILL every 100–500 ms, one poisoned job`)
const soak = await runCrashSoak({
  jobs,
  groups: 50,
  workers: 4,
  killEveryMs: [100, 500],
  attempts: 8,
  timeLimitMs,
  onProgress: (line) => console.log(`  … ${line}`),
})
for (const line of describeSoak(soak)) console.log(`  ${line}`)

console.log(`load with the app: 4 worker processes drain ${loadJobs} jobs while an app process writes rows, each with its job`)
const load = await runAppLoad({ backlog: loadJobs, workers: 4, appPauseMs: 1, timeLimitMs })
for (const line of describeLoad(load)) console.log(`  ${line}`)

const problems = [
  ...soak.problems.map((problem) => `crash soak: ${problem}`),
  ...load.problems.map((problem) => `load: ${problem}`),
  ...load.errors.map((error) => `load: surfaced ${error}`),
  ...(load.p99Ms >= APP_P99_LIMIT_MS ? [`load: the app's p99 is ${load.p99Ms.toFixed(2)} ms, over ${APP_P99_LIMIT_MS} ms`] : []),
]
if (problems.length > 0) {
  console.log(`\nbroken promises (${problems.length}); the soak's database is kept at ${soak.file}:`)
  for (const problem of problems) console.log(`  - ${problem}`)
  process.exitCode = 1
} else {
  removeTempDirs()
  console.log('\nevery promise held')
}
