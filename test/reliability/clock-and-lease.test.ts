/**
 * Clock and lease edges: a handler that blocks its event loop past its lease
 * while a worker in another process takes the job over (JOB-16), and a
 * system clock that jumps an hour forward or back between a claim and its
 * completion. What a user expects of a jump: nothing is lost, the job ends
 * done, and it runs at most once more; its finished steps never run again.
 */
import { afterEach, beforeEach, expect, test, vi } from 'vitest'
import { defineQueue, enqueue, JobsError, work, type Run, type Worker } from '../../src/index.js'
import { freshDb, removeTempDirs, type TestDb } from '../helpers/db.js'
import { STARTUP_MS } from '../helpers/processes.js'
import { spawnFixture, stopFixture, waitFor, type FixtureProcess } from './processes.js'

const HOUR_MS = 3_600_000

let t: TestDb
const workers: Worker[] = []
const children: FixtureProcess[] = []
beforeEach(() => {
  t = freshDb()
})
afterEach(async () => {
  vi.restoreAllMocks()
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: '5s' })))
  await Promise.all(children.splice(0).map((child) => stopFixture(child)))
  t.close()
  removeTempDirs()
})

interface JobRow {
  seq: number
  state: string
  attempts: number
  result: string | null
  error: string | null
}
const jobOf = (queue: string, id: string): JobRow =>
  t.client.prepare(`select seq, state, attempts, result, error from jobs_job where queue = ? and id = ?`).get(queue, id) as JobRow
const count = (sql: string, ...params: unknown[]): number =>
  t.client
    .prepare(sql)
    .pluck()
    .get(...params) as number

/**
 * How long the block may last: the other process's start (spawned as the block begins), then its takeover.
 * A wait for it is not what a test proves.
 */
const TAKEOVER_MS = STARTUP_MS + 30_000

/**
 * Blocks this process's event loop (no timer, no renewal runs) until the
 * job is done by someone else, or TAKEOVER_MS pass. It sleeps in Atomics.wait,
 * so the block costs no CPU.
 */
function blockUntilDoneElsewhere(queue: string, id: string): void {
  const cell = new Int32Array(new SharedArrayBuffer(4))
  const deadline = performance.now() + TAKEOVER_MS
  while (jobOf(queue, id).state !== 'done' && performance.now() < deadline) Atomics.wait(cell, 0, 0, 20)
}

/** Runs a job whose first attempt blocks past its lease while a worker in another process takes it over; `late` is what the stalled run does once it wakes. */
async function stallPastLease(
  queueName: string,
  late: (run: Run) => Promise<unknown>,
): Promise<{ beforeCalls: number; lateOutcome: unknown; signalReason: unknown }> {
  const queue = defineQueue(queueName, { backoff: { initial: '10ms' } })
  let beforeCalls = 0
  let lateOutcome: unknown
  let signalReason: unknown
  const worker = work(
    t.db,
    queue,
    async (_value, run) => {
      await run.step('before', () => (beforeCalls++, 'from the stalled run'))
      if (run.attempt !== 1) return { by: 'this process, again' }
      children.push(spawnFixture('takeover-worker.ts', [t.file, queueName]))
      blockUntilDoneElsewhere(queueName, 'stalled')
      lateOutcome = await late(run).then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      )
      signalReason = run.signal.aborted ? run.signal.reason : undefined
      return { by: 'the stalled run' }
    },
    { lease: '300ms', slots: 1 },
  )
  enqueue(t.db, queue, {}, { id: 'stalled' })
  await waitFor('the stalled run to wake and finish', () => lateOutcome !== undefined, TAKEOVER_MS + 10_000, 20)
  await worker.stop()
  return { beforeCalls, lateOutcome, signalReason }
}

test(
  'JOB-16 a handler that blocks its event loop past its lease loses the job to another process, is aborted, and its late step is refused without calling its function',
  async () => {
    let afterCalls = 0
    const { beforeCalls, lateOutcome, signalReason } = await stallPastLease('stall-step', (run) =>
      run.step('after', () => (afterCalls++, 'late')),
    )
    expect(lateOutcome).toMatchObject({ error: { code: 'LEASE_LOST' } })
    expect((lateOutcome as { error: unknown }).error).toBeInstanceOf(JobsError)
    expect(signalReason).toMatchObject({ code: 'LEASE_LOST' })
    expect(afterCalls).toBe(0)
    const job = jobOf('stall-step', 'stalled')
    expect(job).toMatchObject({ state: 'done', attempts: 2 })
    expect(JSON.parse(job.result!)).toEqual({ by: 'takeover', attempt: 2, before: 'from the stalled run', beforeRanHere: false })
    expect(beforeCalls).toBe(1)
    expect(count('select count(*) from jobs_step where job = ?', job.seq)).toBe(0)
    expect(count('select count(*) from jobs_job where owner is not null')).toBe(0)
  },
  TAKEOVER_MS + 30_000,
)

