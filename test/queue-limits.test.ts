import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, expect, test, vi } from 'vitest'
import { defineQueue, enqueue, enqueueMany, work, type Worker } from '../src/index.js'
import { drain } from '../src/testing/index.js'
import { MIGRATIONS, freshDb, openDb, removeTempDirs, tempDir, type TestDb } from './helpers/db.js'
import { killChildren, STARTUP_MS, started, startFixture, type Child } from './helpers/processes.js'
import { waitFor } from './helpers/wait.js'

let t: TestDb | undefined
const workers: Worker[] = []
afterEach(async () => {
  killChildren()
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
  vi.restoreAllMocks()
  t?.close()
  t = undefined
  removeTempDirs()
})

interface Moment {
  pid: number
  running: number
  mine: number
  stored: number | null
}

test(
  "JOB-19 worker processes whose definitions differ (concurrency 1, then 4, then 1) run under one stored limit, the last started one's, never above it",
  async () => {
    t = freshDb()
    t.client.exec('create table gauge (name text primary key, now integer not null)')
    t.client.exec(
      'create table moments (at integer primary key, pid integer not null, running integer not null, mine integer not null, stored integer)',
    )
    const shared = defineQueue<{ n: number }>('shared')
    const stored = () =>
      t!.client.prepare(`select concurrency, limits_set_at as setAt from jobs_queue where name = 'shared'`).get() as
        | { concurrency: number | null; setAt: number | null }
        | undefined
    const done = () => t!.client.prepare(`select count(*) from jobs_job where state = 'done'`).pluck().get() as number
    let added = 0
    /** Runs `n` jobs through whatever workers run now, from an idle queue to an idle queue, so no limit changes while jobs run. */
    async function runJobs(n: number): Promise<Moment[]> {
      const first = (t!.client.prepare('select coalesce(max(at), 0) from moments').pluck().get() as number) + 1
      enqueueMany(
        t!.db,
        shared,
        Array.from({ length: n }, () => ({ value: { n: added++ } })),
      )
      await waitFor(() => done() === added, `all ${added} jobs to be done`, 45_000)
      return t!.client.prepare('select pid, running, mine, stored from moments where at >= ?').all(first) as Moment[]
    }
    async function startWorker(concurrency: number, slots: number): Promise<Child> {
      const before = stored()?.setAt ?? null
      const child = startFixture('limits-worker.ts', [t!.file, String(concurrency), String(slots)])
      await started(child, 'working', 'the worker process to start')
      await waitFor(
        () => stored()?.setAt !== before && stored()?.concurrency === concurrency,
        `concurrency ${concurrency} to be stored`,
        30_000,
      )
      return child
    }
    const warnings = (child: Child) =>
      child
        .output()
        .split('\n')
        .filter((line) => line.startsWith('warning '))

    // A, defined with concurrency 1 and 4 slots, alone: its limit is stored and holds.
    const a = await startWorker(1, 4)
    const alone = await runJobs(12)
    expect(alone).toHaveLength(12)
    for (const moment of alone) expect(moment).toMatchObject({ stored: 1, running: 1 })

    // B, defined with concurrency 4 but only 2 slots, starts: 4 is in force in both, so A runs more than its own 1.
    const b = await startWorker(4, 2)
    const raised = await runJobs(80)
    for (const moment of raised) expect(moment.stored).toBe(4)
    for (const moment of raised) expect(moment.running).toBeLessThanOrEqual(4)
    expect(Math.max(...raised.map((moment) => moment.running))).toBe(4)
    expect(Math.max(...raised.filter((moment) => moment.pid === a.process.pid).map((moment) => moment.mine))).toBeGreaterThanOrEqual(2)
    expect(Math.max(...raised.filter((moment) => moment.pid === b.process.pid).map((moment) => moment.mine))).toBeLessThanOrEqual(2)

    // C, defined with concurrency 1, starts last: 1 is in force in all three, B's definition of 4 included.
    const c = await startWorker(1, 4)
    const lowered = await runJobs(30)
    for (const moment of lowered) expect(moment).toMatchObject({ stored: 1, running: 1 })

    // Each start that replaced other limits warned once, naming the queue and both values.
    expect(warnings(a)).toEqual([])
    expect(warnings(b)).toHaveLength(1)
    expect(warnings(b)[0]).toMatch(/queue 'shared'.*concurrency \{ total: 1 \}.*concurrency \{ total: 4 \}/)
    expect(warnings(c)).toHaveLength(1)
    expect(warnings(c)[0]).toMatch(/queue 'shared'.*concurrency \{ total: 4 \}.*concurrency \{ total: 1 \}/)
    // Three starts, each with the wait for its limits to be stored, and three batches of jobs.
  },
  3 * (STARTUP_MS + 30_000 + 45_000) + 30_000,
)

