import { sql } from 'drizzle-orm'
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import {
  defineQueue,
  enqueue,
  enqueueMany,
  isJobsError,
  queueCounts,
  JobsError,
  work,
  type Handler,
  type Queue,
  type Run,
  type SyncDatabase,
  type WorkOptions,
  type Worker,
} from '../src/index.js'
import { backoffMs } from '../src/engine/backoff.js'
import { freshDb, removeTempDirs, type TestDb } from './helpers/db.js'
import { count, jobRow } from './helpers/rows.js'
import { waitFor } from './helpers/wait.js'
import { STARTUP_MS, killChildren, startFixture, type Child } from './helpers/processes.js'
import { MAINTENANCE_INTERVAL_MS } from '../src/limits.js'

let t: TestDb
const workers: Worker[] = []
beforeEach(() => {
  t = freshDb()
})
afterEach(async () => {
  killChildren()
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
  t.close()
  removeTempDirs()
})

function start<T>(db: SyncDatabase, queue: Queue<T>, handler: Handler<T>, options?: WorkOptions): Worker {
  const worker = work(db, queue, handler, options)
  workers.push(worker)
  return worker
}

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void
  const wait = new Promise<void>((resolve) => (open = resolve))
  return { wait, open }
}

const state = (id: string) => jobRow(t.client, id)?.state

/**
 * Resolves after this process's worker has acted on what just happened: a wake-up flushes on the next
 * turn of the event loop (setImmediate), so two turns later its claims and ends are written.
 */
async function workerTurns(): Promise<void> {
  for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve))
}

/** Resolves once the child has printed `text`: by its output events, so it also works while timers are frozen. */
function printed(child: Child, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    if (child.output().includes(text)) return resolve()
    child.process.stdout!.on('data', () => child.output().includes(text) && resolve())
    void child.exited.then((code) => reject(new Error(`the child ended (${code}) before printing ${text}`)))
  })
}

describe('JOB-13 work refuses what it cannot use', () => {
  test('JOB-13 work refuses a non-function onError, a bad clock and something that is not a queue, writing nothing, the transaction still usable', async () => {
    const q = defineQueue('real')
    enqueue(t.db, q, 1, { id: 'waits' })
    t.client.exec('create table notes (id integer primary key, text text not null)')
    const cases: Array<[string, () => unknown, RegExp]> = [
      ['onError a string', () => work(t.db, q, () => {}, { onError: 'log' as never }), /^onError/],
      ['clock a number', () => work(t.db, q, () => {}, { clock: 5 as never }), /^clock/],
      ['clock that answers a string', () => work(t.db, q, () => {}, { clock: (() => 'now') as never }), /^clock/],
      ['clock that answers NaN', () => work(t.db, q, () => {}, { clock: () => Number.NaN }), /^clock/],
      [
        'clock that throws',
        () =>
          work(t.db, q, () => {}, {
            clock: () => {
              throw new Error('no time')
            },
          }),
        /^clock/,
      ],
      ['a plain object named like a queue', () => work(t.db, { name: 'fake' } as never, () => {}), /^queue/],
      ['a copy of a queue', () => work(t.db, { ...q } as never, () => {}), /^queue/],
      ['a queue name', () => work(t.db, 'real' as never, () => {}), /^queue/],
      ['no queue', () => work(t.db, undefined as never, () => {}), /^queue/],
      ['options null', () => work(t.db, q, () => {}, null as never), /^options/],
    ]
    const errors: unknown[] = []
    const logged = console.error
    console.error = (...args: unknown[]) => errors.push(args)
    try {
      for (const [what, call, message] of cases) {
        const before = {
          jobs: t.client.prepare('select * from jobs_job').all(),
          workers: t.client.prepare('select * from jobs_lease').all(),
        }
        t.db.transaction((tx) => {
          tx.run(sql`insert into notes (text) values (${`before ${what}`})`)
          let caught: unknown
          try {
            const worker = call()
            if (worker) workers.push(worker as Worker)
          } catch (error) {
            caught = error
          }
          expect(caught, what).toBeInstanceOf(JobsError)
          expect((caught as JobsError).code, what).toBe('INVALID_OPTION')
          expect((caught as JobsError).message, what).toMatch(message)
          tx.run(sql`insert into notes (text) values (${`after ${what}`})`)
        })
        expect(
          { jobs: t.client.prepare('select * from jobs_job').all(), workers: t.client.prepare('select * from jobs_lease').all() },
          what,
        ).toEqual(before)
        expect(count(t.client, 'notes', `text in ('before ${what}', 'after ${what}')`), what).toBe(2)
      }
    } finally {
      console.error = logged
    }
    expect(errors).toEqual([])
    expect(state('waits')).toBe('waiting')
  })
})

