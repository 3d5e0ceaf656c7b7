/**
 * JOB-16 and JOB-05 on PostgreSQL, with both drivers: a worker process whose event loop stalls past its lease, at
 * every point of its run, while a worker in this process takes the job over (test/reliability/stalled.ts). Each
 * case runs STALL_ROUNDS times (2 by default): a timing-dependent failure shows as a failed round.
 */
import { describe, test } from 'vitest'
import { eachFreshPgDb } from '../helpers/pg.js'
import { stallRounds, stallScenario, stallScenarioMs } from './stalled.js'

const t = eachFreshPgDb()
const ROUNDS = stallRounds(2)

describe.each([
  { driver: 'pg', env: {} },
  { driver: 'postgres.js', env: { PG_DRIVER: 'postgres.js' } },
])('$driver', ({ driver, env }) => {
  const db = () => (driver === 'pg' ? t.db : t.postgresJs().db)

  test(
    `JOB-16 [postgres] ${driver}: a run whose process stalls past its lease (before a step, between steps, before returning) runs no step's function once another process took the job, nor ends it`,
    async () => {
      await stallScenario(db(), t.url, env, ROUNDS, ['after-done'])
    },
    stallScenarioMs(ROUNDS, ['after-done']),
  )

  test(
    `JOB-05 [postgres] ${driver}: a job whose run's process stalls past its lease runs again in another process and ends once, by attempt 2, while the woken run is refused`,
    async () => {
      await stallScenario(db(), t.url, env, ROUNDS, ['during-takeover'])
    },
    stallScenarioMs(ROUNDS, ['during-takeover']),
  )
})