test('JOB-19 a worker started with other limits replaces them and warns once, naming both; the same limits warn nothing; no limit stored is no limit', async () => {
  t = freshDb()
  const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
  const row = () =>
    t!.client
      .prepare(`select concurrency, concurrency_per_group as perGroup, limits_set_at as setAt from jobs_queue where name = 'replaced'`)
      .get() as { concurrency: number | null; perGroup: number | null; setAt: number | null } | undefined
  const running = new Set<string>()
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  /** Starts a worker of the queue with these options; resolves once it has stored them. */
  async function start(options: Parameters<typeof defineQueue>[1]): Promise<void> {
    const before = row()?.setAt ?? null
    // A later start must be able to show a later time.
    if (before !== null) await waitFor(() => Date.now() > before, 'the clock to pass the last start')
    workers.push(
      work(t!.db, defineQueue<{ n: number }>('replaced', options), async (_value, run) => {
        running.add(run.id)
        await released
      }),
    )
    await waitFor(() => (row()?.setAt ?? null) !== before, 'the worker to store its limits')
  }

  await start({ concurrency: { total: 2, perGroup: 1 } })
  expect(row()).toMatchObject({ concurrency: 2, perGroup: 1 })
  expect(warn).not.toHaveBeenCalled()

  await start({ concurrency: 3 })
  expect(row()).toMatchObject({ concurrency: 3, perGroup: null })
  expect(warn).toHaveBeenCalledTimes(1)
  expect(String(warn.mock.calls[0]![0])).toMatch(/queue 'replaced'.*concurrency \{ total: 2, perGroup: 1 \}.*concurrency \{ total: 3 \}/)

  await start({ concurrency: 3 })
  expect(warn).toHaveBeenCalledTimes(1)

  await start({})
  expect(row()).toMatchObject({ concurrency: null, perGroup: null })
  expect(warn).toHaveBeenCalledTimes(2)
  expect(String(warn.mock.calls[1]![0])).toMatch(/queue 'replaced'.*concurrency \{ total: 3 \}.*no concurrency limit/)

  // No limit stored: every worker, those defined with a limit too, runs as many as it has slots for.
  enqueueMany(
    t.db,
    defineQueue<{ n: number }>('replaced'),
    Array.from({ length: 12 }, (_, n) => ({ value: { n }, group: 'one' })),
  )
  await waitFor(() => running.size === 12, 'all 12 jobs of one group to run at once')
  release()
})

test('JOB-19 a stored per-group cap holds in a worker whose own definition has none', async () => {
  t = freshDb()
  vi.spyOn(console, 'warn').mockImplementation(() => {})
  let now = 0
  let high = 0
  const handler = async () => {
    high = Math.max(high, ++now)
    await new Promise((resolve) => setTimeout(resolve, 20))
    now--
  }
  const row = () => t!.client.prepare(`select concurrency_per_group from jobs_queue where name = 'grouped'`).pluck().get()
  workers.push(work(t.db, defineQueue<{ n: number }>('grouped'), handler))
  await waitFor(() => row() === null, 'the first worker to store no limit')
  workers.push(work(t.db, defineQueue<{ n: number }>('grouped', { concurrency: { perGroup: 1 } }), handler))
  await waitFor(() => row() === 1, 'the second worker to store its per-group cap')
  enqueueMany(
    t.db,
    defineQueue<{ n: number }>('grouped'),
    Array.from({ length: 8 }, (_, n) => ({ value: { n }, group: 'g' })),
  )
  const done = () => t!.client.prepare(`select count(*) from jobs_job where state = 'done'`).pluck().get()
  await waitFor(() => done() === 8, 'the 8 jobs of the group to be done')
  expect(high).toBe(1)
})

