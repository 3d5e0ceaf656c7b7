/**
 * The admin API (cancel, retryJob, pauseQueue/resumeQueue, queueCounts, listJobs, inspectJob, prune), once per
 * dialect: test names carry it. Every call is awaited: on SQLite it answers at once, on PostgreSQL a promise.
 */
import { drizzle } from 'drizzle-orm/node-postgres'
import pg from 'pg'
import { describe, expect, test } from 'vitest'
import {
  cancel,
  defineQueue,
  enqueue,
  getJob,
  inspectJob,
  isJobsError,
  listJobs,
  pauseQueue,
  prune,
  queueCounts,
  resumeQueue,
  retryJob,
  schedule,
  signal,
  work,
  type JobState,
  type PgDatabase,
  type SyncDatabase,
  type Worker,
} from '../src/index.js'
import { dashboard } from '../src/dashboard/index.js'
import { ADMIN_SQL } from '../src/dialect/sqlite/admin.js'
import { openDb } from './helpers/db.js'
import { DIALECTS, eachContractDb } from './helpers/dialects.js'
import { cpuWait, serverPids } from './helpers/load.js'
import { STARTUP_MS, started, startFixture } from './helpers/processes.js'
import { addedInTrace } from './helpers/traced.js'
import { waitFor } from './helpers/wait.js'

const q = defineQueue<{ n?: number; hold?: boolean }>('admin', { attempts: 1 })
const other = defineQueue<{ n?: number }>('other')

async function expectCode(fn: () => unknown, code: string): Promise<void> {
  try {
    await fn()
  } catch (error) {
    expect(isJobsError(error) && error.code).toBe(code)
    return
  }
  throw new Error(`expected a JobsError ${code}`)
}

/** A job's row as stored, times in ms and the result as JSON text, on either dialect. */
interface Row {
  seq: number
  queue: string
  id: string
  grp: string | null
  state: string
  priority: number
  attempts: number
  run_at: number
  finished_at: number | null
  error: string | null
  result: string | null
}

