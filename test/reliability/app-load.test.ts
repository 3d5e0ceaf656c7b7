/**
 * Load with the app, small: 4 worker processes drain 20,000 jobs while an
 * app process writes rows, each with its job, in its own transactions.
 * `npm run soak` runs it with 50,000 and holds the app's p99 under 50 ms.
 */
import { afterAll, expect, it } from 'vitest'
import { removeTempDirs } from '../helpers/db.js'
import { STARTUP_MS } from '../helpers/processes.js'
import { describeLoad, runAppLoad } from './load.js'

afterAll(removeTempDirs)

/**
 * How long the drain, and then the app's last jobs, may take: a hang guard (seconds on an idle machine), not what is
 * tested. The test's timeout adds the app's start and the workers' (side by side), STARTUP_MS each at most.
 */
const TIME_LIMIT_MS = 60_000

it(
  'JOB-02 load with the app: while 4 worker processes drain a backlog, the app keeps committing rows, each with its job, and nobody sees SQLITE_BUSY',
  async () => {
    const result = await runAppLoad({ backlog: 20_000, workers: 4, appPauseMs: 1, timeLimitMs: TIME_LIMIT_MS })
    console.log(['load with the app:', ...describeLoad(result)].join('\n  '))
    expect(result.problems).toEqual([])
    expect(result.errors).toEqual([])
    expect(result.appTransactions).toBeGreaterThan(0)
    expect(result.done).toBe(20_000 + result.appTransactionsInAll)
  },
  2 * STARTUP_MS + 2 * TIME_LIMIT_MS + 30_000,
)