test(
  'JOB-16 a handler that blocks its event loop past its lease, then returns, cannot end the job another process finished',
  async () => {
    const { lateOutcome } = await stallPastLease('stall-end', async () => 'returns at once')
    expect(lateOutcome).toEqual({ value: 'returns at once' })
    const job = jobOf('stall-end', 'stalled')
    expect(job).toMatchObject({ state: 'done', attempts: 2, error: null })
    expect(JSON.parse(job.result!)).toMatchObject({ by: 'takeover', attempt: 2, beforeRanHere: false })
    expect(count(`select done from jobs_queue where name = 'stall-end'`)).toBe(1)
    expect(count('select count(*) from jobs_job where owner is not null')).toBe(0)
  },
  TAKEOVER_MS + 30_000,
)

/** A system clock the test moves: `Date.now` for enqueue, and the same clock for the workers through their `clock` option. */
function movableClock(): { clock: () => number; jump: (ms: number) => void } {
  const realNow = Date.now.bind(Date)
  let offset = 0
  const clock = (): number => realNow() + offset
  vi.spyOn(Date, 'now').mockImplementation(clock)
  return { clock, jump: (ms) => (offset += ms) }
}

test('JOB-05 a clock that jumps an hour forward between claim and completion, another worker watching: the job ends done after at most one rerun, its finished step not rerun, and a job due within the hour runs', async () => {
  const { clock, jump } = movableClock()
  const queue = defineQueue('jump-forward', { backoff: { initial: '10ms' } })
  const calls = { one: 0, two: 0, runs: 0 }
  const handler = async (_value: unknown, run: Run): Promise<unknown> => {
    calls.runs++
    await run.step('one', () => calls.one++)
    if (run.id === 'claimed' && run.attempt === 1) {
      jump(HOUR_MS)
      const seq = jobOf(queue.name, 'claimed').seq
      await waitFor(
        'the lease to be taken over, or two maintenance rounds',
        () =>
          count(`select count(*) from jobs_job where seq = ? and state = 'running' and attempts = 1 and owner is not null`, seq) === 0 ||
          undefined,
        2_500,
      ).catch(() => undefined)
    }
    await run.step('two', () => calls.two++)
    return { attempt: run.attempt }
  }
  workers.push(work(t.db, queue, handler, { clock, slots: 1 }), work(t.db, queue, handler, { clock, slots: 1 }))
  enqueue(t.db, queue, {}, { id: 'claimed' })
  enqueue(t.db, queue, {}, { id: 'due-within-the-hour', delay: '30m' })

  await waitFor(
    'both jobs to be done',
    () => ['claimed', 'due-within-the-hour'].every((id) => jobOf(queue.name, id).state === 'done'),
    20_000,
  )
  const job = jobOf(queue.name, 'claimed')
  expect(job.attempts).toBeLessThanOrEqual(2)
  expect(calls.one).toBe(2)
  expect(calls.two).toBeLessThanOrEqual(3)
  expect(calls.runs).toBeLessThanOrEqual(3)
  expect(jobOf(queue.name, 'due-within-the-hour').attempts).toBe(1)
  expect(count('select count(*) from jobs_step')).toBe(0)
  expect(count('select count(*) from jobs_job where owner is not null')).toBe(0)
})

test('JOB-05 a clock that jumps an hour back between claim and completion: the job ends done without a rerun, jobs added after the jump run, and one added before it is not lost', async () => {
  const { clock, jump } = movableClock()
  const queue = defineQueue('jump-back', { backoff: { initial: '10ms' } })
  const runs: string[] = []
  let stepCalls = 0
  workers.push(
    work(
      t.db,
      queue,
      async (_value, run) => {
        runs.push(run.id)
        await run.step('one', () => stepCalls++)
        if (run.id === 'claimed') jump(-HOUR_MS)
        await run.step('two', () => stepCalls++)
        return { attempt: run.attempt }
      },
      { clock, slots: 1 },
    ),
  )
  enqueue(t.db, queue, {}, { id: 'claimed' })
  enqueue(t.db, queue, {}, { id: 'added-before-the-jump' })
  await waitFor('the claimed job to be done', () => jobOf(queue.name, 'claimed').state === 'done', 10_000)
  expect(jobOf(queue.name, 'claimed')).toMatchObject({ attempts: 1, result: JSON.stringify({ attempt: 1 }) })

  enqueue(t.db, queue, {}, { id: 'added-after-the-jump' })
  await waitFor('the job added after the jump to be done', () => jobOf(queue.name, 'added-after-the-jump').state === 'done', 10_000)
  expect(['waiting', 'done']).toContain(jobOf(queue.name, 'added-before-the-jump').state)
  jump(HOUR_MS)
  await waitFor(
    'the job added before the jump to be done once its time comes',
    () => jobOf(queue.name, 'added-before-the-jump').state === 'done',
    10_000,
  )
  expect(runs.filter((id) => id === 'claimed')).toHaveLength(1)
  expect(runs).toHaveLength(3)
  expect(stepCalls).toBe(6)
  expect(count('select count(*) from jobs_job where owner is not null')).toBe(0)
})