describe('JOB-08 each handler outcome leads to the state the outcome table gives', () => {
  test('JOB-08 returning ends the job done, keeping a JSON result', async () => {
    const q = defineQueue<{ a: number }>('outcomes')
    enqueue(t.db, q, { a: 2 }, { id: 'value' })
    enqueue(t.db, q, { a: 0 }, { id: 'nothing' })
    start(t.db, q, ({ a }) => (a ? { doubled: a * 2 } : undefined))
    await waitFor(() => state('value') === 'done' && state('nothing') === 'done', 'both jobs to be done')
    expect(jobRow(t.client, 'value')).toMatchObject({ result: '{"doubled":4}', attempts: 1, error: null })
    expect(jobRow(t.client, 'value')!.finished_at).toBeGreaterThan(0)
    expect(jobRow(t.client, 'nothing')!.result).toBeNull()
  })

  test('JOB-08 throwing schedules a retry after the backoff, and fails for good after the last attempt', async () => {
    const q = defineQueue('throws', { attempts: 2, backoff: { initial: 10, max: 10 } })
    enqueue(t.db, q, null, { id: 'thrower' })
    const attempts: number[] = []
    start(t.db, q, (_value, run) => {
      attempts.push(run.attempt)
      throw new Error(`broke on attempt ${run.attempt}`)
    })
    await waitFor(() => state('thrower') === 'failed', 'the job to fail for good')
    expect(attempts).toEqual([1, 2])
    const row = jobRow(t.client, 'thrower')!
    expect(row).toMatchObject({ attempts: 2, error: 'broke on attempt 2' })
    expect(t.client.prepare('select error_stack from jobs_job where id = ?').pluck().get('thrower')).toMatch(
      /Error: broke on attempt 2\n\s+at /,
    )
  })

  test('JOB-08 a rejected promise is a failed run; the error of a scheduled retry is kept', async () => {
    const q = defineQueue('rejects', { attempts: 3, backoff: { initial: '1h' } })
    enqueue(t.db, q, null, { id: 'rejecter' })
    start(t.db, q, async () => Promise.reject(new Error('network down')))
    await waitFor(() => state('rejecter') === 'scheduled', 'the job to be scheduled for a retry')
    const row = jobRow(t.client, 'rejecter')!
    expect(row).toMatchObject({ attempts: 1, error: 'network down', finished_at: null })
    expect(row.run_at - Date.now()).toBeGreaterThan(0.9 * 3_600_000 - 60_000)
  })

  test('JOB-08 run.fail ends the job failed now, whatever attempts remain', async () => {
    const q = defineQueue('fails', { attempts: 5 })
    enqueue(t.db, q, null, { id: 'failer' })
    start(t.db, q, (_value, run) => run.fail('the message was deleted'))
    await waitFor(() => state('failer') === 'failed', 'the job to fail')
    expect(jobRow(t.client, 'failer')).toMatchObject({ attempts: 1, error: 'the message was deleted' })
  })

  test('JOB-08 run.retry schedules the job at now + delay, counting the attempt, and fails on the last', async () => {
    const q = defineQueue('retries', { attempts: 2 })
    enqueue(t.db, q, null, { id: 'retrier' })
    const runs: number[] = []
    start(t.db, q, (_value, run) => {
      runs.push(run.attempt)
      return run.retry(run.attempt === 1 ? '20ms' : '1h')
    })
    await waitFor(() => state('retrier') === 'failed', 'the retried job to fail on its last attempt')
    expect(runs).toEqual([1, 2])
    expect(jobRow(t.client, 'retrier')!.error).toMatch(/retry on the last attempt/)

    enqueue(t.db, q, null, { id: 'later' })
    const before = Date.now()
    await waitFor(() => jobRow(t.client, 'later')?.attempts === 1 && state('later') === 'scheduled', 'the retry to be scheduled')
    expect(jobRow(t.client, 'later')!.run_at).toBeGreaterThanOrEqual(before + 20)
  })

  test('JOB-08 run.retry and run.snooze take delays of months and years, and the idle worker waits on them without overflowing a timer', async () => {
    const day = 86_400_000
    const q = defineQueue<string>('long-waits', { attempts: 3 })
    enqueueMany(t.db, q, [
      { value: 'retry', id: 'retry' },
      { value: 'snooze', id: 'snooze' },
    ])
    const warnings: Error[] = []
    const onWarning = (warning: Error) => warnings.push(warning)
    process.on('warning', onWarning)
    try {
      const before = Date.now()
      start(t.db, q, (value, run) => (value === 'retry' ? run.retry('400d') : run.snooze('3650d')))
      await waitFor(() => state('retry') === 'scheduled' && state('snooze') === 'scheduled', 'both jobs to be scheduled')
      expect(jobRow(t.client, 'retry')).toMatchObject({ attempts: 1, error: null })
      expect(jobRow(t.client, 'snooze')).toMatchObject({ attempts: 0, error: null })
      expect(jobRow(t.client, 'retry')!.run_at).toBeGreaterThanOrEqual(before + 400 * day)
      expect(jobRow(t.client, 'snooze')!.run_at).toBeGreaterThanOrEqual(before + 3650 * day)
      // Node warns (TimeoutOverflowWarning) when a timer is asked to wait past 2^31 - 1 ms; let the event loop turn so it would have.
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings.filter((warning) => warning.name === 'TimeoutOverflowWarning')).toEqual([])
    } finally {
      process.off('warning', onWarning)
    }
  })

  test('JOB-08 run.snooze schedules the job at now + delay without counting the attempt', async () => {
    const q = defineQueue('snoozes', { attempts: 1 })
    enqueue(t.db, q, null, { id: 'sleeper' })
    const seen: number[] = []
    start(t.db, q, (_value, run) => {
      seen.push(run.attempt)
      if (seen.length < 3) return run.snooze('10ms')
      return 'awake'
    })
    await waitFor(() => state('sleeper') === 'done', 'the snoozed job to finish')
    // Three runs on a queue of one attempt: the snoozes were not counted.
    expect(seen).toEqual([1, 1, 1])
    expect(jobRow(t.client, 'sleeper')).toMatchObject({ attempts: 1, result: '"awake"' })
  })

  test('JOB-08 a result that is not JSON fails the run with INVALID_VALUE', async () => {
    const q = defineQueue('bad-result', { attempts: 1 })
    enqueue(t.db, q, null, { id: 'bigint' })
    // @ts-expect-error a bigint is not JSON: the compiler refuses it, and so does the run
    start(t.db, q, () => ({ n: 1n }))
    await waitFor(() => state('bigint') === 'failed', 'the job to fail')
    expect(jobRow(t.client, 'bigint')!.error).toMatch(/result.*\.n is a bigint/)
  })
})

