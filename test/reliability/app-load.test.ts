/**
 * Load with the app, small: 4 worker processes drain 20,000 jobs while an
 * app process writes rows, each with its job, in its own transactions.
 * `npm run soak` runs it with 50,000 and holds the app's p99 under 50 ms.
 */
import { afterAll, expect, it } from 'vitest'
import { removeTempDirs } from '../helpers/db.js'
import { describeLoad, runAppLoad } from './load.js'

afterAll(removeTempDirs)

it('JOB-02 load with the app: while 4 worker processes drain a backlog, the app keeps committing rows, each with its job, and nobody sees SQLITE_BUSY', async () => {
  const result = await runAppLoad({ backlog: 20_000, workers: 4, appPauseMs: 1, timeLimitMs: 40_000 })
  console.log(['load with the app:', ...describeLoad(result)].join('\n  '))
  expect(result.problems).toEqual([])
  expect(result.errors).toEqual([])
  expect(result.appTransactions).toBeGreaterThan(0)
  expect(result.done).toBe(20_000 + result.appTransactionsInAll)
}, 60_000)