test("JOB-19 drain stores its definition's limits as a worker's start does, and claims only under the stored limit", async () => {
  t = freshDb()
  const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
  const one = defineQueue('drained', { concurrency: 1 })
  enqueue(t.db, one, null, { id: 'held' })
  enqueue(t.db, one, null, { id: 'other' })
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  workers.push(work(t.db, one, () => released, { slots: 1 }))
  const state = (id: string) => t!.client.prepare('select state from jobs_job where id = ?').pluck().get(id)
  await waitFor(() => state('held') === 'running', 'the worker to run the first job')

  // The worker's run takes the one slot the stored limit gives.
  expect(await drain(t.db, one, () => undefined)).toMatchObject({ ran: 0 })
  expect(warn).not.toHaveBeenCalled()

  // A definition with 2 replaces the stored 1, says so, and the second job runs beside the first.
  expect(await drain(t.db, defineQueue('drained', { concurrency: 2 }), () => undefined)).toMatchObject({ ran: 1, done: 1 })
  expect(state('other')).toBe('done')
  expect(warn).toHaveBeenCalledTimes(1)
  expect(String(warn.mock.calls[0]![0])).toMatch(/queue 'drained'.*concurrency \{ total: 1 \}.*concurrency \{ total: 2 \}/)
  release()
})

test('JOB-13 tables migrated before the latest migrations are refused with SCHEMA_MISSING naming what is missing, until they run', () => {
  const apply = (client: { exec(sql: string): unknown }, file: string) => {
    for (const statement of readFileSync(join(MIGRATIONS, file), 'utf8').split('--> statement-breakpoint')) client.exec(statement)
  }
  const files = readdirSync(MIGRATIONS)
    .filter((file) => file.endsWith('.sql'))
    .sort()
  const latestAt = files.length - 3
  expect(files.slice(latestAt - 1)).toEqual([
    expect.stringMatching(/_lease_per_worker\.sql$/),
    expect.stringMatching(/_jobs_lease\.sql$/),
    expect.stringMatching(/_trace_context\.sql$/),
    expect.stringMatching(/_jobs_that_wait\.sql$/),
  ])
  const opened = openDb(join(tempDir(), 'old.db'))
  const older = expect.objectContaining({
    code: 'SCHEMA_MISSING',
    message: expect.stringMatching(
      /^the jobs_\* tables are an older version's \(jobs_job has no debounce_key column\): .*drizzle-kit migrate/,
    ),
  })
  // The version of one jobs_lease row per running job: a jobs_lease of another shape, told apart by its columns.
  for (const file of files.slice(0, latestAt - 1)) apply(opened.client, file)
  const queue = defineQueue('upgraded', { concurrency: 2 })
  expect(() => enqueue(opened.db, queue, null)).toThrow(older)
  // The version whose workers had rows in jobs_worker.
  apply(opened.client, files[latestAt - 1]!)
  expect(() => enqueue(opened.db, queue, null)).toThrow(
    expect.objectContaining({
      code: 'SCHEMA_MISSING',
      message: expect.stringMatching(/^table jobs_lease is missing: .*drizzle-kit migrate/),
    }),
  )
  apply(opened.client, files[latestAt]!)
  // The version whose jobs kept no trace context.
  expect(() => enqueue(opened.db, queue, null)).toThrow(older)
  apply(opened.client, files[latestAt + 1]!)
  // The version whose runs could not wait.
  expect(() => enqueue(opened.db, queue, null)).toThrow(older)
  apply(opened.client, files[latestAt + 2]!)
  expect(enqueue(opened.db, queue, null).added).toBe(true)
  opened.client.close()
})