describe('backoff', () => {
  test('JOB-09 the backoff formula: initial × 2^(n−1), times [0.9, 1.1], capped at max', () => {
    const policy = { initialMs: 1_000, maxMs: 10_000 }
    expect(backoffMs(policy, 1, () => 0)).toBe(900)
    expect(backoffMs(policy, 1, () => 0.5)).toBe(1_000)
    expect(backoffMs(policy, 1, () => 1)).toBe(1_100)
    expect(backoffMs(policy, 3, () => 0.5)).toBe(4_000)
    expect(backoffMs(policy, 4, () => 1)).toBe(8_800)
    expect(backoffMs(policy, 5, () => 0)).toBe(10_000)
    expect(backoffMs(policy, 40, () => 0.5)).toBe(10_000)
  })

  test('JOB-09 every retry wait of a job follows the backoff', async () => {
    // A frozen clock that the test moves: each wait the engine writes is exactly run_at − now.
    let now = 1_700_000_000_000
    const q = defineQueue('backoff', { attempts: 6, backoff: { initial: 40, max: 200 } })
    t.client
      .prepare(`insert into jobs_job (queue, id, value, max_attempts, run_at, created_at) values ('backoff', 'b', 'null', 6, ?, ?)`)
      .run(now, now)
    start(
      t.db,
      q,
      () => {
        throw new Error('always')
      },
      { clock: () => now },
    )
    const waits: number[] = []
    for (let attempt = 1; attempt <= 5; attempt++) {
      const row = await waitFor(() => {
        const job = jobRow(t.client, 'b')!
        return job.state === 'scheduled' && job.attempts === attempt && job
      }, `attempt ${attempt} to be scheduled`)
      waits.push(row.run_at - now)
      now = row.run_at
    }
    await waitFor(() => state('b') === 'failed', 'the last attempt to fail')
    waits.forEach((wait, i) => {
      const base = Math.min(200, 40 * 2 ** i)
      expect(wait, `wait after failed run ${i + 1}`).toBeGreaterThanOrEqual(Math.min(200, Math.round(base * 0.9)))
      expect(wait, `wait after failed run ${i + 1}`).toBeLessThanOrEqual(Math.min(200, Math.round(base * 1.1)))
    })
    expect(waits.slice(3)).toEqual([200, 200])
  })
})

describe('timeouts', () => {
  test('JOB-10 a run past its timeout has its signal aborted with TIMEOUT and counts as a failed attempt', async () => {
    const q = defineQueue('slow', { timeout: 50, attempts: 2, backoff: { initial: '1h' } })
    enqueue(t.db, q, null, { id: 'slow' })
    let reason: unknown
    start(
      t.db,
      q,
      (_value, run) =>
        new Promise((resolve) =>
          run.signal.addEventListener('abort', () => {
            reason = run.signal.reason
            resolve('finished anyway')
          }),
        ),
    )
    await waitFor(() => state('slow') === 'scheduled', 'the timed-out run to be scheduled again')
    expect(isJobsError(reason, 'TIMEOUT')).toBe(true)
    expect(jobRow(t.client, 'slow')).toMatchObject({ attempts: 1, result: null })
    expect(jobRow(t.client, 'slow')!.error).toMatch(/timeout of 50 ms/)
  })

  test('JOB-10 a handler that ignores its signal keeps its slot until it returns, so concurrency holds', async () => {
    const q = defineQueue('stubborn', { timeout: 30, concurrency: 1, attempts: 1 })
    enqueueMany(t.db, q, [
      { value: 1, id: 'first' },
      { value: 2, id: 'second' },
    ])
    const release = gate()
    const started: string[] = []
    let firstSignal: AbortSignal | undefined
    start(
      t.db,
      q,
      async (_value, run) => {
        started.push(run.id)
        if (run.id === 'first') {
          firstSignal = run.signal
          await release.wait
        }
      },
      { slots: 4 },
    )
    await waitFor(() => firstSignal?.aborted, 'the first run to time out')
    // Past the timeout, a job added in this process wakes the worker: it looks, and claims nothing.
    enqueue(t.db, q, 3, { id: 'third' })
    await workerTurns()
    expect(started).toEqual(['first'])
    expect(state('first')).toBe('running')
    release.open()
    await waitFor(() => state('second') === 'done' && state('third') === 'done', 'the others to run once the first returned')
    expect(jobRow(t.client, 'first')).toMatchObject({ state: 'failed' })
    expect(jobRow(t.client, 'first')!.error).toMatch(/timeout/)
  })
})

