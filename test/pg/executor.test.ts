/**
 * What only PostgreSQL's executor (src/dialect/pg/executor.ts) shows, on a real server: fences that re-check the
 * rows they waited for, a renewal and a clean-up that wait on no lock, SKIP LOCKED claims and a stored limit across
 * pools. Every request on every driver, PostgreSQL's among them, is tested in test/drivers/executor.test.ts.
 */
import { describe, expect, test } from 'vitest'
import { ask } from '../../src/dialect/index.js'
import { pgConnectionOf } from '../helpers/pg.js'
import { defineQueue } from '../../src/queue/define.js'
import { eachFreshPgDb } from '../helpers/pg.js'
import { addJobs, claim, done, end, endOne, newJob, NOW, request, retried, store, workerLease } from './jobs.js'

const t = eachFreshPgDb()
const replies = defineQueue('replies', { attempts: 3, backoff: { initial: '1s', max: '1m' } })
const connection = () => pgConnectionOf(t.db)

async function rows<Row = Record<string, unknown>>(text: string, values: unknown[] = []): Promise<Row[]> {
  return (await t.pool.query(text, values)).rows as Row[]
}

async function stateOf(seq: number): Promise<{
  state: string
  attempts: number
  error: string | null
  run_at_ms: number
  finished_at_ms: number | null
  result: unknown
  abandoned: boolean
}> {
  const [row] = await rows<{
    state: string
    attempts: number
    error: string | null
    run_at_ms: number
    finished_at_ms: number | null
    result: unknown
    abandoned: boolean
  }>(
    `select state, attempts, error, (extract(epoch from run_at) * 1000)::float8 as run_at_ms,
       (extract(epoch from finished_at) * 1000)::float8 as finished_at_ms, result, abandoned from jobs_job where seq = $1`,
    [seq],
  )
  return row!
}

