/**
 * JOB-23 and JOB-24, once per dialect: a run that parks (`run.sleep`, `run.waitForEvent`) holds no slot and uses no
 * attempt, and runs on from the same point when its time comes or its event is signalled, in the app's transaction;
 * a sleep survives a SIGKILL of its worker's process, and an event committed in one process wakes the run in
 * another exactly once, while one whose transaction rolls back wakes nothing.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import { describe, expect, test } from 'vitest'
import {
  defineQueue,
  enqueue,
  getJob,
  isJobsError,
  prune,
  signal,
  watch,
  work,
  type Database,
  type JobSnapshot,
  type Signalled,
} from '../../src/index.js'
import { MAX_TIME_MS } from '../../src/limits.js'
import { tempDir } from '../helpers/db.js'
import { CONTRACT_DATABASES, CONTRACT_TEST_MS, type ContractDb, eachContractDb, PROCESS_DATABASES } from '../helpers/dialects.js'
import { STARTUP_MS, started, startFixture } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'
import { waits, waitsHandler, type WaitsValue } from '../fixtures/contract-queues.js'

interface Stored {
  state: string
  attempts: number
  waits_for: string | null
  result: unknown
}

/** The job `id` of `waits` as stored: its state, attempts, what it waits for and its result (parsed). */
async function stored(t: ContractDb, id: string): Promise<Stored | undefined> {
  const [row] = await t.query<Stored>('select state, attempts, waits_for, result from jobs_job where queue = $1 and id = $2', 'waits', id)
  if (!row) return undefined
  return { ...row, attempts: Number(row.attempts), result: typeof row.result === 'string' ? JSON.parse(row.result) : row.result }
}

/** Sends a signal in an app transaction that commits, or that throws after the signal and rolls back. */
async function signalIn(
  t: ContractDb,
  id: string,
  name: string,
  payload: unknown,
  outcome: 'commit' | 'rollback',
): Promise<Signalled | undefined> {
  const rollback = new Error('the app rolls back')
  let signalled: Signalled | undefined
  try {
    if (t.sqlite) {
      t.sqlite.transaction((tx) => {
        tx.run(sql.raw(`insert into app_log (line) values ('signal ${name}')`))
        signalled = signal(tx, waits, id, name, payload)
        if (outcome === 'rollback') throw rollback
      })
    } else {
      await t.inTransaction!(async (tx, exec) => {
        await exec(`insert into app_log (line) values ('signal ${name}')`)
        signalled = await signal(tx, waits, id, name, payload)
        if (outcome === 'rollback') throw rollback
      })
    }
  } catch (error) {
    if (error !== rollback) throw error
  }
  return signalled
}

const parked = (t: ContractDb, id: string, waitsFor: string) =>
  waitFor(async () => {
    const job = await stored(t, id)
    return job?.state === 'scheduled' && job.waits_for === waitsFor && job
  }, `job ${id} to park waiting for ${waitsFor}`)

const doneWith = (t: ContractDb, id: string, timeoutMs?: number) =>
  waitFor(
    async () => {
      const job = await stored(t, id)
      return job?.state === 'done' && job
    },
    `job ${id} to end done`,
    timeoutMs,
  )