describe('steps', () => {
  test('JOB-06 a finished step is not run again by later attempts; a step that throws keeps nothing', async () => {
    const q = defineQueue('stepper', { attempts: 3, backoff: { initial: 1, max: 1 } })
    enqueue(t.db, q, null, { id: 's' })
    const calls: string[] = []
    start(t.db, q, async (_value, run) => {
      const one = await run.step('one', () => {
        calls.push(`one@${run.attempt}`)
        return { got: 'one', at: run.attempt }
      })
      const two = await run.step('two', () => {
        calls.push(`two@${run.attempt}`)
        if (run.attempt === 1) throw new Error('two broke')
        return undefined
      })
      const three = await run.step('three', async () => {
        calls.push(`three@${run.attempt}`)
        return 3
      })
      if (run.attempt === 2) throw new Error('after the steps')
      return { one, two: two ?? 'undefined kept', three }
    })
    await waitFor(() => state('s') === 'done', 'the job to be done')
    expect(calls).toEqual(['one@1', 'two@1', 'two@2', 'three@2'])
    expect(JSON.parse(jobRow(t.client, 's')!.result!)).toEqual({ one: { got: 'one', at: 1 }, two: 'undefined kept', three: 3 })
  })

  test('JOB-14 steps end with their job: none outlives a job that is done or failed', async () => {
    const q = defineQueue('ending', { attempts: 2, backoff: { initial: 1, max: 1 } })
    enqueueMany(t.db, q, [
      { value: 'done', id: 'd' },
      { value: 'failed', id: 'f' },
      { value: 'gave-up', id: 'g' },
    ])
    start(t.db, q, async (value, run) => {
      await run.step('a', () => 1)
      await run.step('b', () => 2)
      if (value === 'failed') return run.fail('no')
      if (value === 'gave-up') throw new Error('always')
      return 'ok'
    })
    await waitFor(() => state('d') === 'done' && state('f') === 'failed' && state('g') === 'failed', 'all three to end')
    expect(count(t.client, 'jobs_step')).toBe(0)
  })

  test('a step answer past 1 MiB is TOO_LARGE and keeps nothing; bad step names are refused', async () => {
    const q = defineQueue('big-step', { attempts: 1 })
    enqueue(t.db, q, null, { id: 'big' })
    const errors: string[] = []
    start(t.db, q, async (_value, run) => {
      for (const attempt of [
        () => run.step('big', () => 'x'.repeat(1024 * 1024)),
        () => run.step('', () => 1),
        () => run.step('n'.repeat(1025), () => 1),
      ]) {
        try {
          await attempt()
        } catch (error) {
          errors.push((error as JobsError).code)
        }
      }
      expect(count(t.client, 'jobs_step')).toBe(0)
    })
    await waitFor(() => state('big') === 'done', 'the job to finish')
    expect(errors).toEqual(['TOO_LARGE', 'INVALID_OPTION', 'TOO_LARGE'])
  })

  test('JOB-16 two calls of run.step with the same name in one run share one call of fn: the same answer, or the same error', async () => {
    const q = defineQueue('shared-steps', { attempts: 1 })
    enqueue(t.db, q, null, { id: 's' })
    const calls = { x: 0, y: 0, z: 0 }
    let seen: { answers: unknown[]; errors: unknown[]; sync: unknown[] } | undefined
    start(t.db, q, async (_value, run) => {
      const x = async () => {
        await new Promise((resolve) => setTimeout(resolve, 10))
        return { x: ++calls.x }
      }
      const y = async () => {
        await new Promise((resolve) => setTimeout(resolve, 10))
        calls.y++
        throw new Error('y broke')
      }
      const answers = await Promise.all([run.step('x', x), run.step('x', x)])
      const errors = (await Promise.allSettled([run.step('y', y), run.step('y', y)])).map(
        (settled) => (settled as PromiseRejectedResult).reason,
      )
      const sync = await Promise.all([run.step('z', () => ++calls.z), run.step('z', () => ++calls.z)])
      seen = { answers, errors, sync }
    })
    await waitFor(() => state('s') === 'done', 'the job to be done')
    expect(calls).toEqual({ x: 1, y: 1, z: 1 })
    expect(seen!.answers).toEqual([{ x: 1 }, { x: 1 }])
    expect(seen!.errors[0]).toBeInstanceOf(Error)
    expect((seen!.errors[0] as Error).message).toBe('y broke')
    expect(seen!.errors[1]).toBe(seen!.errors[0])
    expect(seen!.sync).toEqual([1, 1])
  })
})

