import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { defineQueue, enqueue, work } from '../src/index.js'
import { freshDb, removeTempDirs, tempDir, type TestDb } from './helpers/db.js'
import { killChildren, STARTUP_MS, started, startFixture } from './helpers/processes.js'
import { waitFor } from './helpers/wait.js'

let t: TestDb | undefined
afterEach(() => {
  killChildren()
  t?.close()
  t = undefined
  removeTempDirs()
})

function job(db: TestDb, id: string) {
  return db.client.prepare('select state, attempts, max_attempts as maxAttempts, error from jobs_job where id = ?').get(id) as
    | { state: string; attempts: number; maxAttempts: number; error: string | null }
    | undefined
}

describe('crashes', () => {
  test(
    'JOB-01 a job whose add committed survives a SIGKILL of its process before any worker ran it',
    async () => {
      t = freshDb()
      const producer = startFixture('contract-child.ts', ['enqueue', t.file, 'survivor'])
      await started(producer, 'added', 'the child to start and add its job')
      producer.process.kill('SIGKILL')
      expect(await producer.exited).toBe('SIGKILL')

      expect(job(t, 'survivor')).toMatchObject({ state: 'waiting', attempts: 0 })
      const ran: string[] = []
      const worker = work(t.db, defineQueue('crashes'), (_value, run) => void ran.push(run.id))
      await waitFor(() => job(t!, 'survivor')?.state === 'done', 'the surviving job to run')
      await worker.stop()
      expect(ran).toEqual(['survivor'])
    },
    STARTUP_MS + 60_000,
  )

  test(
    'JOB-04 an attempt is counted before its handler starts: a job that SIGKILLs its process every time fails after `attempts`',
    async () => {
      t = freshDb()
      const crashes = defineQueue<{ n: number }>('crashes', { attempts: 3 })
      t.client.prepare(`insert into jobs_job (queue, id, value, max_attempts) values ('crashes', 'poison', '{"n":1}', 3)`).run()
      const exits: Array<number | string> = []
      for (let i = 0; i < 3; i++) {
        const worker = startFixture('contract-child.ts', ['work', t.file, 'crash'])
        // Its handler may kill it before it says it works: its start and its run are waited for as one.
        await waitFor(() => worker.ended(), `worker process ${i + 1} to start, claim the job and kill itself`, STARTUP_MS + 20_000)
        exits.push(await worker.exited)
        expect(job(t, 'poison')!.attempts).toBe(i + 1)
      }
      expect(exits).toEqual(['SIGKILL', 'SIGKILL', 'SIGKILL'])
      // A fresh worker on this host finds the last owner gone and ends the job at once, without waiting for the lease.
      const worker = work(t.db, crashes, () => {
        throw new Error('the handler must not run a fourth time')
      })
      await waitFor(() => job(t!, 'poison')?.state === 'failed', 'the poisoned job to fail for good')
      await worker.stop()
      const ended = job(t, 'poison')!
      expect(ended.attempts).toBe(3)
      expect(ended.error).toMatch(/attempt 3 of 3 ended without an outcome: its worker process .* is gone/)
      expect(t.client.prepare('select count(*) as n from jobs_job where owner is not null').get()).toEqual({ n: 0 })
    },
    3 * (STARTUP_MS + 20_000) + 60_000,
  )

  test(
    'JOB-05 JOB-06 a run killed after a step finished runs again, and the finished step is not run again',
    async () => {
      t = freshDb()
      const stepLog = join(tempDir(), 'steps.log')
      writeFileSync(stepLog, '')
      t.client.prepare(`insert into jobs_job (queue, id, value, max_attempts) values ('steps', 'resumable', '{"n":1}', 5)`).run()
      const first = startFixture('contract-child.ts', ['work', t.file, 'step-then-hang'], { STEP_LOG: stepLog })
      await started(first, 'step-done', 'the first worker process to start and finish the step of the first attempt')
      first.process.kill('SIGKILL')
      await first.exited
      expect(job(t, 'resumable')).toMatchObject({ state: 'running', attempts: 1 })

      const second = startFixture('contract-child.ts', ['work', t.file, 'steps'], { STEP_LOG: stepLog })
      await started(second, 'working', 'the second worker process to start')
      await waitFor(() => job(t!, 'resumable')?.state === 'done', 'the job to run again and finish')
      second.process.kill('SIGKILL')
      expect(job(t, 'resumable')!.attempts).toBe(2)
      expect(readFileSync(stepLog, 'utf8').trim().split('\n')).toEqual(['one resumable 1', 'two resumable 2'])
      expect(t.client.prepare('select count(*) as n from jobs_step').get()).toEqual({ n: 0 })
    },
    2 * STARTUP_MS + 60_000,
  )

  test(
    'JOB-16 a run whose process blocked its event loop past the lease cannot start a step that the next attempt, in another process, already ran',
    async () => {
      t = freshDb()
      t.client.exec('create table effects (step text not null, attempt integer not null, pid integer not null)')
      // Two worker processes, lease 1 s, concurrency 1: whichever claims the job first blocks after step a until the other has done the job.
      const children = [startFixture('stale-step-worker.ts', [t.file]), startFixture('stale-step-worker.ts', [t.file])]
      await started(children, 'ready', 'both worker processes to start')
      enqueue(t.db, defineQueue('stale-steps', { concurrency: 1, attempts: 3 }), {}, { id: 'once' })
      const stale = await waitFor(() => children.find((child) => child.output().includes('blocking')), 'attempt 1 to keep step a and block')
      const other = children.find((child) => child !== stale)!
      await waitFor(() => job(t!, 'once')?.state === 'done', 'attempt 2, in the other process, to take the job over and finish it')
      await waitFor(() => stale.output().includes('late step b:'), 'the stale run to wake and try step b')

      expect(stale.output()).toContain('late step b: LEASE_LOST')
      const effects = t.client.prepare('select step, attempt, pid from effects order by rowid').all()
      expect(effects).toEqual([
        { step: 'a', attempt: 1, pid: stale.process.pid },
        { step: 'b', attempt: 2, pid: other.process.pid },
      ])
      expect(t.client.prepare('select state, attempts, result from jobs_job where id = ?').get('once')).toEqual({
        state: 'done',
        attempts: 2,
        result: '"from attempt 2"',
      })
      expect(t.client.prepare('select count(*) as n from jobs_job where owner is not null').get()).toEqual({ n: 0 })
      expect(t.client.prepare('select count(*) as n from jobs_step').get()).toEqual({ n: 0 })
    },
    STARTUP_MS + 90_000,
  )
})
