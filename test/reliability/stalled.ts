/**
 * The stalled-worker scenario of JOB-16 and JOB-05, on any database: a worker process (test/fixtures/stall-child.ts)
 * whose run blocks its event loop past its lease, before a step, between steps or before returning, while a worker
 * in this process takes the job over. Written against the public API only (getJob, work, the runs' signals and the
 * side effects the step functions log), so that it holds whatever tables keep the leases.
 */
import { readFileSync, writeFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { expect } from 'vitest'
import { enqueue, enqueueMany, getJob, work, type PgDatabase, type SyncDatabase, type Worker } from '../../src/index.js'
import { tempDir } from '../helpers/db.js'
import { FILLERS, STALL_POINTS, stalls, type StallPoint } from '../fixtures/stall-queues.js'
import { STARTUP_MS } from '../helpers/processes.js'
import { spawnFixture, stopFixture, waitFor, type FixtureProcess } from './processes.js'

/**
 * When the stalled process is let go: once the job is done in this process (`after-done`), or as soon as this
 * process's run of attempt 2 has begun, which then waits for the stalled run to wake and end before it runs its
 * own steps (`during-takeover`: the woken run meets a job that is running under another owner).
 */
export type WakeAt = 'after-done' | 'during-takeover'

/** How many times each case runs: STALL_ROUNDS, or `rounds`. */
export function stallRounds(rounds: number): number {
  return Number(process.env.STALL_ROUNDS ?? rounds)
}

/** How long each wait of a case may take before it fails: a hang guard, for a loaded machine. */
const STEP_MS = 20_000

/** A test's timeout for `stallScenario(…, rounds, wakeAt)`: more than the child's start and every wait of every case at its deadline. */
export function stallScenarioMs(rounds: number, wakeAt: readonly WakeAt[]): number {
  return STARTUP_MS + rounds * wakeAt.length * STALL_POINTS.length * 4 * STEP_MS + 30_000
}

interface Takeover {
  runs: number
  aborted: boolean
  stepsDone: boolean
}

/**
 * Runs `rounds` rounds of every stall point with each wake moment, one job each, on `db` (this process's takeover
 * worker) and `address` (what the stalled child opens, with `env`): every round checks what JOB-16 and JOB-05 promise.
 */
export async function stallScenario(
  db: SyncDatabase | PgDatabase,
  address: string,
  env: NodeJS.ProcessEnv,
  rounds: number,
  wakeAt: readonly WakeAt[],
): Promise<void> {
  const dir = tempDir('drizzle-jobs-stall-')
  const child = spawnFixture('stall-child.ts', [address, dir], env)
  const settled = new Set<string>()
  let worker: Worker | undefined
  try {
    await child.ready
    let n = 0
    for (let round = 0; round < rounds; round++) {
      for (const wake of wakeAt) {
        for (const at of STALL_POINTS) {
          const id = `${++n}-${at}-${wake}`
          const takeover: Takeover = { runs: 0, aborted: false, stepsDone: false }
          // Ahead of every filler (a lower priority runs first): claimed at once, by the stalled worker and then by the takeover.
          await enqueue(db as SyncDatabase, stalls, { at }, { id, priority: -1 })
          await enqueueMany(
            db as SyncDatabase,
            stalls,
            Array.from({ length: FILLERS }, () => ({ value: { at: 'filler' as const } })),
          )
          await waitFor(`the stalled run of ${id} to block`, () => child.lines.includes(`stalling ${id}`), STEP_MS, 5)
          worker = work(
            db,
            stalls,
            async ({ at: filler }, run) => {
              if (filler === 'filler') return 'filler'
              takeover.runs++
              if (wake === 'during-takeover') {
                writeFileSync(join(dir, `release-${id}`), '')
                await waitFor(`the stalled run of ${id} to wake and its worker to stop`, () => settledIn(child, settled, id), STEP_MS, 5)
              }
              await run.step('a', () => effect(dir, id, 'a', run.attempt))
              await run.step('b', () => effect(dir, id, 'b', run.attempt))
              takeover.stepsDone = true
              takeover.aborted = run.signal.aborted
              return 'from the takeover'
            },
            { slots: 4, pollInterval: '10ms' },
          )
          await jobDone(db, id, child)
          if (wake === 'after-done') writeFileSync(join(dir, `release-${id}`), '')
          await waitFor(`the stalled worker of ${id} to stop`, () => settledIn(child, settled, id), STEP_MS, 5)
          await worker.stop()
          worker = undefined
          await checkRound(db, dir, id, at, takeover, child)
        }
      }
    }
  } finally {
    await worker?.stop({ timeout: 1_000 })
    await stopFixture(child, 2_000)
  }
  expect(child.stderr()).not.toMatch(/onError/)
}

/** Waits until this process's worker has ended the job (STEP_MS at most), reading it through the public API. */
async function jobDone(db: SyncDatabase | PgDatabase, id: string, child: FixtureProcess): Promise<void> {
  const deadline = performance.now() + STEP_MS
  for (;;) {
    const job = await getJob(db as SyncDatabase, stalls, id)
    if (job?.state === 'done') return
    if (performance.now() > deadline)
      throw new Error(`timed out waiting for ${id} to be done: ${JSON.stringify(job)}; child said ${child.lines.join(' | ')}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

function settledIn(child: FixtureProcess, settled: Set<string>, id: string): boolean {
  if (!settled.has(id) && child.lines.includes(`settled ${id}`)) settled.add(id)
  return settled.has(id)
}

function effect(dir: string, id: string, step: string, attempt: number): string {
  writeFileSync(join(dir, 'effects.log'), `${id} ${step} ${attempt} ${process.pid}\n`, { flag: 'a' })
  return `${step} by attempt ${attempt}`
}

/** The steps whose function ran for `id`, as `step attempt` in the order they ran. */
function effectsOf(dir: string, id: string): string[] {
  const file = join(dir, 'effects.log')
  if (!existsSync(file)) return []
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.startsWith(`${id} `))
    .map((line) => line.split(' ').slice(1, 3).join(' '))
}

/** What a round must leave: the stalled run's late steps never ran, the job ended once, done by attempt 2 here, whose lease held. */
async function checkRound(
  db: SyncDatabase | PgDatabase,
  dir: string,
  id: string,
  at: StallPoint,
  takeover: Takeover,
  child: FixtureProcess,
): Promise<void> {
  const before = { 'before-step': [], 'between-steps': ['a 1'], 'before-return': ['a 1', 'b 1'] }[at]
  const after = { 'before-step': ['a 2', 'b 2'], 'between-steps': ['b 2'], 'before-return': [] }[at]
  const job = await getJob(db as SyncDatabase, stalls, id)
  const what = `${id}: ${JSON.stringify(job)}; effects ${JSON.stringify(effectsOf(dir, id))}; child said ${child.lines.filter((line) => line.includes(id)).join(' | ')}`
  expect(effectsOf(dir, id), what).toEqual([...before, ...after])
  expect(job, what).toMatchObject({ state: 'done', attempt: 2, result: 'from the takeover', error: null })
  expect(takeover, what).toEqual({ runs: 1, aborted: false, stepsDone: true })
  expect(child.lines, what).toContain(`woke ${id} ${at === 'before-return' ? 'returned' : 'LEASE_LOST'}`)
}