describe('stop', () => {
  test('JOB-15 stop() claims nothing more and waits for the runs under way', async () => {
    const q = defineQueue('stopping')
    enqueueMany(t.db, q, [
      { value: 1, id: 'under-way' },
      { value: 2, id: 'left' },
    ])
    const release = gate()
    const started: string[] = []
    const worker = work(
      t.db,
      q,
      async (_value, run) => {
        started.push(run.id)
        await release.wait
      },
      { slots: 1 },
    )
    await waitFor(() => started.length === 1, 'the first run to start')
    let stopped = false
    const stopping = worker.stop().then(() => (stopped = true))
    // stop() can resolve only once the run settles, and its gate is shut: a few turns show it waiting.
    await workerTurns()
    expect(stopped).toBe(false)
    expect(worker.running).toBe(1)
    release.open()
    await stopping
    expect(state('under-way')).toBe('done')
    expect(state('left')).toBe('waiting')
    expect(started).toEqual(['under-way'])
    expect(count(t.client, 'jobs_job', 'owner is not null')).toBe(0)
    enqueue(t.db, q, 3, { id: 'after-stop' })
    await workerTurns()
    expect(state('after-stop')).toBe('waiting')
  })

  test('JOB-15 stop({ timeout }) aborts runs that outlast it and leaves no lease behind', async () => {
    const q = defineQueue('hanging', { attempts: 3, backoff: { initial: '1h' } })
    enqueue(t.db, q, null, { id: 'hang' })
    let reason: unknown
    const worker = work(
      t.db,
      q,
      (_value, run) => new Promise(() => run.signal.addEventListener('abort', () => (reason = run.signal.reason))),
    )
    await waitFor(() => state('hang') === 'running', 'the run to start')
    await worker.stop({ timeout: 30 })
    expect(isJobsError(reason, 'TIMEOUT')).toBe(true)
    expect(count(t.client, 'jobs_job', 'owner is not null')).toBe(0)
    expect(jobRow(t.client, 'hang')).toMatchObject({ state: 'scheduled', attempts: 1 })
    expect(jobRow(t.client, 'hang')!.error).toMatch(/worker stopped before the run ended/)
  })
})

