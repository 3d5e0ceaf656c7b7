/**
 * The contracts that take real processes, once per dialect (JOB-20): a producer or a worker SIGKILLed,
 * and limits held across worker processes. The test names carry the dialect: `JOB-05 [postgres] …`.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { enqueueMany, work } from '../../src/index.js'
import { tempDir } from '../helpers/db.js'
import { PROCESS_DATABASES, eachContractDb } from '../helpers/dialects.js'
import { STARTUP_MS, started, startFixture } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'
import { crashes, GAUGE_TABLE, limited, RAN_BY_TABLE, RUNS_BY_TABLE, shared } from '../fixtures/contract-queues.js'

describe.each(PROCESS_DATABASES)('%s', (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`

  test(
    `JOB-01 ${on} a job whose add committed survives a SIGKILL of its process before any worker ran it`,
    async () => {
      const producer = startFixture('contract-child.ts', ['enqueue', t.address, 'survivor'])
      await started(producer, 'added', 'the child to start and add its job')
      producer.process.kill('SIGKILL')
      expect(await producer.exited).toBe('SIGKILL')

      expect(await t.job('crashes', 'survivor')).toMatchObject({ state: 'waiting', attempts: 0 })
      const ran: string[] = []
      workers.push(work(t.db, crashes, (_value, run) => void ran.push(run.id)))
      await waitFor(async () => (await t.job('crashes', 'survivor'))?.state === 'done', 'the surviving job to run')
      expect(ran).toEqual(['survivor'])
    },
    STARTUP_MS + 60_000,
  )

  test(
    `JOB-04 ${on} an attempt is counted before its handler starts: a job that SIGKILLs its process every time fails after \`attempts\``,
    async () => {
      await t.run(`insert into jobs_job (queue, id, value, max_attempts) values ('crashes', 'poison', '{"n":1}', 3)`)
      const exits: Array<number | string> = []
      for (let i = 0; i < 3; i++) {
        const child = startFixture('contract-child.ts', ['work', t.address, 'crash'])
        // Its handler may kill it before it says it works: its start and its run are waited for as one.
        await waitFor(() => child.ended(), `worker process ${i + 1} to start, claim the job and kill itself`, STARTUP_MS + 20_000)
        exits.push(await child.exited)
        expect((await t.job('crashes', 'poison'))!.attempts).toBe(i + 1)
      }
      expect(exits).toEqual(['SIGKILL', 'SIGKILL', 'SIGKILL'])
      // A fresh worker on this host finds the last owner gone and ends the job at once, without waiting for the lease.
      workers.push(
        work(t.db, crashes, () => {
          throw new Error('the handler must not run a fourth time')
        }),
      )
      await waitFor(async () => (await t.job('crashes', 'poison'))?.state === 'failed', 'the poisoned job to fail for good')
      const ended = (await t.job('crashes', 'poison'))!
      expect(ended.attempts).toBe(3)
      expect(ended.error).toMatch(/attempt 3 of 3 ended without an outcome: its worker process .* is gone/)
      expect(await t.held()).toBe(0)
    },
    3 * (STARTUP_MS + 20_000) + 60_000,
  )

  test(
    `JOB-05 ${on} JOB-06 a run killed after a step finished runs again, and the finished step is not run again`,
    async () => {
      const stepLog = join(tempDir(), 'steps.log')
      writeFileSync(stepLog, '')
      await t.run(`insert into jobs_job (queue, id, value, max_attempts) values ('steps', 'resumable', '{"n":1}', 5)`)
      const first = startFixture('contract-child.ts', ['work', t.address, 'step-then-hang'], { STEP_LOG: stepLog })
      await started(first, 'step-done', 'the first worker process to start and finish the step of the first attempt')
      first.process.kill('SIGKILL')
      await first.exited
      expect(await t.job('steps', 'resumable')).toMatchObject({ state: 'running', attempts: 1 })

      const second = startFixture('contract-child.ts', ['work', t.address, 'steps'], { STEP_LOG: stepLog })
      await started(second, 'working', 'the second worker process to start')
      await waitFor(async () => (await t.job('steps', 'resumable'))?.state === 'done', 'the job to run again and finish')
      second.process.kill('SIGKILL')
      expect((await t.job('steps', 'resumable'))!.attempts).toBe(2)
      expect(readFileSync(stepLog, 'utf8').trim().split('\n')).toEqual(['one resumable 1', 'two resumable 2'])
      expect(await t.count('jobs_step')).toBe(0)
    },
    2 * STARTUP_MS + 60_000,
  )

  test(
    `JOB-07 ${on} concurrency and perGroup hold across every worker of every process, and are reached`,
    async () => {
      await t.run(GAUGE_TABLE[t.dialect])
      await t.run(RAN_BY_TABLE)
      // One slot per process: three runs at once needs three processes running at once.
      const children = Array.from({ length: 4 }, () => startFixture('contract-child.ts', ['work', t.address, 'overlap', '1']))
      await started(children, 'working', 'the four worker processes to start')
      // 6 groups of 10 jobs, 40 ms each: enough that three groups always have work, so the total cap is what binds.
      await enqueueMany(
        t.db,
        limited,
        Array.from({ length: 60 }, (_, n) => ({ value: { n }, group: `g${n % 6}` })),
      )
      await waitFor(
        async () =>
          Number(
            (await t.query<{ n: number | string }>(`select count(*) as n from jobs_job where queue = 'limited' and state = 'done'`))[0]!.n,
          ) === 60,
        'every job to run',
        60_000,
      )
      for (const child of children) child.process.kill('SIGKILL')
      const gauge = await t.query<{ name: string; high: number }>('select name, high from gauge order by name')
      const highs = Object.fromEntries(gauge.map((row) => [row.name, Number(row.high)]))
      expect(highs.total).toBe(3)
      for (let g = 0; g < 6; g++) expect(highs[`group:g${g}`]).toBe(1)
      // At least three processes took part: the limit is held by the database, not by one process.
      expect((await t.query('select pid from ran_by')).length).toBeGreaterThanOrEqual(3)
      expect(await t.held()).toBe(0)
    },
    STARTUP_MS + 90_000,
  )

  test(
    `JOB-07 ${on} workers in several processes share a queue's concurrency: 4 processes of 4 slots under \`concurrency: 4\` each run at least 15% of the jobs, never more than 4 at once`,
    async () => {
      await t.run(GAUGE_TABLE[t.dialect])
      await t.run(RUNS_BY_TABLE)
      const children = Array.from({ length: 4 }, () => startFixture('contract-child.ts', ['work', t.address, 'share']))
      await started(children, 'working', 'the four worker processes to start')
      // 200 jobs of 20 ms: a process that ends a run would otherwise claim the freed slot before the others see it free.
      await enqueueMany(
        t.db,
        shared,
        Array.from({ length: 200 }, (_, n) => ({ value: { n } })),
      )
      await waitFor(
        async () =>
          Number(
            (await t.query<{ n: number | string }>(`select count(*) as n from jobs_job where queue = 'shared' and state = 'done'`))[0]!.n,
          ) === 200,
        'every job to run',
        60_000,
      )
      for (const child of children) child.process.kill('SIGKILL')
      const [gauge] = await t.query<{ high: number }>(`select high from gauge where name = 'total'`)
      expect(Number(gauge!.high)).toBeLessThanOrEqual(4)
      const runs = (await t.query<{ n: number | string }>('select n from runs_by')).map((row) => Number(row.n))
      expect(runs.reduce((a, b) => a + b, 0)).toBe(200)
      expect(runs.length).toBe(4)
      for (const n of runs) expect(n, `runs per process: ${runs.join('/')}`).toBeGreaterThanOrEqual(30)
    },
    STARTUP_MS + 90_000,
  )
})
