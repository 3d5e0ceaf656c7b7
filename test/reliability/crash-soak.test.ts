/**
 * The short crash soak, inside `npm test`, once per dialect: a few hundred jobs, a few kills, and on
 * PostgreSQL a few worker connections ended by pg_terminate_backend. `npm run soak` runs the long one
 * (test/reliability/soak-main.ts; `npm run soak -- --pg` on PostgreSQL).
 */
import { afterAll, expect, it } from 'vitest'
import { removeTempDirs } from '../helpers/db.js'
import { pgServerUrl } from '../helpers/pg.js'
import { describeSoak, runCrashSoak, type SoakResult } from './soak.js'

afterAll(removeTempDirs)

/** What every short soak must show, whatever its dialect. */
function expectEveryPromiseHeld(result: SoakResult, jobs: number, attempts: number): void {
  expect(result.problems).toEqual([])
  expect(result.figures.done).toBe(jobs)
  expect(result.figures.kills + result.figures.poisonKills).toBeGreaterThanOrEqual(5)
  expect(result.figures.maxRunning.global).toBeLessThanOrEqual(6)
  expect(result.figures.maxRunning.perGroup).toBe(1)
  expect(result.figures.poison).toMatchObject({ state: 'failed', attempts, maxAttempts: attempts })
  expect(result.figures.leasesLeft).toBe(0)
  expect(result.figures.stepsLeft).toBe(0)
}

// The time limit bounds liveness, not speed: each kill costs a worker process's start (a second or more of
// TypeScript loading on a busy 2-core machine, while other test files run beside it), and the kills come
// every 100–500 ms. It passes in 13–18 s on a quiet machine; under a load average of 8 it needed more than 40.
// A kill falls inside a run more often when runs are slow: under a load average of 20 one regular job lost 4
// attempts to kills, so the soak gives 6 (the poisoned job takes 6 processes down).
it('JOB-05 [sqlite] crash soak: 4 worker processes SIGKILLed at random lose no job, rerun only the steps a kill fell inside, hold concurrency, and a poisoned job fails alone (also JOB-04, JOB-06, JOB-07, JOB-14)', async () => {
  const result = await runCrashSoak({
    dialect: 'sqlite',
    jobs: 400,
    groups: 50,
    workers: 4,
    killEveryMs: [100, 500],
    attempts: 6,
    timeLimitMs: 140_000,
  })
  console.log(['short crash soak [sqlite]:', ...describeSoak(result)].join('\n  '))
  expectEveryPromiseHeld(result, 400, 6)
  expect(result.figures.integrity).toBe('ok')
}, 200_000)

// A PostgreSQL worker connects and checks its tables before its first claim, and its ends cost a round trip
// each: on a loaded machine a kill every 100–500 ms would often end each worker before it claimed anything, or
// before it wrote the ends of its runs. So the killer spares a worker for its first second and stops after 6
// kills (each costs a worker process's start, seconds of CPU on a busy 2-core machine), while a worker
// connection is ended every 0.3–1 s to the end. With 8 attempts no regular job can use up its attempts on
// kills; the poisoned job takes 8 processes down. It passes in 22 s on a quiet machine (load average 4); under
// a load average of 13 to 19 it needed 55 to 130 s.
it('JOB-05 [postgres] crash soak: 4 worker processes SIGKILLed at random, their connections ended by pg_terminate_backend, lose no job, rerun only the steps a kill fell inside, surface nothing, hold concurrency, and a poisoned job fails alone (also JOB-04, JOB-06, JOB-07, JOB-14)', async () => {
  const result = await runCrashSoak({
    dialect: 'postgres',
    server: pgServerUrl(),
    jobs: 200,
    groups: 50,
    workers: 4,
    killEveryMs: [100, 500],
    minLifeMs: 1_000,
    maxKills: 6,
    terminateEveryMs: [300, 1_000],
    attempts: 8,
    timeLimitMs: 150_000,
  })
  console.log(['short crash soak [postgres]:', ...describeSoak(result)].join('\n  '))
  expectEveryPromiseHeld(result, 200, 8)
  expect(result.figures.terminations).toBeGreaterThanOrEqual(1)
}, 200_000)