describe('leases', () => {
  /** Writes the row of a worker of another process, 'elsewhere/1/1/x/1', live for an hour: its runs are not to be taken back. */
  function elsewhereAlive(): void {
    t.client.prepare(`insert into jobs_lease (owner, expires_at) values ('elsewhere/1/1/x/1', ?)`).run(Date.now() + 3_600_000)
  }

  test('JOB-16 a run that lost its lease cannot write a step or end its job', async () => {
    const q = defineQueue('fenced')
    enqueue(t.db, q, null, { id: 'f' })
    const release = gate()
    let stepError: unknown
    let signalReason: unknown
    const worker = start(t.db, q, async (_value, run: Run) => {
      await release.wait
      try {
        await run.step('late', () => 'too late')
      } catch (error) {
        stepError = error
      }
      signalReason = run.signal.reason
      return 'done?'
    })
    await waitFor(() => state('f') === 'running', 'the run to start')
    // Another worker, alive, takes the job over: the job now names another owner and attempt.
    elsewhereAlive()
    t.client.prepare(`update jobs_job set owner = 'elsewhere/1/1/x/1', attempts = attempts + 1 where id = 'f'`).run()
    release.open()
    await waitFor(() => stepError !== undefined, 'the late step to be refused')
    expect(isJobsError(stepError, 'LEASE_LOST')).toBe(true)
    expect(isJobsError(signalReason, 'LEASE_LOST')).toBe(true)
    // stop() waits for the run to settle and writes every end it has: none may land for a lost lease.
    await worker.stop()
    expect(jobRow(t.client, 'f')).toMatchObject({ state: 'running', attempts: 2, result: null })
    expect(count(t.client, 'jobs_step')).toBe(0)
    expect(t.client.prepare(`select owner from jobs_job where id = 'f'`).pluck().get()).toBe('elsewhere/1/1/x/1')
  })

  test('JOB-16 ends written together in one transaction land only for the runs that still hold their lease', async () => {
    const q = defineQueue('fenced-together')
    enqueueMany(
      t.db,
      q,
      ['a', 'b', 'c', 'd'].map((id) => ({ value: id, id })),
    )
    const release = gate()
    const worker = start(
      t.db,
      q,
      async (id, run: Run) => {
        await run.step('first', () => `kept by ${id}`)
        await release.wait
        return `ended ${id}`
      },
      { slots: 4 },
    )
    await waitFor(() => count(t.client, 'jobs_step') === 4, 'all four runs to keep their step')
    // Another worker, alive, takes b and d over; a and c still hold their leases.
    elsewhereAlive()
    t.client.prepare(`update jobs_job set owner = 'elsewhere/1/1/x/1', attempts = attempts + 1 where id in ('b', 'd')`).run()
    release.open()
    await waitFor(() => state('a') === 'done' && state('c') === 'done', 'the runs that hold their lease to end')
    await worker.stop()
    expect(jobRow(t.client, 'a')).toMatchObject({ state: 'done', result: '"ended a"', attempts: 1 })
    expect(jobRow(t.client, 'c')).toMatchObject({ state: 'done', result: '"ended c"', attempts: 1 })
    for (const id of ['b', 'd'])
      expect(jobRow(t.client, id)).toMatchObject({ state: 'running', result: null, attempts: 2, finished_at: null })
    const leases = t.client.prepare('select id, owner from jobs_job where owner is not null order by id').all()
    expect(leases).toEqual([
      { id: 'b', owner: 'elsewhere/1/1/x/1' },
      { id: 'd', owner: 'elsewhere/1/1/x/1' },
    ])
    const steps = t.client.prepare('select j.id from jobs_step s join jobs_job j on j.seq = s.job order by j.id').pluck().all()
    expect(steps).toEqual(['b', 'd'])
    expect(queueCounts(t.db, q)).toMatchObject({ running: 2, done: 2, waiting: 0 })
  })

  test('JOB-16 a run whose lease expired and was taken over is refused, and the job runs again elsewhere', async () => {
    const q = defineQueue('expiring', { backoff: { initial: 1, max: 1 } })
    enqueue(t.db, q, null, { id: 'e' })
    const release = gate()
    const runs: string[] = []
    let lateStep: unknown
    const stalled = start(
      t.db,
      q,
      async (_value, run) => {
        runs.push(`stalled ${run.attempt}`)
        await release.wait
        try {
          await run.step('late', () => 'too late')
        } catch (error) {
          lateStep = error
        }
        return 'from the stalled run'
      },
      { lease: '1s' },
    )
    await waitFor(() => state('e') === 'running', 'the first run to start')
    // A worker on another connection whose clock is 5 s ahead sees the lease as expired and takes the job back.
    const other = t.reopen()
    start(
      other.db,
      q,
      (_value, run) => {
        runs.push(`rescuer ${run.attempt}`)
        return 'from the rescuer'
      },
      { clock: () => Date.now() + 5_000 },
    )
    await waitFor(() => state('e') === 'done', 'the rescuing worker to run the job again')
    release.open()
    await waitFor(() => lateStep !== undefined, 'the stalled run to try a late step')
    expect(isJobsError(lateStep, 'LEASE_LOST')).toBe(true)
    await stalled.stop()
    expect(runs).toEqual(['stalled 1', 'rescuer 2'])
    expect(jobRow(t.client, 'e')).toMatchObject({ state: 'done', attempts: 2, result: '"from the rescuer"' })
    expect(jobRow(t.client, 'e')!.error).toBeNull()
    expect(count(t.client, 'jobs_step')).toBe(0)
  })

  test('JOB-16 a run whose job was canceled and retried elsewhere loses its lease when its own worker claims the job again', async () => {
    const q = defineQueue('recycled')
    enqueue(t.db, q, null, { id: 'r' })
    const release = gate()
    const freshGate = gate()
    const runs: number[] = []
    let lateStep: unknown
    start(
      t.db,
      q,
      async (_value, run) => {
        if (run.id !== 'r') return
        runs.push(runs.length + 1)
        if (runs.length === 1) {
          await release.wait
          try {
            await run.step('late', () => 'stale')
          } catch (error) {
            lateStep = error
          }
          return 'from the stale run'
        }
        await freshGate.wait
        return 'from the fresh run'
      },
      { pollInterval: '1h' },
    )
    await waitFor(() => state('r') === 'running', 'the first run to start')
    // Another process cancels the job and retries it, which begins its attempts again at 1.
    const other = t.reopen()
    other.client.exec(`update jobs_job set state = 'canceled', owner = null where id = 'r';
      update jobs_job set state = 'waiting', attempts = 0 where id = 'r'`)
    // Something local wakes the worker before it polls: it claims the job again, as attempt 1 of the same owner.
    enqueue(t.db, q, null, { id: 'wake' })
    await waitFor(() => runs.length === 2, 'the fresh run to start')
    // The stale run goes on while the fresh one holds a lease with the same owner and attempt.
    release.open()
    await waitFor(() => lateStep !== undefined, 'the stale run to try its step')
    expect(isJobsError(lateStep, 'LEASE_LOST')).toBe(true)
    // The stale run is no longer the worker's: once it returned, nothing of it is written.
    await workerTurns()
    expect(state('r')).toBe('running')
    freshGate.open()
    await waitFor(() => state('r') === 'done', 'the fresh run to finish the job')
    expect(jobRow(t.client, 'r')).toMatchObject({ state: 'done', result: '"from the fresh run"' })
    expect(count(t.client, 'jobs_step')).toBe(0)
  })

  test('JOB-16 after stop({ timeout }) gives up on a run, the run cannot start its next step', async () => {
    const q = defineQueue('stopped-steps', { attempts: 3, backoff: { initial: '1h' } })
    enqueue(t.db, q, null, { id: 's' })
    let calls = 0
    let refused: unknown
    const worker = work(t.db, q, async (_value, run) => {
      await run.step('one', () => 'first')
      // The handler notices the abort but goes on to its next step, as a careless one would.
      await new Promise((resolve) => run.signal.addEventListener('abort', resolve))
      await run
        .step('two', () => ++calls)
        .catch((error: unknown) => {
          refused = error
          throw error
        })
    })
    await waitFor(() => count(t.client, 'jobs_step') === 1, 'the run to keep step one')
    await worker.stop({ timeout: 30 })
    expect(calls).toBe(0)
    expect(isJobsError(refused, 'TIMEOUT')).toBe(true)
    expect((refused as JobsError).message).toMatch(/stopped and gave up waiting/)
    expect(jobRow(t.client, 's')).toMatchObject({ state: 'scheduled', attempts: 1 })
    expect(t.client.prepare('select name from jobs_step').pluck().all()).toEqual(['one'])
    expect(count(t.client, 'jobs_job', 'owner is not null')).toBe(0)
  })

  test('a worker whose own clock jumps an hour, either way, between claim and completion still completes its runs; a jump back never shortens its row', async () => {
    const expiresAt = t.client.prepare('select w.expires_at from jobs_job j join jobs_lease w on w.owner = j.owner where j.id = ?').pluck()
    for (const jump of [3_600_000, -3_600_000]) {
      let skew = 0
      const q = defineQueue(`clock${jump > 0 ? 'forward' : 'back'}`)
      enqueue(t.db, q, null, { id: `jump${jump}` })
      const release = gate()
      const worker = start(
        t.db,
        q,
        async () => {
          await release.wait
          return 'done despite the clock'
        },
        { clock: () => Date.now() + skew, lease: '300ms' },
      )
      await waitFor(() => state(`jump${jump}`) === 'running', 'the run to start')
      const before = expiresAt.get(`jump${jump}`) as number
      skew = jump
      if (jump > 0) {
        // The lease is renewed under the jumped clock before the run completes.
        await waitFor(
          () => Math.abs((expiresAt.get(`jump${jump}`) as number) - Date.now() - jump) < 60_000,
          'a renewal under the jumped clock',
        )
      } else {
        // A renewal under a clock that went back never brings the row's expiry back (a claim that read its time before
        // a step's renewal may commit after it): the row keeps the later expiry while the worker renews it.
        await new Promise((resolve) => setTimeout(resolve, 400))
        expect(expiresAt.get(`jump${jump}`) as number).toBeGreaterThanOrEqual(before)
      }
      release.open()
      await waitFor(() => state(`jump${jump}`) === 'done', 'the run to complete')
      expect(jobRow(t.client, `jump${jump}`)).toMatchObject({ attempts: 1, result: '"done despite the clock"' })
      await worker.stop()
    }
  })
})