describe('fences that waited for a lock', () => {
  test('JOB-16 [postgres] a rescue of attempt 1 that waited on the job row while another transaction gave the job to attempt 2 changes nothing: the fence re-checks the rows it waited for', async () => {
    const c = connection()
    const seq = (await addJobs(c, [newJob('replies', 'a')])).get('a')!
    await claim(c, replies, request('owner-1', 1))
    // Another transaction takes the job over and holds it: attempt 1 rescued, attempt 2 claimed by owner-2.
    const other = await t.pool.connect()
    try {
      await other.query('begin')
      await other.query(`update jobs_job set attempts = 2, owner = 'owner-2' where seq = $1`, [seq])
      // The rescue of attempt 1 starts now, reads attempt 1 of owner-1 in its snapshot, and waits for the job row.
      const rescue = c.write((db) => endOne(db, { ...retried(NOW + 1_000), seq, owner: 'owner-1', attempt: 1, expiredBy: NOW + 40_000 }))
      const deadline = performance.now() + 10_000
      while ((await rows(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`)).length === 0) {
        if (performance.now() > deadline) throw new Error('the rescue never waited for the job row')
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      await other.query('commit')
      expect(await rescue).toBe(false)
    } finally {
      other.release()
    }
    expect(await stateOf(seq)).toMatchObject({ state: 'running', attempts: 2, error: null })
    expect(await rows(`select owner from jobs_job where seq = $1`, [seq])).toEqual([{ owner: 'owner-2' }])
  })

  /** A run of owner-1 whose row expired at NOW + 1 s, and the rescue of it that a worker reading it at NOW + 5 s writes. */
  async function expiredRun() {
    const c = connection()
    const seq = (await addJobs(c, [newJob('replies', 'a')])).get('a')!
    await claim(c, replies, request('owner-1', 1, { renewLease: workerLease('owner-1', { expiresAt: NOW + 1_000 }) }))
    const rescue = (expiredBy: number | null) =>
      c.write((db) => endOne(db, { ...retried(NOW + 9_000), seq, owner: 'owner-1', attempt: 1, expiredBy }))
    return { c, seq, rescue }
  }

  test("JOB-16 [postgres] a rescue that waited on the worker's row while a renewal committed changes nothing: the fence re-checks the row it waited for", async () => {
    const { seq, rescue } = await expiredRun()
    const other = await t.pool.connect()
    try {
      await other.query('begin')
      await other.query(`update jobs_lease set expires_at = $1 where owner = 'owner-1'`, [new Date(NOW + 60_000)])
      // The rescue reads the row expired in its snapshot, locks the job row, and waits for the worker's row.
      const rescuing = rescue(NOW + 5_000)
      const deadline = performance.now() + 10_000
      while ((await rows(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`)).length === 0) {
        if (performance.now() > deadline) throw new Error("the rescue never waited for the worker's row")
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      await other.query('commit')
      expect(await rescuing).toBe(false)
    } finally {
      other.release()
    }
    expect(await stateOf(seq)).toMatchObject({ state: 'running', attempts: 1, error: null })
    expect(await rows(`select owner from jobs_job where seq = $1`, [seq])).toEqual([{ owner: 'owner-1' }])
  })
})

describe('leases that wait on no lock', () => {
  /** The worker rows, as plain SQL reads them. */
  const workers = () =>
    rows<{ owner: string; expires: number; channel: string | null }>(
      `select owner, (extract(epoch from expires_at) * 1000)::float8 as expires, channel from jobs_lease order by owner`,
    )

  test("JOB-05 [postgres] workerRenew waits for nothing: a worker's row another transaction holds is passed over, and its runs are answered all the same", async () => {
    const c = connection()
    const seq = (await addJobs(c, [newJob('replies', 'a')])).get('a')!
    await claim(c, replies, request('owner-1', 1))
    const other = await t.pool.connect()
    try {
      await other.query('begin')
      await other.query(`select 1 from jobs_lease where owner = 'owner-1' for update`)
      const renewing = c.executor.workerRenew(workerLease('owner-1', { expiresAt: NOW + 99_000, channel: 'chan' }))
      const answered = await Promise.race([renewing, new Promise((resolve) => setTimeout(() => resolve('waited'), 5_000))])
      expect(answered).toEqual([{ job: seq, attempt: 1 }])
      await other.query('commit')
    } finally {
      other.release()
    }
    // Passed over, so not renewed: the next renewal renews it.
    expect(await workers()).toEqual([{ owner: 'owner-1', expires: NOW + 30_000, channel: null }])
    await c.executor.workerRenew(workerLease('owner-1', { expiresAt: NOW + 99_000, channel: 'chan' }))
    expect(await workers()).toEqual([{ owner: 'owner-1', expires: NOW + 99_000, channel: 'chan' }])
  })

  test('workerHasExpired and workerDeleteExpired: the rows of workers expired and holding no run go; a row that holds, or whose worker runs a job, stays', async () => {
    const c = connection()
    const seq = (await addJobs(c, [newJob('replies', 'a')])).get('a')!
    await claim(c, replies, request('running', 1, { renewLease: workerLease('running', { expiresAt: NOW + 1_000 }) }))
    await c.executor.workerRenew(workerLease('idle', { expiresAt: NOW + 1_000, channel: null }))
    await c.executor.workerRenew(workerLease('fresh', { expiresAt: NOW + 60_000, channel: null }))
    expect(await c.executor.workerHasExpired(NOW + 1_000 - 1)).toBe(false)
    expect(await c.executor.workerHasExpired(NOW + 5_000)).toBe(true)
    expect(await c.write((db) => ask(db.workerDeleteExpired(NOW + 5_000)))).toBe(1)
    expect((await workers()).map((row) => row.owner)).toEqual(['fresh', 'running'])
    expect(await c.executor.workerHasExpired(NOW + 5_000)).toBe(false)
    // Once its run is taken back, the expired worker's row goes too; a worker's row locked by another transaction waits
    // for the next pass.
    await end(c, 'replies', [{ seq, owner: 'running', attempt: 1, transition: done(), expiredBy: NOW + 5_000 }])
    expect(await c.executor.workerHasExpired(NOW + 5_000)).toBe(true)
    const other = await t.pool.connect()
    try {
      await other.query('begin')
      await other.query(`select 1 from jobs_lease where owner = 'running' for update`)
      expect(await c.write((db) => ask(db.workerDeleteExpired(NOW + 5_000)))).toBe(0)
      await other.query('commit')
    } finally {
      other.release()
    }
    expect(await c.write((db) => ask(db.workerDeleteExpired(Infinity)))).toBe(2)
    expect(await workers()).toEqual([])
  })
})

describe('claims at once', () => {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

  test('JOB-07 [postgres] claimers on two pools at once never take the same job: FOR UPDATE SKIP LOCKED', async () => {
    const pools = [pgConnectionOf(t.db), pgConnectionOf(t.postgresJs().db)]
    const seqs = await addJobs(
      pools[0]!,
      Array.from({ length: 200 }, (_, i) => newJob('replies', `job-${i}`)),
    )
    const taken: number[][] = []
    const claimer = async (c: (typeof pools)[number], owner: string) => {
      const mine: number[] = []
      taken.push(mine)
      for (;;) {
        const jobs = await claim(c, replies, request(owner, 7))
        // None left that another claim has not locked: those claims take them.
        if (jobs.length === 0) return
        mine.push(...jobs.map((job) => job.seq))
      }
    }
    await Promise.all(pools.flatMap((c, i) => [0, 1, 2].map((j) => claimer(c, `owner-${i}-${j}`))))
    const all = taken.flat()
    expect(all).toHaveLength(200)
    expect(new Set(all)).toEqual(new Set(seqs.values()))
    expect(taken.filter((mine) => mine.length > 0).length, 'claimers took turns').toBeGreaterThan(1)
    expect(await rows(`select count(*)::int as owned, count(distinct owner)::int as owners from jobs_job where owner is not null`)).toEqual(
      [{ owned: 200, owners: taken.filter((mine) => mine.length > 0).length }],
    )
    // A claimer writes its row with its first claim that takes a job: one that found every job locked by others has none.
    expect(await rows(`select count(*)::int as workers from jobs_lease`)).toEqual([
      { workers: taken.filter((mine) => mine.length > 0).length },
    ])
    expect(await rows(`select state, attempts, count(*)::int as count from jobs_job group by state, attempts`)).toEqual([
      { state: 'running', attempts: 1, count: 200 },
    ])
  })

  test('JOB-07 [postgres] a queue whose stored concurrency is 2 never runs more than 2 at once, however many claim on two pools', async () => {
    const pools = [pgConnectionOf(t.db), pgConnectionOf(t.postgresJs().db)]
    await store(pools[0]!, defineQueue('replies', { concurrency: 2 }))
    const total = 40
    await addJobs(
      pools[0]!,
      Array.from({ length: total }, (_, i) => newJob('replies', `job-${i}`)),
    )
    // Counted up after a claim commits and down before its end starts: never above the running jobs in the table.
    let held = 0
    let most = 0
    let finished = 0
    let sampledMost = 0
    const sampler = (async () => {
      while (finished < total) {
        const [row] = await rows<{ running: number }>(`select count(*)::int as running from jobs_job where state = 'running'`)
        sampledMost = Math.max(sampledMost, row!.running)
        await sleep(1)
      }
    })()
    const claimer = async (c: (typeof pools)[number], owner: string) => {
      while (finished < total) {
        // The claiming process's own definition has no limit: the stored one holds (JOB-19).
        const jobs = await claim(c, replies, request(owner, 2))
        if (jobs.length === 0) {
          await sleep(1)
          continue
        }
        held += jobs.length
        most = Math.max(most, held)
        await sleep(3)
        held -= jobs.length
        await end(
          c,
          'replies',
          jobs.map((job) => ({ seq: job.seq, owner, attempt: job.attempts, transition: done() })),
        )
        finished += jobs.length
      }
    }
    await Promise.all(pools.flatMap((c, i) => [0, 1, 2, 3].map((j) => claimer(c, `owner-${i}-${j}`))))
    await sampler
    expect(finished).toBe(total)
    expect(most).toBe(2)
    expect(sampledMost).toBeLessThanOrEqual(2)
    expect(await pools[0]!.executor.queueGetCounts('replies')).toMatchObject({ done: total, running: 0 })
  })
})
