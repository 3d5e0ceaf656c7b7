/**
 * JOB-16 and JOB-05 on SQLite: a worker process whose event loop stalls past its lease, at every point of its run,
 * while a worker in this process takes the job over (test/reliability/stalled.ts). The engine's SQLite transactions
 * are synchronous, so a stalled process holds no lock of the engine's. Each case runs STALL_ROUNDS times (3 by
 * default): a timing-dependent failure shows as a failed round.
 */
import { afterEach, beforeEach, test } from 'vitest'
import { freshDb, removeTempDirs, type TestDb } from '../helpers/db.js'
import { stallRounds, stallScenario, stallScenarioMs } from './stalled.js'

let t: TestDb
beforeEach(() => {
  t = freshDb()
})
afterEach(() => {
  t.close()
  removeTempDirs()
})
const ROUNDS = stallRounds(3)

test(
  `JOB-16 [sqlite] a run whose process stalls past its lease (before a step, between steps, before returning) runs no step's function once another process took the job, nor ends it`,
  async () => {
    await stallScenario(t.db, t.file, {}, ROUNDS, ['after-done'])
  },
  stallScenarioMs(ROUNDS, ['after-done']),
)

test(
  `JOB-05 [sqlite] a job whose run's process stalls past its lease runs again in another process and ends once, by attempt 2, while the woken run is refused`,
  async () => {
    await stallScenario(t.db, t.file, {}, ROUNDS, ['during-takeover'])
  },
  stallScenarioMs(ROUNDS, ['during-takeover']),
)