describe('abandoned runs', () => {
  test('JOB-05 a job whose last run was abandoned runs alone in its worker; a busy worker passes over it meanwhile', async () => {
    const q = defineQueue<string>('alone')
    const insert = t.client.prepare(`insert into jobs_job (queue, id, value, abandoned) values ('alone', ?, ?, ?)`)
    const gates = new Map([
      ['x', gate()],
      ['y', gate()],
    ])
    const running = new Set<string>()
    const beside = new Map<string, string[]>()
    start(
      t.db,
      q,
      async (value) => {
        beside.set(value, [...running])
        running.add(value)
        await gates.get(value)?.wait
        running.delete(value)
      },
      { slots: 4 },
    )
    enqueue(t.db, q, 'x', { id: 'x' })
    await waitFor(() => running.has('x'), 'x to start')
    // While x runs, a job that must run alone and a plain one arrive: the busy worker takes the plain one.
    insert.run('y', '"y"', 1)
    insert.run('z', '"z"', 0)
    await waitFor(() => state('z') === 'done', 'z to run beside x, passing over y')
    expect(state('y')).toBe('waiting')
    gates.get('x')!.open()
    // Idle again, the worker takes y alone, and claims nothing beside it until it ends.
    await waitFor(() => running.has('y'), 'y to start alone')
    enqueue(t.db, q, 'w', { id: 'w' })
    await workerTurns()
    expect(state('w')).toBe('waiting')
    gates.get('y')!.open()
    await waitFor(() => state('w') === 'done', 'w to run once y ended')
    expect(beside.get('y')).toEqual([])
    expect(beside.get('w')).toEqual([])
    expect(t.client.prepare(`select abandoned from jobs_job where id = 'y'`).pluck().get()).toBe(0)
  })
})