describe.each(DIALECTS)('%s', (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`
  const onPg = dialect === 'postgres'

  const COLUMNS = onPg
    ? `seq::float8 as seq, queue, id, grp, state, priority::float8 as priority, attempts, extract(epoch from run_at)::float8 * 1000 as run_at,
       extract(epoch from finished_at)::float8 * 1000 as finished_at, error, result::text as result`
    : 'seq, queue, id, grp, state, priority, attempts, run_at, finished_at, error, result'

  /** The job with this id (of `queue`, or of any queue), as stored. */
  async function jobRow(id: string, queue?: string): Promise<Row | undefined> {
    const [row] =
      queue === undefined
        ? await t.query<Row>(`select ${COLUMNS} from jobs_job where id = $1`, id)
        : await t.query<Row>(`select ${COLUMNS} from jobs_job where id = $1 and queue = $2`, id, queue)
    return row
  }
  const state = async (id: string) => (await jobRow(id))?.state

  /** A second handle on the same database, as another part of the app (or a restart) would open. */
  async function reopened<T>(use: (db: SyncDatabase | PgDatabase) => Promise<T>): Promise<T> {
    if (!onPg) return use(openDb(t.address).db)
    const pool = new pg.Pool({ connectionString: t.address, max: 2 })
    try {
      return await use(drizzle(pool))
    } finally {
      await pool.end()
    }
  }

  /** A worker whose runs wait for their signal, after keeping step 'one'; resolves each abort's reason. */
  function holdingWorker(): { worker: Worker; aborted: Map<string, unknown>; finished: Set<string> } {
    const aborted = new Map<string, unknown>()
    const finished = new Set<string>()
    const worker = work(t.db, q, async (_value, run) => {
      await run.step('one', () => 'kept')
      await new Promise<void>((resolve) =>
        run.signal.addEventListener(
          'abort',
          () => {
            aborted.set(run.id, run.signal.reason)
            resolve()
          },
          { once: true },
        ),
      )
      try {
        await run.step('two', () => 'after the cancel')
      } finally {
        finished.add(run.id)
      }
      return 'refused'
    })
    workers.push(worker)
    return { worker, aborted, finished }
  }

  describe('cancel', () => {
    test(`${on} a waiting or scheduled job ends canceled and never runs; an ended job is left as it was`, async () => {
      await enqueue(t.db, q, { n: 1 }, { id: 'waiting' })
      await enqueue(t.db, q, { n: 2 }, { id: 'later', delay: '1h' })
      expect(await cancel(t.db, q, 'waiting')).toBe(true)
      expect(await cancel(t.db, 'admin', 'later')).toBe(true)
      expect(await jobRow('waiting')).toMatchObject({ state: 'canceled', attempts: 0 })
      expect((await jobRow('waiting'))!.finished_at).toBeGreaterThan(Date.now() - 5_000)
      expect(await state('later')).toBe('canceled')
      expect(await cancel(t.db, q, 'waiting')).toBe(false)
      expect(await queueCounts(t.db, q)).toMatchObject({ waiting: 0, scheduled: 0, canceled: 2 })

      await enqueue(t.db, q, { n: 3 }, { id: 'after' })
      const ran: string[] = []
      workers.push(work(t.db, q, (_value, run) => void ran.push(run.id)))
      await waitFor(async () => (await state('after')) === 'done', 'the job added after to run')
      expect(ran).toEqual(['after'])
      expect(await cancel(t.db, q, 'after')).toBe(false)
      expect(await state('after')).toBe('done')
    })

    test(`JOB-14 JOB-16 ${on} a running job in this process: its signal aborts at once, its steps and lease go, its outcome is refused`, async () => {
      const { aborted, finished } = holdingWorker()
      await enqueue(t.db, q, {}, { id: 'running' })
      await waitFor(async () => (await t.count('jobs_step')) === 1, 'the run to keep its first step')
      const load = cpuWait([process.pid, ...(onPg ? await serverPids((sql) => t.query(sql)) : [])])
      const canceledAt = performance.now()
      expect(await cancel(t.db, q, 'running')).toBe(true)
      // On SQLite the abort is synchronous with the cancel's commit in this process; on PostgreSQL it follows
      // the read of the run's lease, one statement later: within 5 s, not counting the time this process and the
      // server's waited for a CPU meanwhile (the machine's load).
      if (onPg) {
        await waitFor(() => aborted.has('running'), 'the run to be aborted')
        const abortedAfter = performance.now() - canceledAt
        expect(abortedAfter - load.ms(), `aborted ${abortedAfter} ms after the cancel was asked`).toBeLessThan(5_000)
      }
      expect(aborted.get('running')).toMatchObject({ code: 'LEASE_LOST', message: expect.stringContaining("job 'running' was canceled") })
      await waitFor(() => finished.has('running'), 'the handler to finish')
      await new Promise((resolve) => setImmediate(resolve))
      expect(await jobRow('running')).toMatchObject({ state: 'canceled', result: null, attempts: 1 })
      expect(await t.count('jobs_step')).toBe(0)
      expect(await t.held()).toBe(0)
      expect(await queueCounts(t.db, q)).toMatchObject({ running: 0, canceled: 1 })
    })

    test(
      `JOB-16 ${on} a running job in another process: its signal aborts within the poll interval, and its late result is refused`,
      async () => {
        const child = startFixture('admin-child.ts', [t.address])
        await started(child, 'ready', 'the worker process to start')
        await enqueue(t.db, q, { hold: true }, { id: 'elsewhere' })
        await waitFor(() => child.output().includes('running elsewhere'), 'the other process to run the job')
        const pids = [process.pid, child.process.pid!, ...(onPg ? await serverPids((sql) => t.query(sql)) : [])]
        const load = cpuWait(pids)
        const canceledAt = Date.now()
        expect(await cancel(t.db, q, 'elsewhere')).toBe(true)
        await waitFor(() => child.output().includes('aborted elsewhere LEASE_LOST'), 'the other process to abort the run')
        // Its poll interval is 20 ms; allow a loaded machine plenty of slack while still proving it was not a lease expiry
        // (30 s). The time this process, the child and the server's processes waited for a CPU meanwhile is the
        // machine's load: it is not counted.
        const abortedAfter = Date.now() - canceledAt
        const waited = load.ms()
        expect(
          abortedAfter - waited,
          `aborted ${abortedAfter} ms after the cancel; ${Math.round(waited)} ms waiting for a CPU`,
        ).toBeLessThan(5_000)
        // The child's handler returned 'too late' right after the abort; give its end a chance to try to land.
        await enqueue(t.db, q, {}, { id: 'next' })
        await waitFor(() => child.output().includes('ran next'), 'the other process to go on with the next job')
        await waitFor(async () => (await state('next')) === 'done', 'the next job to be done')
        expect(await jobRow('elsewhere')).toMatchObject({ state: 'canceled', result: null })
        expect(await t.count('jobs_step')).toBe(0)
        expect(await t.held()).toBe(0)
      },
      STARTUP_MS + 90_000,
    )

    test(`${on} an unknown id is NOT_FOUND; a bad id or queue name is refused before anything is read`, async () => {
      await expectCode(() => cancel(t.db, q, 'missing'), 'NOT_FOUND')
      await expectCode(() => cancel(t.db, q, ''), 'INVALID_OPTION')
      await expectCode(() => cancel(t.db, 'x'.repeat(1025), 'a'), 'TOO_LARGE')
      await expectCode(() => retryJob(t.db, q, 'missing'), 'NOT_FOUND')
    })
  })

  describe('retryJob', () => {
    test(`${on} a failed job runs again with fresh attempts and none of its old steps`, async () => {
      const flaky = defineQueue<{ n: number }>('flaky', { attempts: 2, backoff: { initial: 1, max: 1 } })
      await enqueue(t.db, flaky, { n: 1 }, { id: 'flaky' })
      let broken = true
      const stepRuns: number[] = []
      workers.push(
        work(t.db, flaky, async (_value, run) => {
          await run.step('one', () => stepRuns.push(run.attempt))
          if (broken) throw new Error(`still broken on attempt ${run.attempt}`)
          return { fixed: run.attempt }
        }),
      )
      await waitFor(async () => (await state('flaky')) === 'failed', 'the job to fail for good')
      expect(await jobRow('flaky')).toMatchObject({ attempts: 2, error: 'still broken on attempt 2' })
      expect(stepRuns).toEqual([1])

      broken = false
      expect(await retryJob(t.db, flaky, 'flaky')).toBe(true)
      await waitFor(async () => (await state('flaky')) === 'done', 'the retried job to be done')
      // Fresh attempts: it ran as attempt 1 again, and its step ran again since no old step was kept.
      expect(await jobRow('flaky')).toMatchObject({ attempts: 1, error: null })
      expect(JSON.parse((await jobRow('flaky'))!.result!)).toEqual({ fixed: 1 })
      expect(stepRuns).toEqual([1, 1])
      expect(await queueCounts(t.db, flaky)).toMatchObject({ failed: 0, done: 1, waiting: 0 })
    })

    test(`${on} a canceled job runs again; a waiting, running or done job is left as it was`, async () => {
      await enqueue(t.db, q, { n: 1 }, { id: 'canceled' })
      await cancel(t.db, q, 'canceled')
      const row = (await jobRow('canceled'))!
      expect(await retryJob(t.db, q, 'canceled')).toBe(true)
      expect(await jobRow('canceled')).toMatchObject({ state: 'waiting', attempts: 0, finished_at: null, error: null, result: null })
      expect((await jobRow('canceled'))!.run_at).toBeGreaterThanOrEqual(row.run_at)
      expect(await retryJob(t.db, q, 'canceled')).toBe(false)
      expect(await state('canceled')).toBe('waiting')

      const { aborted } = holdingWorker()
      await waitFor(async () => (await state('canceled')) === 'running', 'the job to run')
      expect(await retryJob(t.db, q, 'canceled')).toBe(false)
      expect(await state('canceled')).toBe('running')
      expect(aborted.size).toBe(0)
      await cancel(t.db, q, 'canceled')
    })
  })

  describe('pauseQueue and resumeQueue', () => {
    test(
      `${on} workers in this process and in another stop claiming while paused, and start again on resume`,
      async () => {
        await pauseQueue(t.db, q)
        expect((await queueCounts(t.db, q)).paused).toBe(true)
        const child = startFixture('admin-child.ts', [t.address])
        const ranHere: string[] = []
        workers.push(work(t.db, q, (_value, run) => void ranHere.push(run.id), { pollInterval: '10ms' }))
        await started(child, 'ready', 'the worker process to start')
        for (let n = 0; n < 6; n++) await enqueue(t.db, q, { n }, { id: `job-${n}` })
        // Both workers poll every 10-20 ms: ten polls each and still nothing claimed.
        const since = Date.now()
        await waitFor(
          async () => Date.now() - since > 300 && (await queueCounts(t.db, q)).waiting === 6,
          'time for ten polls with nothing claimed',
        )
        expect(ranHere).toEqual([])
        expect(child.output()).not.toContain('ran ')
        expect(await queueCounts(t.db, q)).toMatchObject({ waiting: 6, running: 0, paused: true })

        await resumeQueue(t.db, q)
        expect((await queueCounts(t.db, q)).paused).toBe(false)
        await waitFor(async () => (await queueCounts(t.db, q)).done === 6, 'every job to run after the resume')
      },
      STARTUP_MS + 60_000,
    )

    test(`${on} a queue that never held a job can be paused; its flag survives a new connection`, async () => {
      await pauseQueue(t.db, 'empty')
      expect(await reopened((db) => Promise.resolve(queueCounts(db, 'empty')))).toEqual({
        queue: 'empty',
        paused: true,
        waiting: 0,
        scheduled: 0,
        running: 0,
        done: 0,
        failed: 0,
        canceled: 0,
      })
      await resumeQueue(t.db, 'empty')
      expect((await queueCounts(t.db, 'empty')).paused).toBe(false)
    })
  })

  describe('queueCounts', () => {
    test(`${on} answers each state from the queue table, for one queue or all of them`, async () => {
      for (let n = 0; n < 5; n++) await enqueue(t.db, q, { n }, { id: `w${n}` })
      await enqueue(t.db, q, {}, { id: 's', delay: '1h' })
      await enqueue(t.db, other, {}, { id: 'o' })
      await cancel(t.db, q, 'w0')
      expect(await queueCounts(t.db, q)).toEqual({
        queue: 'admin',
        paused: false,
        waiting: 4,
        scheduled: 1,
        running: 0,
        done: 0,
        failed: 0,
        canceled: 1,
      })
      expect((await queueCounts(t.db)).map((counts) => [counts.queue, counts.waiting])).toEqual([
        ['admin', 4],
        ['other', 1],
      ])
      // It is read from the counters, not counted: a change to the counter row shows as is.
      await t.run("update jobs_queue set done = 1000000 where name = 'admin'")
      expect((await queueCounts(t.db, q)).done).toBe(1_000_000)
      expect(await queueCounts(t.db, 'never')).toMatchObject({ waiting: 0, paused: false })
    })

    test(`${on} lists a queue that has a schedule but has held no job yet, with every count at zero`, async () => {
      await enqueue(t.db, q, {}, { id: 'w' })
      await schedule(t.db, defineQueue('digests'), 'daily', { cron: '0 8 * * *', value: {} })
      expect(await queueCounts(t.db)).toEqual([
        { queue: 'admin', paused: false, waiting: 1, scheduled: 0, running: 0, done: 0, failed: 0, canceled: 0 },
        { queue: 'digests', paused: false, waiting: 0, scheduled: 0, running: 0, done: 0, failed: 0, canceled: 0 },
      ])
      // The dashboard's overview, which lists the queues it answers, shows it too.
      const board = dashboard(t.db)
      try {
        const overview = await board.fetch(new Request('http://127.0.0.1/'))
        expect(overview.status).toBe(200)
        expect(await overview.text()).toMatch(/href="[^"]*queues\/digests"/)
      } finally {
        board.close()
      }
    })
  })

  describe('listJobs', () => {
    /** 300 jobs written with plain SQL, in every state, over two queues, with ties in each listing's first keys. */
    async function seed(): Promise<void> {
      const time = (param: string) => (onPg ? `to_timestamp(${param}::float8 / 1000)` : param)
      const tuple = (n: number) => {
        const $ = (k: number) => `$${n * 9 + k}`
        return `(${$(1)}, ${$(2)}, ${$(3)}, ${$(4)}${onPg ? '::jsonb' : ''}, ${$(5)}, ${$(6)}, 0, 3, ${time($(7))}, ${time('1')}, ${time($(8))}, ${$(9)})`
      }
      const rows = Array.from({ length: 300 }, (_, i) => {
        const state = (['waiting', 'scheduled', 'done', 'failed', 'canceled'] as const)[i % 5]
        const ended = state === 'done' || state === 'failed' || state === 'canceled'
        return [
          i % 2 ? 'admin' : 'other',
          `j${i}`,
          i % 3 === 0 ? 'g0' : null,
          JSON.stringify({ i }),
          state,
          i % 4,
          1_000 + ((i * 7919) % 100),
          ended ? 10_000 + ((i * 104729) % 50) : null,
          state === 'failed' ? `failed ${i}` : null,
        ]
      })
      await t.run(
        `insert into jobs_job (queue, id, grp, value, state, priority, attempts, max_attempts, run_at, created_at, finished_at, error) values ${rows.map((_, n) => tuple(n)).join(', ')}`,
        ...rows.flat(),
      )
    }

    async function allPages(options: Parameters<typeof listJobs>[1], limit: number): Promise<{ ids: string[]; pages: number }> {
      const ids: string[] = []
      let cursor: string | undefined
      let pages = 0
      do {
        const page = await listJobs(t.db, { ...options, limit, cursor })
        pages++
        expect(page.jobs.length).toBeLessThanOrEqual(limit)
        ids.push(...page.jobs.map((job) => job.id))
        cursor = page.next ?? undefined
      } while (cursor)
      return { ids, pages }
    }

    /** The same listing computed from the rows directly, in the order the listing promises. */
    async function expected(queue: string | null, state: JobState | null, group: string | null): Promise<string[]> {
      const rows = (await t.query<Row>(`select ${COLUMNS} from jobs_job`)) as unknown as Record<string, number | string>[]
      const chosen = rows.filter(
        (row) =>
          (queue === null || row.queue === queue) && (state === null || row.state === state) && (group === null || row.grp === group),
      )
      const by =
        (...keys: [string, 1 | -1][]) =>
        (a: Record<string, number | string>, b: Record<string, number | string>) => {
          for (const [key, direction] of keys) if (a[key] !== b[key]) return (a[key]! < b[key]! ? -1 : 1) * direction
          return 0
        }
      if (queue !== null && state === 'waiting') chosen.sort(by(['priority', 1], ['run_at', 1], ['seq', 1]))
      else if (queue !== null && state === 'scheduled') chosen.sort(by(['run_at', 1], ['seq', 1]))
      else if (queue !== null && state !== null && state !== 'running') chosen.sort(by(['finished_at', -1], ['seq', -1]))
      else chosen.sort(by(['seq', -1]))
      return chosen.map((row) => String(row.id))
    }

    test(`${on} pages by keyset cover every job once, in each listing order, with group filters`, async () => {
      await seed()
      for (const queue of ['admin', null]) {
        for (const state of [null, 'waiting', 'scheduled', 'done', 'failed', 'canceled'] as const) {
          for (const group of [null, 'g0']) {
            const want = await expected(queue, state, group)
            const got = await allPages({ ...(queue ? { queue } : {}), ...(state ? { state } : {}), ...(group ? { group } : {}) }, 7)
            expect(got.ids, `${queue} ${state} ${group}`).toEqual(want)
            expect(got.pages).toBe(Math.max(1, Math.ceil(want.length / 7)))
          }
        }
      }
    })

    test(`${on} a page deep in the listing is still an index search, and adds meanwhile do not shift pages`, async () => {
      await seed()
      const first = await listJobs(t.db, { queue: 'admin', state: 'waiting', limit: 5 })
      await enqueue(t.db, q, { n: -1 }, { id: 'added-meanwhile', priority: 99 })
      const second = await listJobs(t.db, { queue: 'admin', state: 'waiting', limit: 5, cursor: first.next! })
      const straight = await listJobs(t.db, { queue: 'admin', state: 'waiting', limit: 10 })
      expect([...first.jobs, ...second.jobs].map((job) => job.id)).toEqual(straight.jobs.map((job) => job.id))
      // PostgreSQL's plans are checked on a million jobs by bench/pg-list.ts and test/pg/plans.test.ts.
      if (onPg) return
      const { client } = openDb(t.address)
      for (const [state, index] of [
        ['waiting', 'jobs_job_claim'],
        ['scheduled', 'jobs_job_scheduled'],
        ['done', 'jobs_job_ended'],
      ] as const) {
        const statement = { waiting: 'listWaiting', scheduled: 'listScheduled', done: 'listEnded' }[state]
        const plan = client
          .prepare(`explain query plan ${ADMIN_SQL[statement as keyof typeof ADMIN_SQL].sql}`)
          .all({ queue: 'admin', state, grp: null, k1: 0, k2: 0, k3: 0, limit: 1 }) as { detail: string }[]
        expect(plan.map((row) => row.detail).join('\n')).toContain(`USING INDEX ${index}`)
        expect(plan.map((row) => row.detail).join('\n')).not.toContain('TEMP B-TREE')
      }
    })

    test(`JOB-17 ${on} priorities beyond 2^31 are kept, claimed in their order, counted ahead and listed`, async () => {
      const line = defineQueue<number>('wide-priorities', { concurrency: 1 })
      const [low, middle, high] = [-(2 ** 40), 2 ** 31, 2 ** 40 + 1]
      await enqueue(t.db, line, 1, { id: 'last', priority: high })
      await enqueue(t.db, line, 2, { id: 'middle', priority: middle })
      await enqueue(t.db, line, 3, { id: 'first', priority: low })
      const first = await listJobs(t.db, { queue: line, state: 'waiting', limit: 2 })
      expect(first.jobs.map((job) => [job.id, job.priority])).toEqual([
        ['first', low],
        ['middle', middle],
      ])
      const second = await listJobs(t.db, { queue: line, state: 'waiting', limit: 2, cursor: first.next! })
      expect(second.jobs.map((job) => [job.id, job.priority])).toEqual([['last', high]])
      expect((await inspectJob(t.db, line, 'last'))!.priority).toBe(high)
      expect((await getJob(t.db, line, 'first'))!.ahead).toBe(0)
      expect((await getJob(t.db, line, 'middle'))!.ahead).toBe(1)
      expect((await getJob(t.db, line, 'last'))!.ahead).toBe(2)
      const order: string[] = []
      workers.push(work(t.db, line, (_value, run) => void order.push(run.id), { slots: 1 }))
      await waitFor(async () => (await queueCounts(t.db, line)).done === 3, 'every job to run')
      expect(order).toEqual(['first', 'middle', 'last'])
    })

    test(`${on} running jobs list newest first; records carry the row, parsed`, async () => {
      holdingWorker()
      await enqueue(t.db, q, { n: 1 }, { id: 'r1', group: 'g' })
      await enqueue(t.db, q, { n: 2 }, { id: 'r2' })
      await waitFor(async () => (await queueCounts(t.db, q)).running === 2, 'both jobs to run')
      const page = await listJobs(t.db, { queue: q, state: 'running' })
      expect(page.jobs.map((job) => job.id)).toEqual(['r2', 'r1'])
      expect(page.jobs[1]).toMatchObject({
        queue: 'admin',
        id: 'r1',
        group: 'g',
        value: { n: 1 },
        state: 'running',
        attempt: 1,
        attempts: 1,
        error: null,
        result: null,
        finishedAt: null,
      })
      expect(page.jobs[1]!.runAt).toBeInstanceOf(Date)
      expect((await listJobs(t.db, { queue: q, state: 'running', group: 'g' })).jobs.map((job) => job.id)).toEqual(['r1'])
      for (const id of ['r1', 'r2']) await cancel(t.db, q, id)
    })

    test(`${on} search by id finds the job in each queue that holds it`, async () => {
      await enqueue(t.db, q, { n: 1 }, { id: 'same' })
      await enqueue(t.db, other, { n: 2 }, { id: 'same', group: 'g' })
      expect((await listJobs(t.db, { id: 'same' })).jobs.map((job) => [job.queue, job.value])).toEqual([
        ['admin', { n: 1 }],
        ['other', { n: 2 }],
      ])
      expect((await listJobs(t.db, { id: 'same', group: 'g' })).jobs.map((job) => job.queue)).toEqual(['other'])
      expect((await listJobs(t.db, { id: 'same', queue: q, state: 'done' })).jobs).toEqual([])
    })

    test(`${on} bad options are INVALID_OPTION: an unknown state, a limit out of range, a cursor of another listing`, async () => {
      await seed()
      const next = (await listJobs(t.db, { queue: 'admin', state: 'waiting', limit: 2 })).next!
      await expectCode(() => listJobs(t.db, { queue: 'admin', state: 'done', cursor: next }), 'INVALID_OPTION')
      await expectCode(() => listJobs(t.db, { cursor: 'not a cursor' }), 'INVALID_OPTION')
      await expectCode(() => listJobs(t.db, { state: 'lost' as JobState }), 'INVALID_OPTION')
      await expectCode(() => listJobs(t.db, { limit: 0 }), 'INVALID_OPTION')
      await expectCode(() => listJobs(t.db, { limit: 1001 }), 'INVALID_OPTION')
      await expectCode(() => listJobs(t.db, { sort: 'id' } as never), 'INVALID_OPTION')
    })
  })

  describe('inspectJob', () => {
    test(`${on} shows a job with its steps and lease while it runs, its error and stack once it failed`, async () => {
      holdingWorker()
      await enqueue(t.db, q, { n: 7 }, { id: 'inspected' })
      await waitFor(async () => (await t.count('jobs_step')) === 1, 'the run to keep a step')
      const running = (await inspectJob(t.db, q, 'inspected'))!
      expect(running).toMatchObject({ state: 'running', value: { n: 7 }, steps: [{ name: 'one', answer: 'kept' }], attempt: 1 })
      expect(running.lease).toMatchObject({ attempt: 1, owner: expect.stringContaining(`/${process.pid}/`) })
      expect(running.lease!.expiresAt!.getTime()).toBeGreaterThan(Date.now())
      await cancel(t.db, q, 'inspected')

      const failing = defineQueue('failing', { attempts: 1 })
      await enqueue(t.db, failing, null, { id: 'broken' })
      workers.push(
        work(t.db, failing, () => {
          throw new TypeError('the model said no')
        }),
      )
      await waitFor(async () => (await state('broken')) === 'failed', 'the job to fail')
      const failed = (await inspectJob(t.db, failing, 'broken'))!
      expect(failed).toMatchObject({ state: 'failed', error: 'the model said no', steps: [], lease: null })
      expect(failed.errorStack).toMatch(/^TypeError: the model said no\n\s+at /)
      expect(await inspectJob(t.db, failing, 'missing')).toBeUndefined()
    })

    test(`${on} answers the trace id of the code that added a job; null where no trace context is stored, or another program stored one that is not valid`, async () => {
      const traceId = await addedInTrace(() => enqueue(t.db, q, {}, { id: 'traced' }))
      expect(traceId).toMatch(/^[0-9a-f]{32}$/)
      expect((await inspectJob(t.db, q, 'traced'))!.traceId).toBe(traceId)
      await enqueue(t.db, q, {}, { id: 'untraced' })
      expect(await inspectJob(t.db, q, 'untraced')).toMatchObject({ traceId: null, malformed: null })

      const parent = '00f067aa0ba902b7'
      for (const stored of [
        'not json',
        '[]',
        '{"traceparent":42}',
        `{"traceparent":"00-${traceId.toUpperCase()}-${parent}-01"}`,
        `{"traceparent":"00-${'0'.repeat(32)}-${parent}-01"}`,
        `{"traceparent":"00-${traceId}-${parent}"}`,
      ]) {
        await t.run(`update jobs_job set trace_context = $1 where queue = 'admin' and id = 'untraced'`, stored)
        expect(await inspectJob(t.db, q, 'untraced'), stored).toMatchObject({ traceId: null, malformed: null })
      }
      await t.run(
        `update jobs_job set trace_context = $1 where queue = 'admin' and id = 'untraced'`,
        `{"traceparent":"00-${traceId}-${parent}-00","tracestate":"vendor=x"}`,
      )
      expect((await inspectJob(t.db, q, 'untraced'))!.traceId).toBe(traceId)
    })
  })

  describe('parked jobs', () => {
    test(`JOB-24 ${on} listJobs and inspectJob show what a parked run waits for, and inspectJob the job's events: sent, timed out, waited for`, async () => {
      const parking = defineQueue<{ wait: 'sleep' | 'events' }>('parking')
      await enqueue(t.db, parking, { wait: 'sleep' }, { id: 'napping' })
      await enqueue(t.db, parking, { wait: 'events' }, { id: 'order' })
      await enqueue(t.db, parking, { wait: 'sleep' }, { id: 'delayed', runAt: new Date(Date.now() + 5_400_000) })
      expect(await signal(t.db, parking, 'order', 'early', { by: 'ada' })).toEqual({ sent: true, woke: false })
      const began = Date.now()
      workers.push(
        work(
          t.db,
          parking,
          async ({ wait }, run) => {
            if (wait === 'sleep') return run.sleep('nap', '1h')
            await run.waitForEvent('early')
            await run.waitForEvent('quick', { timeout: 1 })
            return run.waitForEvent('paid', { timeout: '2h' })
          },
          { pollInterval: '20ms' },
        ),
      )
      await waitFor(async () => {
        const { jobs } = await listJobs(t.db, { queue: parking, state: 'scheduled' })
        const waits = jobs.map((job) => job.waitsFor && (job.waitsFor.kind === 'sleep' ? job.waitsFor.step : job.waitsFor.name))
        return waits.includes('nap') && waits.includes('paid')
      }, "both runs to park, the second one waiting for 'paid'")
      const parkedAt = Date.now()
      const { jobs } = await listJobs(t.db, { queue: parking, state: 'scheduled' })
      // Scheduled by the time they run: the sleep's end, the wait's timeout; a delayed add waits for nothing.
      expect(jobs.map((job) => [job.id, job.waitsFor?.kind ?? null])).toEqual([
        ['napping', 'sleep'],
        ['delayed', null],
        ['order', 'event'],
      ])
      const [napping, , order] = jobs
      expect(napping!.waitsFor).toEqual({ kind: 'sleep', step: 'nap', until: napping!.runAt })
      expect(order!.waitsFor).toEqual({ kind: 'event', name: 'paid', until: order!.runAt })
      expect(order!.runAt!.getTime()).toBeGreaterThanOrEqual(began + 7_200_000)
      expect(order!.runAt!.getTime()).toBeLessThanOrEqual(parkedAt + 7_200_000)
      expect((await listJobs(t.db, { queue: parking })).jobs.map((job) => job.waitsFor?.kind ?? null)).toEqual([null, 'event', 'sleep'])

      const detail = (await inspectJob(t.db, parking, 'order'))!
      expect(detail).toMatchObject({ state: 'scheduled', attempt: 0, waitsFor: order!.waitsFor, malformed: null })
      // In the order they took their state ('quick' timed out and 'paid' began in one run, perhaps in one ms: then by name).
      const times = detail.events.map((event) => event.at!.getTime())
      expect(times).toEqual([...times].sort((a, b) => a - b))
      expect(times[0]).toBeGreaterThanOrEqual(began - 1_000)
      expect(detail.events.map(({ at, ...event }) => event).sort((a, b) => a.name.localeCompare(b.name))).toEqual([
        { name: 'early', state: 'sent', payload: { by: 'ada' }, deadline: null },
        { name: 'paid', state: 'waiting', payload: null, deadline: order!.runAt },
        { name: 'quick', state: 'timed_out', payload: null, deadline: expect.any(Date) },
      ])
      expect(await inspectJob(t.db, parking, 'napping')).toMatchObject({ waitsFor: napping!.waitsFor, events: [] })

      // Another program's waits_for that is neither a sleep nor an event is shown as stored, waiting for nothing.
      await t.run(`update jobs_job set waits_for = 'later' where id = 'delayed'`)
      expect(await inspectJob(t.db, parking, 'delayed')).toMatchObject({ waitsFor: null, malformed: { waits_for: "'later'" } })

      // Once its event is sent, the run goes on and ends: the job waits for nothing, and keeps its events.
      expect(await signal(t.db, parking, 'order', 'paid', 42)).toEqual({ sent: true, woke: true })
      await waitFor(async () => (await state('order')) === 'done', 'the job to end done')
      const done = (await inspectJob(t.db, parking, 'order'))!
      expect(done).toMatchObject({ state: 'done', waitsFor: null, result: { timedOut: false, payload: 42 } })
      expect(done.events.map((event) => [event.name, event.state, event.payload])).toEqual([
        ['early', 'sent', { by: 'ada' }],
        ['quick', 'timed_out', null],
        ['paid', 'sent', 42],
      ])
      expect(done.events[2]!.at!.getTime()).toBeGreaterThanOrEqual(parkedAt)
    })
  })

  describe('prune', () => {
    test(`${on} deletes ended jobs that ended before the time given, in batches, and nothing else`, async () => {
      const time = (ms: string) => (onPg ? `to_timestamp(${ms}::float8 / 1000)` : ms)
      await t.run(
        onPg
          ? `insert into jobs_job (queue, id, state, finished_at) select 'admin', 'old-done-' || i, 'done', ${time('1000')} from generate_series(0, 1199) i`
          : `with recursive i(n) as (select 0 union all select n + 1 from i where n < 1199)
           insert into jobs_job (queue, id, state, finished_at) select 'admin', 'old-done-' || n, 'done', 1000 from i`,
      )
      const insert = `insert into jobs_job (queue, id, state, finished_at) values ($1, $2, $3, ${time('$4')})`
      await t.run(insert, 'admin', 'old-failed', 'failed', 1_000)
      await t.run(insert, 'admin', 'new-done', 'done', 5_000)
      await t.run(insert, 'other', 'old-other', 'canceled', 1_000)
      await enqueue(t.db, q, {}, { id: 'waiting' })
      expect(await prune(t.db, { before: 2_000, queue: q, states: ['failed'] })).toBe(1)
      expect(await prune(t.db, { before: new Date(2_000), queue: 'admin' })).toBe(1_200)
      expect(await state('new-done')).toBe('done')
      expect(await state('waiting')).toBe('waiting')
      expect(await state('old-other')).toBe('canceled')
      expect(await prune(t.db, { before: Date.now() })).toBe(2)
      expect(await state('waiting')).toBe('waiting')
      expect(await queueCounts(t.db, q)).toMatchObject({ done: 0, failed: 0, waiting: 1 })
      expect(await queueCounts(t.db, 'other')).toMatchObject({ canceled: 0 })
    })

    test(`${on} refuses a missing before, an unknown state or option`, async () => {
      await expectCode(() => prune(t.db, {} as never), 'INVALID_OPTION')
      await expectCode(() => prune(t.db, { before: Number.NaN }), 'INVALID_OPTION')
      await expectCode(() => prune(t.db, { before: 1, states: ['waiting' as never] }), 'INVALID_OPTION')
      await expectCode(() => prune(t.db, { before: 1, olderThan: '1d' } as never), 'INVALID_OPTION')
    })
  })
})