describe.each(CONTRACT_DATABASES)('%s', { timeout: CONTRACT_TEST_MS }, (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`

  test(`JOB-23 ${on} a sleep parks the run, holding no slot and using no attempt, and it runs on from the same point once the sleep ends`, async () => {
    const calls: string[] = []
    const began = Date.now()
    await enqueue(t.db, waits, { n: 1, sleepMs: 600 }, { id: 'sleeper' })
    workers.push(
      work(
        t.db,
        waits,
        waitsHandler((line) => calls.push(line)),
        { slots: 1, pollInterval: '20ms' },
      ),
    )
    const sleeping = await parked(t, 'sleeper', 'sleep:nap')
    // The attempt was given back, and no worker holds the job.
    expect(sleeping.attempts).toBe(0)
    expect(await t.held()).toBe(0)
    // Its one slot is free: another job runs while it sleeps.
    await enqueue(t.db, waits, { n: 2 }, { id: 'meanwhile' })
    await doneWith(t, 'meanwhile')
    expect((await stored(t, 'sleeper'))!.state).toBe('scheduled')

    const done = await doneWith(t, 'sleeper')
    expect(Date.now() - began).toBeGreaterThanOrEqual(600)
    expect(done).toMatchObject({ attempts: 1, waits_for: null, result: { got: null } })
    // Its first step ran once: the second run passed through it, and through the sleep, from the table.
    expect(calls.filter((line) => line.startsWith('before sleeper'))).toEqual(['before sleeper 1'])
    expect(calls.filter((line) => line.startsWith('after sleeper'))).toEqual(['after sleeper 1'])
  })

  test(`JOB-23 ${on} a sleep already slept is not slept again by a later attempt`, async () => {
    const queue = defineQueue<{ n: number }>('sleepy', { attempts: 2, backoff: { initial: 1, max: 1 } })
    const sleeps: number[] = []
    workers.push(
      work(
        t.db,
        queue,
        async (_value, run) => {
          const began = Date.now()
          await run.sleep('nap', 300)
          sleeps.push(Date.now() - began)
          if (run.attempt === 1) throw new Error('the first attempt fails after its sleep')
          return 'slept once'
        },
        { pollInterval: '20ms' },
      ),
    )
    await enqueue(t.db, queue, { n: 1 }, { id: 'once' })
    await waitFor(async () => (await t.job('sleepy', 'once'))?.state === 'done', 'the job to end done')
    // The run after the sleep and the second attempt both passed through it at once.
    expect(sleeps).toHaveLength(2)
    for (const ms of sleeps) expect(ms).toBeLessThan(300)
    expect((await t.job('sleepy', 'once'))!.attempts).toBe(2)
  })

  test(`JOB-24 ${on} an event signalled before the run waits is kept, and answered at once`, async () => {
    await enqueue(t.db, waits, { n: 1, event: 'approved' }, { id: 'early' })
    await t.run('create table app_log (line text)')
    expect(await signalIn(t, 'early', 'approved', { by: 'ada' }, 'commit')).toEqual({ sent: true, woke: false })
    // The same name again is refused: an event is sent once.
    expect(await signal(t.db as Database, waits, 'early', 'approved', { by: 'bob' })).toEqual({ sent: false, woke: false })
    const calls: string[] = []
    workers.push(
      work(
        t.db,
        waits,
        waitsHandler((line) => calls.push(line)),
        { pollInterval: '20ms' },
      ),
    )
    const done = await doneWith(t, 'early')
    expect(done).toMatchObject({ attempts: 1, result: { got: { timedOut: false, payload: { by: 'ada' } } } })
    expect(calls).toEqual(['before early 1', 'after early 1'])
  })

  test(`JOB-24 ${on} a run waits for its event holding no slot; a signal whose transaction rolls back wakes nothing, one that commits wakes it once`, async () => {
    await t.run('create table app_log (line text)')
    const calls: string[] = []
    workers.push(
      work(
        t.db,
        waits,
        waitsHandler((line) => calls.push(line)),
        { slots: 1, pollInterval: '20ms' },
      ),
    )
    await enqueue(t.db, waits, { n: 1, event: 'paid' }, { id: 'order-1' })
    expect((await parked(t, 'order-1', 'event:paid')).attempts).toBe(0)
    expect(await t.held()).toBe(0)

    expect(await signalIn(t, 'order-1', 'paid', { cents: 1200 }, 'rollback')).toEqual({ sent: true, woke: true })
    // Rolled back: no event, no app row, and the run still waits.
    expect(await t.query('select line from app_log')).toEqual([])
    expect(await t.query('select job from jobs_event where state = $1', 'sent')).toEqual([])
    await enqueue(t.db, waits, { n: 2 }, { id: 'other' })
    await doneWith(t, 'other')
    expect(await stored(t, 'order-1')).toMatchObject({ state: 'scheduled', waits_for: 'event:paid' })

    expect(await signalIn(t, 'order-1', 'paid', { cents: 1200 }, 'commit')).toEqual({ sent: true, woke: true })
    const done = await doneWith(t, 'order-1')
    expect(done).toMatchObject({ attempts: 1, result: { got: { timedOut: false, payload: { cents: 1200 } } } })
    expect(calls.filter((line) => line.includes('order-1'))).toEqual(['before order-1 1', 'after order-1 1'])
    expect(await t.query('select line from app_log')).toEqual([{ line: 'signal paid' }])
    // The job has ended: a signal now keeps nothing.
    expect(await signal(t.db as Database, waits, 'order-1', 'late', 1)).toEqual({ sent: false, woke: false })
  })

  test(`JOB-24 ${on} a wait whose timeout passes resumes timed out, in this attempt and every later one, and a later signal is refused`, async () => {
    const calls: string[] = []
    workers.push(
      work(
        t.db,
        waits,
        waitsHandler((line) => calls.push(line)),
        { pollInterval: '20ms' },
      ),
    )
    await enqueue(t.db, waits, { n: 1, event: 'reply', timeoutMs: 400 }, { id: 'unanswered' })
    await parked(t, 'unanswered', 'event:reply')
    const done = await doneWith(t, 'unanswered')
    expect(done).toMatchObject({ attempts: 1, result: { got: { timedOut: true } } })
    expect(await signal(t.db as Database, waits, 'unanswered', 'reply', 'too late')).toEqual({ sent: false, woke: false })
    expect(await t.query('select state from jobs_event')).toEqual([{ state: 'timed_out' }])
  })

  test(`JOB-11 ${on} getJob and watch show what a parked run waits for: a sleep until its end, an event until its timeout or with none; a watch sees the run park, and once its event is sent, run again and end`, async () => {
    workers.push(
      work(
        t.db,
        waits,
        waitsHandler(() => {}),
        { pollInterval: '20ms' },
      ),
    )
    const hour = 3_600_000
    const began = Date.now()
    await enqueue(t.db, waits, { n: 1, sleepMs: hour }, { id: 'napping' })
    await enqueue(t.db, waits, { n: 2, event: 'approved', timeoutMs: hour }, { id: 'timed' })
    await parked(t, 'napping', 'sleep:nap')
    await parked(t, 'timed', 'event:approved')
    const parkedAt = Date.now()
    for (const [id, wait] of [
      ['napping', { kind: 'sleep', step: 'nap' }],
      ['timed', { kind: 'event', name: 'approved' }],
    ] as const) {
      const job = (await getJob(t.db, waits, id))!
      expect(job, id).toMatchObject({ state: 'scheduled', ahead: null, attempt: 0, waitsFor: wait })
      // Until the job's run_at: the sleep's end, the wait's timeout.
      expect(job.waitsFor!.until, id).toEqual(job.runAt)
      expect(job.waitsFor!.until!.getTime(), id).toBeGreaterThanOrEqual(began + hour)
      expect(job.waitsFor!.until!.getTime(), id).toBeLessThanOrEqual(parkedAt + hour)
    }

    // A wait with no timeout, watched from before its run parks to its end.
    await enqueue(t.db, waits, { n: 3, event: 'paid' }, { id: 'order' })
    const seen: JobSnapshot[] = []
    const watched = (async () => {
      for await (const job of watch(t.db, waits, 'order')) seen.push(job)
    })()
    const isParked = (job: JobSnapshot) => job.state === 'scheduled' && job.waitsFor !== null
    await waitFor(() => seen.some(isParked), 'the watch to see the run park')
    const parkedJob = seen.find(isParked)!
    expect(parkedJob).toMatchObject({ ahead: null, attempt: 0, waitsFor: { kind: 'event', name: 'paid', until: null } })
    // The wait's time is the end of time: no timeout.
    expect(parkedJob.runAt!.getTime()).toBe(MAX_TIME_MS)
    expect(await getJob(t.db, waits, 'order')).toMatchObject({ waitsFor: { kind: 'event', name: 'paid', until: null } })

    expect(await signal(t.db as Database, waits, 'order', 'paid', 1)).toEqual({ sent: true, woke: true })
    await watched
    const after = seen.slice(seen.indexOf(parkedJob) + 1)
    expect(after.map((job) => job.state)).toContain('running')
    expect(after.at(-1)).toMatchObject({ state: 'done', attempt: 1, waitsFor: null, result: { got: { timedOut: false, payload: 1 } } })
    // Only a parked job waits for something: the signal made it due at once, waiting for nothing, then it ran.
    expect(after.every((job) => job.waitsFor === null)).toBe(true)
    expect(seen.filter((job) => job.state !== 'scheduled').every((job) => job.waitsFor === null)).toBe(true)
  })

  test(`JOB-24 ${on} a job's events go with it when it is pruned, so that no later job finds them, even where SQLite's foreign keys are off`, async () => {
    await t.run('create table app_log (line text)')
    // better-sqlite3 turns foreign keys on, and the cascade would delete the events; an app's connection may not.
    if (t.sqlite) await t.run('pragma foreign_keys = off')
    workers.push(
      work(
        t.db,
        waits,
        waitsHandler(() => {}),
        { pollInterval: '20ms' },
      ),
    )
    await enqueue(t.db, waits, { n: 1, event: 'go' }, { id: 'pruned' })
    await parked(t, 'pruned', 'event:go')
    await signalIn(t, 'pruned', 'go', 1, 'commit')
    await doneWith(t, 'pruned')
    expect(await t.query('select state from jobs_event')).toEqual([{ state: 'sent' }])
    expect(await prune(t.db as Database, { before: Date.now() + 1_000 })).toBe(1)
    expect(await t.query('select job from jobs_event')).toEqual([])
  })

  test(`JOB-24 ${on} bad signals throw and write nothing: an id the queue does not hold, a payload that is not JSON, a bad name`, async () => {
    await enqueue(t.db, waits, { n: 1, event: 'x' }, { id: 'there' })
    const codeOf = async (call: () => unknown) => {
      try {
        await call()
      } catch (error) {
        return isJobsError(error) ? error.code : String(error)
      }
      return 'no error'
    }
    const db = t.db as Database
    expect(await codeOf(() => signal(db, waits, 'missing', 'x', 1))).toBe('NOT_FOUND')
    expect(await codeOf(() => signal(db, waits, 'there', 'x', { at: new Date() } as never))).toBe('INVALID_VALUE')
    expect(await codeOf(() => signal(db, waits, 'there', '', 1))).toBe('INVALID_OPTION')
    expect(await t.count('jobs_job')).toBe(1)
    expect(await t.query('select job from jobs_event')).toEqual([])
    // A refused signal leaves the app's transaction usable: its own write still commits.
    await t.run('create table app_log (line text)')
    if (t.sqlite) {
      t.sqlite.transaction((tx) => {
        expect(() => signal(tx, waits, 'missing', 'x', 1)).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }))
        tx.run(sql.raw(`insert into app_log (line) values ('kept')`))
      })
    } else {
      await t.inTransaction!(async (tx, exec) => {
        await expect(signal(tx, waits, 'missing', 'x', 1)).rejects.toMatchObject({ code: 'NOT_FOUND' })
        await exec(`insert into app_log (line) values ('kept')`)
      })
    }
    expect(await t.query('select line from app_log')).toEqual([{ line: 'kept' }])
  })

  test(`JOB-24 ${on} of 40 runs that each wait for an event signalled at a random moment, before, during or after the wait, none is lost`, async () => {
    const jobs = 40
    workers.push(
      work(
        t.db,
        waits,
        waitsHandler(() => {}),
        { slots: 8, pollInterval: '20ms' },
      ),
    )
    for (let n = 0; n < jobs; n++) await enqueue(t.db, waits, { n, event: 'go' } satisfies WaitsValue, { id: `race-${n}` })
    await Promise.all(
      Array.from({ length: jobs }, async (_, n) => {
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 150))
        const sent = await signal(t.db as Database, waits, `race-${n}`, 'go', n)
        expect(sent.sent).toBe(true)
      }),
    )
    // A signal lost between a run's look and its park would leave that job waiting for ever.
    await waitFor(
      async () => Number((await t.query<{ n: number }>(`select count(*) as n from jobs_job where state = 'done'`))[0]!.n) === jobs,
      'every job to end done',
    )
    for (let n = 0; n < jobs; n++) expect((await stored(t, `race-${n}`))!.result).toEqual({ got: { timedOut: false, payload: n } })
  })
})

describe.each(PROCESS_DATABASES)('%s', (dialect) => {
  const { t } = eachContractDb(dialect)
  const on = `[${dialect}]`

  test(
    `JOB-23 ${on} a sleep survives a SIGKILL of its worker's process: another process runs it on when the sleep ends, its first step not again`,
    async () => {
      const stepLog = join(tempDir(), 'steps.log')
      writeFileSync(stepLog, '')
      await enqueue(t.db, waits, { n: 1, sleepMs: 1_500 }, { id: 'nap' })
      const first = startFixture('contract-child.ts', ['work', t.address, 'waits'], { STEP_LOG: stepLog })
      await started(first, 'working', 'the first worker process to start')
      await parked(t, 'nap', 'sleep:nap')
      first.process.kill('SIGKILL')
      expect(await first.exited).toBe('SIGKILL')

      const second = startFixture('contract-child.ts', ['work', t.address, 'waits'], { STEP_LOG: stepLog })
      await started(second, 'working', 'the second worker process to start')
      expect(await doneWith(t, 'nap')).toMatchObject({ attempts: 1, waits_for: null })
      expect(readFileSync(stepLog, 'utf8').trim().split('\n')).toEqual(['before nap 1', 'after nap 1'])
    },
    STARTUP_MS + 60_000,
  )

  test(
    `JOB-24 ${on} an event signalled in a transaction that rolls back wakes nothing; one that commits wakes the run once, in another process`,
    async () => {
      const stepLog = join(tempDir(), 'steps.log')
      writeFileSync(stepLog, '')
      await t.run('create table app_log (line text)')
      await enqueue(t.db, waits, { n: 1, event: 'approved' }, { id: 'review' })
      const worker = startFixture('contract-child.ts', ['work', t.address, 'waits'], { STEP_LOG: stepLog })
      await started(worker, 'working', 'the worker process to start')
      await parked(t, 'review', 'event:approved')

      await signalIn(t, 'review', 'approved', { by: 'ada' }, 'rollback')
      // A job added after it runs: had the rolled-back signal woken the run, the worker would have claimed it first.
      await enqueue(t.db, waits, { n: 2 }, { id: 'probe' })
      await doneWith(t, 'probe')
      expect(await stored(t, 'review')).toMatchObject({ state: 'scheduled', waits_for: 'event:approved', attempts: 0 })
      expect(readFileSync(stepLog, 'utf8').trim().split('\n')).toEqual(['before review 1', 'before probe 1', 'after probe 1'])

      expect(await signalIn(t, 'review', 'approved', { by: 'ada' }, 'commit')).toEqual({ sent: true, woke: true })
      expect(await doneWith(t, 'review')).toMatchObject({ attempts: 1, result: { got: { timedOut: false, payload: { by: 'ada' } } } })
      expect(readFileSync(stepLog, 'utf8').trim().split('\n')).toEqual([
        'before review 1',
        'before probe 1',
        'after probe 1',
        'after review 1',
      ])
    },
    STARTUP_MS + 60_000,
  )
})