describe('order', () => {
  test('JOB-17 waiting jobs run in order of priority, then run_at, then add order', async () => {
    const q = defineQueue<string>('ordered')
    const now = Date.now()
    enqueueMany(t.db, q, [
      { value: 'p0-late', id: 'p0-late', runAt: now - 1_000 },
      { value: 'p1-a', id: 'p1-a', priority: 1, runAt: now - 5_000 },
      { value: 'p0-early-b', id: 'p0-early-b', runAt: now - 2_000 },
      { value: 'p-1', id: 'p-1', priority: -1 },
      { value: 'p0-early-c', id: 'p0-early-c', runAt: now - 2_000 },
      { value: 'p1-b', id: 'p1-b', priority: 1, runAt: now - 5_000 },
      { value: 'future', id: 'future', priority: -5, delay: '1h' },
    ])
    const order: string[] = []
    start(t.db, q, (value) => void order.push(value), { slots: 1 })
    await waitFor(() => order.length === 6, 'the six runnable jobs to run')
    expect(order).toEqual(['p-1', 'p0-early-b', 'p0-early-c', 'p0-late', 'p1-a', 'p1-b'])
    expect(state('future')).toBe('scheduled')
  })
})

describe('waking and pruning', () => {
  // Timers are frozen in these two tests and moved by hand: the worker's maintenance tick (every
  // second) would otherwise pick the job up too, and the test could not tell the mechanisms apart.
  const FROZEN_TIMERS = {
    toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'clearImmediate'] as const,
  }

  test('a job added in the same process wakes an idle worker without waiting for a poll', async () => {
    vi.useFakeTimers({ toFake: [...FROZEN_TIMERS.toFake] })
    try {
      const q = defineQueue('wake')
      let ran = 0
      const worker = work(t.db, q, () => void ran++, { pollInterval: '1h' })
      await vi.advanceTimersByTimeAsync(0)
      enqueue(t.db, q, null, { id: 'woken' })
      // At most 20 ms pass, in 1 ms moves: no poll (1 h) and no maintenance tick (1 s) can fire; only the wake-up runs the job.
      for (let turn = 0; turn < 20 && state('woken') !== 'done'; turn++) await vi.advanceTimersByTimeAsync(1)
      expect(ran).toBe(1)
      expect(state('woken')).toBe('done')
      await worker.stop()
    } finally {
      vi.useRealTimers()
    }
  })

  test(
    'jobs added by another process are found through the poll',
    async () => {
      vi.useFakeTimers({ toFake: [...FROZEN_TIMERS.toFake] })
      try {
        const q = defineQueue('crashes')
        const worker = work(t.db, q, () => 'ok', { pollInterval: '10ms' })
        await vi.advanceTimersByTimeAsync(0)
        const producer = startFixture('contract-child.ts', ['enqueue', t.file, 'from-elsewhere'])
        // Its start may take long on a loaded machine: the test's timeout bounds it (printed() has no deadline of its
        // own, the timers being frozen).
        await printed(producer, 'added')
        // Half of the maintenance interval, in poll-sized moves: only the poll can find the job in it.
        for (let elapsed = 0; elapsed < MAINTENANCE_INTERVAL_MS / 2 && state('from-elsewhere') !== 'done'; elapsed += 10) {
          await vi.advanceTimersByTimeAsync(10)
        }
        expect(state('from-elsewhere')).toBe('done')
        producer.process.kill('SIGKILL')
        await producer.exited
        await worker.stop()
      } finally {
        vi.useRealTimers()
      }
    },
    STARTUP_MS + 30_000,
  )

  test('JOB-13 a retention of 30 days prunes a job that failed 40 days ago and keeps one that failed 20 days ago', async () => {
    const day = 86_400_000
    const q = defineQueue('kept-a-month', { retention: { failed: '30d' }, attempts: 1 })
    enqueueMany(t.db, q, [
      { value: 'old', id: 'old' },
      { value: 'recent', id: 'recent' },
    ])
    t.client.prepare(`update jobs_job set state = 'failed', finished_at = ? where id = 'old'`).run(Date.now() - 40 * day)
    t.client.prepare(`update jobs_job set state = 'failed', finished_at = ? where id = 'recent'`).run(Date.now() - 20 * day)
    start(t.db, q, () => 'ok')
    await waitFor(() => jobRow(t.client, 'old') === undefined, 'the job that failed 40 days ago to be pruned')
    expect(state('recent')).toBe('failed')
  })

  test('ended jobs are pruned after their retention, in small batches', async () => {
    const q = defineQueue('pruned', { retention: { done: 1, failed: '1h' }, attempts: 1 })
    enqueueMany(t.db, q, [
      { value: 'ok', id: 'ok' },
      { value: 'bad', id: 'bad' },
    ])
    start(t.db, q, (value, run) => (value === 'bad' ? run.fail('kept a while') : 'ok'))
    await waitFor(() => jobRow(t.client, 'ok') === undefined && state('bad') === 'failed', 'the done job to be pruned')
    expect(t.client.prepare(`select done, failed from jobs_queue where name = 'pruned'`).get()).toEqual({ done: 0, failed: 1 })
  })
})
