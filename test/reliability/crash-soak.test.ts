/**
 * The short crash soak, inside `npm test`: a few hundred jobs, a few kills.
 * `npm run soak` runs the long one (test/reliability/soak-main.ts).
 */
import { afterAll, expect, it } from 'vitest'
import { removeTempDirs } from '../helpers/db.js'
import { describeSoak, runCrashSoak } from './soak.js'

afterAll(removeTempDirs)

// The time limit bounds liveness, not speed: each kill costs a worker process's start (a second or more of
// TypeScript loading on a busy 2-core machine, while other test files run beside it), and the kills come
// every 100–500 ms. It passes in 13–18 s on a quiet machine; under a load average of 8 it needed more than 40.
it('JOB-05 crash soak: 4 worker processes SIGKILLed at random lose no job, rerun only the steps a kill fell inside, hold concurrency, and a poisoned job fails alone (also JOB-04, JOB-06, JOB-07, JOB-14)', async () => {
  const result = await runCrashSoak({ jobs: 400, groups: 50, workers: 4, killEveryMs: [100, 500], attempts: 4, timeLimitMs: 100_000 })
  console.log(['short crash soak:', ...describeSoak(result)].join('\n  '))
  expect(result.problems).toEqual([])
  expect(result.figures.done).toBe(400)
  expect(result.figures.kills + result.figures.poisonKills).toBeGreaterThanOrEqual(5)
  expect(result.figures.maxRunning.global).toBeLessThanOrEqual(6)
  expect(result.figures.maxRunning.perGroup).toBe(1)
  expect(result.figures.poison).toMatchObject({ state: 'failed', attempts: 4, maxAttempts: 4 })
  expect(result.figures.integrity).toBe('ok')
}, 150_000)
