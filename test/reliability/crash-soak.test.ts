/**
 * The short crash soak, inside `npm test`: a few hundred jobs, a few kills.
 * `npm run soak` runs the long one (test/reliability/soak-main.ts).
 */
import { afterAll, expect, it } from 'vitest'
import { removeTempDirs } from '../helpers/db.js'
import { describeSoak, runCrashSoak } from './soak.js'

afterAll(removeTempDirs)

it('JOB-05 crash soak: 4 worker processes SIGKILLed at random lose no job, rerun only the steps a kill fell inside, hold concurrency, and a poisoned job fails alone (also JOB-04, JOB-06, JOB-07, JOB-14)', async () => {
  const result = await runCrashSoak({ jobs: 400, groups: 50, workers: 4, killEveryMs: [100, 500], attempts: 4, timeLimitMs: 40_000 })
  console.log(['short crash soak:', ...describeSoak(result)].join('\n  '))
  expect(result.problems).toEqual([])
  expect(result.figures.done).toBe(400)
  expect(result.figures.kills + result.figures.poisonKills).toBeGreaterThanOrEqual(5)
  expect(result.figures.maxRunning.global).toBeLessThanOrEqual(6)
  expect(result.figures.maxRunning.perGroup).toBe(1)
  expect(result.figures.poison).toMatchObject({ state: 'failed', attempts: 4, maxAttempts: 4 })
  expect(result.figures.integrity).toBe('ok')
}, 60_000)
