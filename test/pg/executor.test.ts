/**
 * The PostgreSQL executor (src/dialect/pg/executor.ts) on a real server, through node-postgres: every
 * method, run as the engine runs it (its own programs for claims, ends, limits, rescues), against rows
 * read back with plain SQL and orders computed by hand.
 */
import { describe, expect, test } from 'vitest'
import { ask, type ListParams, type ListingOrder, type AdminJobRow } from '../../src/dialect/index.js'
import { pgConnectionOf } from '../../src/dialect/pg/connection.js'
import { isOwnerGone } from '../../src/engine/owner.js'
import { defineQueue } from '../../src/queue/define.js'
import { pruneEnded, releaseAbandoned, releaseUnleased } from '../../src/worker/maintenance.js'
import { eachFreshPgDb, POSTGRES_JS } from '../helpers/pg.js'
import { waitFor } from '../helpers/wait.js'
import { addJobs, claim, done, end, newJob, NOW, request, retried, store, workerLease } from './jobs.js'

const t = eachFreshPgDb()
const replies = defineQueue('replies', { attempts: 3, backoff: { initial: '1s', max: '1m' } })
const connection = () => pgConnectionOf(t.db)
const executor = () => connection().executor

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

describe('adding jobs', () => {
  test('JOB-03 [postgres] jobInsert adds a job once per id, and jobExists finds it', async () => {
    const db = executor()
    expect(await connection().write(() => ask(db.jobInsert(newJob('replies', 'a'))))).toBe(true)
    expect(await connection().write((tx) => ask(tx.jobInsert(newJob('replies', 'a', { value: '{"other":true}' }))))).toBe(false)
    expect(await db.jobExists('replies', 'a')).toBe(true)
    expect(await db.jobExists('replies', 'b')).toBe(false)
    expect(await db.jobExists('other', 'a')).toBe(false)
    const [row] = await rows(
      `select queue, id, grp, value, state, priority::float8 as priority, attempts, max_attempts, created_at, run_at from jobs_job`,
    )
    expect(row).toEqual({
      queue: 'replies',
      id: 'a',
      grp: null,
      value: { id: 'a' },
      state: 'waiting',
      priority: 0,
      attempts: 0,
      max_attempts: 3,
      created_at: new Date(NOW),
      run_at: new Date(NOW),
    })
  })

  test('JOB-13 [postgres] jobInsertIfRoom refuses a job past maxWaiting, counting waiting and scheduled jobs only', async () => {
    const db = executor()
    const insert = (id: string, fields: Parameters<typeof newJob>[2] = {}) =>
      connection().write((tx) => ask(tx.jobInsertIfRoom(newJob('replies', id, { maxWaiting: 2, ...fields }))))
    expect(await insert('a')).toBe(true)
    expect(await insert('b', { runAt: NOW + 60_000 })).toBe(true)
    expect(await insert('c')).toBe(false)
    expect(await db.jobExists('replies', 'c')).toBe(false)
    expect(await db.queueWaitingCount('replies')).toBe(2)
    // Another queue has room of its own; an ended job holds no place.
    expect(await connection().write((tx) => ask(tx.jobInsertIfRoom(newJob('other', 'c', { maxWaiting: 2 }))))).toBe(true)
    await rows(`update jobs_job set state = 'done', finished_at = now() where queue = 'replies' and id = 'a'`)
    expect(await db.queueWaitingCount('replies')).toBe(1)
    expect(await insert('c')).toBe(true)
    // A taken id answers false as a full queue does: the caller tells them apart with jobExists.
    expect(await insert('c')).toBe(false)
    expect(await db.queueWaitingCount('nothing')).toBe(0)
  })

  test('queueShiftCounts creates the queue row on its first job and keeps no counters', async () => {
    const db = executor()
    const shift = { queue: 'replies', waiting: 3, scheduled: 1, running: 0, done: 0, failed: 0, canceled: 0 }
    await connection().write(() => ask(db.queueShiftCounts(shift)))
    await connection().write(() => ask(db.queueShiftCounts(shift)))
    expect(await rows(`select name, paused, waiting, scheduled, running from jobs_queue`)).toEqual([
      { name: 'replies', paused: false, waiting: '0', scheduled: '0', running: '0' },
    ])
  })

  test('dataVersion moves on every look, so a poller always looks', async () => {
    const db = executor()
    const first = await db.dataVersion()
    expect(await db.dataVersion()).not.toBe(first)
  })
})

describe('claims and ends', () => {
  test('JOB-17 [postgres] a claim takes due runnable jobs in priority, run_at, seq order, counts the attempt and names its worker, whose row it writes', async () => {
    const c = connection()
    const seqs = await addJobs(c, [
      newJob('replies', 'late', { runAt: NOW - 1_000 }),
      newJob('replies', 'urgent', { priority: -5, runAt: NOW - 10 }),
      newJob('replies', 'early', { runAt: NOW - 5_000 }),
      newJob('replies', 'same-time-1', { runAt: NOW - 1_000 }),
      newJob('replies', 'future', { runAt: NOW + 60_000 }),
      newJob('replies', 'due-scheduled', { runAt: NOW - 2_000, state: 'scheduled' }),
      newJob('other', 'elsewhere'),
    ])
    const claimed = await claim(c, replies, request('owner-1', 4, { renewLease: workerLease('owner-1', { channel: 'chan' }) }))
    expect(claimed.map((job) => job.id)).toEqual(['urgent', 'early', 'due-scheduled', 'late'])
    expect(claimed[0]).toEqual({
      seq: seqs.get('urgent'),
      id: 'urgent',
      grp: null,
      value: '{"id": "urgent"}',
      attempts: 1,
      maxAttempts: 3,
      abandoned: 0,
      claimedFrom: 'waiting',
    })
    expect(claimed[2]!.claimedFrom).toBe('scheduled')
    expect(JSON.parse(claimed[1]!.value)).toEqual({ id: 'early' })
    const running = await rows(`select seq::float8 as seq, owner, attempts from jobs_job where state = 'running' order by seq`)
    expect(running).toEqual(claimed.map((job) => ({ seq: job.seq, owner: 'owner-1', attempts: 1 })).sort((a, b) => a.seq - b.seq))
    expect(await rows(`select owner, (extract(epoch from expires_at) * 1000)::float8 as expires, channel from jobs_worker`)).toEqual([
      { owner: 'owner-1', expires: NOW + 30_000, channel: 'chan' },
    ])
    expect(await rows(`select count(*)::int as unowned from jobs_job where state <> 'running' and owner is not null`)).toEqual([
      { unowned: 0 },
    ])
    expect((await stateOf(seqs.get('urgent')!)).state).toBe('running')
    expect((await stateOf(seqs.get('urgent')!)).attempts).toBe(1)
    // The rest, then nothing: the job due later is not due yet.
    expect((await claim(c, replies, request('owner-1', 10))).map((job) => job.id)).toEqual(['same-time-1'])
    expect(await claim(c, replies, request('owner-1', 10))).toEqual([])
    expect((await claim(c, replies, request('owner-1', 10, { now: NOW + 60_000 }))).map((job) => job.id)).toEqual(['future'])
    expect(await c.executor.jobGetState(seqs.get('elsewhere')!)).toBe('waiting')
    expect(await c.executor.jobGetState(123_456)).toBeUndefined()
  })

  test('JOB-16 [postgres] an end with a lost lease writes nothing', async () => {
    const c = connection()
    const seqs = await addJobs(c, [newJob('replies', 'a')])
    const seq = seqs.get('a')!
    await claim(c, replies, request('owner-1', 1))
    await c.write((db) => ask(db.stepSetIfLeased({ seq, owner: 'owner-1', attempt: 1, name: 'history', answer: '[1,2]' })))
    const record = { seq, owner: 'owner-1', attempt: 1, transition: done(NOW + 1_500, '{"text":"hi"}') }
    expect(await end(c, 'replies', [{ ...record, owner: 'owner-2' }])).toEqual([false])
    expect(await end(c, 'replies', [{ ...record, attempt: 2 }])).toEqual([false])
    expect((await stateOf(seq)).state).toBe('running')
    expect(await c.executor.leaseRenewIfHeld({ seq, owner: 'owner-1', attempt: 1, expiresAt: NOW + 30_000 })).toBe(true)
    expect(await c.executor.stepGet(seq, 'history')).toBe('[1, 2]')

    expect(await end(c, 'replies', [record])).toEqual([true])
    expect(await stateOf(seq)).toMatchObject({
      state: 'done',
      attempts: 1,
      finished_at_ms: NOW + 1_500,
      result: { text: 'hi' },
      abandoned: false,
    })
    expect(await rows(`select owner from jobs_job where seq = $1`, [seq])).toEqual([{ owner: null }])
    // JOB-14: the steps ended with the job.
    expect(await rows(`select * from jobs_step`)).toEqual([])
    // An end that already landed does not land again.
    expect(await end(c, 'replies', [record])).toEqual([false])
  })

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
      const rescue = c.write((db) =>
        ask(db.jobSetStateIfLeased({ ...retried(NOW + 1_000), seq, owner: 'owner-1', attempt: 1, expiredBy: NOW + 40_000 })),
      )
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

  test('JOB-16 [postgres] several ends of one owner land in one statement, each fenced by its own attempt', async () => {
    const c = connection()
    const seqs = await addJobs(
      c,
      ['a', 'b', 'c'].map((id) => newJob('replies', id)),
    )
    await claim(c, replies, request('owner-1', 3))
    const [a, b, cc] = ['a', 'b', 'c'].map((id) => seqs.get(id)!)
    const landed = await end(c, 'replies', [
      { seq: a!, owner: 'owner-1', attempt: 1, transition: done(NOW + 10, '{"n":1}') },
      { seq: b!, owner: 'owner-1', attempt: 2, transition: done(NOW + 20, '{"n":2}') },
      { seq: cc!, owner: 'owner-1', attempt: 1, transition: done(NOW + 30, null) },
    ])
    expect(landed).toEqual([true, false, true])
    expect(await stateOf(a!)).toMatchObject({ state: 'done', finished_at_ms: NOW + 10, result: { n: 1 } })
    expect(await stateOf(b!)).toMatchObject({ state: 'running', finished_at_ms: null, result: null })
    expect(await stateOf(cc!)).toMatchObject({ state: 'done', finished_at_ms: NOW + 30, result: null })
    expect((await rows<{ seq: string }>(`select seq from jobs_job where owner is not null`)).map((row) => Number(row.seq))).toEqual([b])

    // A retry writes its run_at, error and stack, and refunds nothing; a snooze gives its attempt back.
    await c.write((db) =>
      ask(db.jobSetStateIfLeased({ ...retried(NOW + 5_000), refund: 1, seq: b!, owner: 'owner-1', attempt: 1, expiredBy: null })),
    )
    expect(await stateOf(b!)).toMatchObject({ state: 'scheduled', attempts: 0, run_at_ms: NOW + 5_000, error: 'it threw' })
  })

  test('JOB-16 [postgres] jobFlush writes ends, each behind its own fence with its own next state, and claims the next jobs in claim order, in one statement', async () => {
    const c = connection()
    const seqs = await addJobs(
      c,
      ['a', 'b', 'c', 'd', 'e', 'f'].map((id, i) => newJob('replies', id, { priority: i < 3 ? 0 : 1 })),
    )
    const seq = (id: string) => seqs.get(id)!
    await claim(c, replies, request('owner-1', 3))
    await rows(`insert into jobs_step (job, name, answer) values ($1, 'kept', '1'), ($2, 'kept', '1')`, [seq('a'), seq('b')])
    const heard: string[] = []
    const listener = await t.pool.connect()
    listener.on('notification', (notice) => heard.push(notice.payload ?? ''))
    await listener.query('listen drizzle_jobs')
    try {
      const answer = await executor().jobFlush!({
        queue: 'replies',
        owner: 'owner-1',
        now: NOW + 100,
        ends: [
          { ...done(NOW + 10, '{"n":1}'), seq: seq('a'), attempt: 1 },
          { ...retried(NOW + 50, 'it threw'), seq: seq('b'), attempt: 1 },
          // Its run lost the job: another attempt.
          { ...done(NOW + 30, null), seq: seq('c'), attempt: 2 },
        ],
        limit: 2,
        passOver: [seq('d')],
        renewLease: workerLease('owner-1', { expiresAt: NOW + 60_000 }),
      })
      expect(answer.landed).toEqual([true, true, false])
      // Claim order, with d passed over, and b (put back in this statement) not seen by its claim.
      expect(answer.claimed?.map((job) => [job.id, job.attempts, job.claimedFrom])).toEqual([
        ['e', 1, 'waiting'],
        ['f', 1, 'waiting'],
      ])
      expect(await stateOf(seq('a'))).toMatchObject({ state: 'done', finished_at_ms: NOW + 10, result: { n: 1 } })
      expect(await stateOf(seq('b'))).toMatchObject({ state: 'scheduled', attempts: 1, run_at_ms: NOW + 50, error: 'it threw' })
      expect(await stateOf(seq('c'))).toMatchObject({ state: 'running', attempts: 1 })
      expect((await rows<{ job: string }>(`select job from jobs_step order by job`)).map((row) => Number(row.job))).toEqual([seq('b')])
      expect(
        (await rows<{ id: string; owner: string }>(`select id, owner from jobs_job where owner is not null order by id`)).map(
          (row) => `${row.id}:${row.owner}`,
        ),
      ).toEqual(['c:owner-1', 'e:owner-1', 'f:owner-1'])
      expect(await rows(`select (extract(epoch from expires_at) * 1000)::float8 as ms from jobs_worker where owner = 'owner-1'`)).toEqual([
        { ms: NOW + 60_000 },
      ])
      await waitFor(() => heard.length > 0 || undefined, 'the notice')
      expect(heard).toEqual(['ended:replies'])
    } finally {
      listener.release()
    }

    // A queue whose policy needs the general claim (here a stored concurrency) gets none: its ends land all the same.
    await store(c, defineQueue('replies', { concurrency: 10 }))
    const limited = await executor().jobFlush!({
      queue: 'replies',
      owner: 'owner-1',
      now: NOW + 200,
      ends: [{ ...done(NOW + 150, null), seq: seq('e'), attempt: 1 }],
      limit: 5,
      passOver: [],
      renewLease: null,
    })
    expect(limited).toEqual({ landed: [true], claimed: null })
    expect(await stateOf(seq('d'))).toMatchObject({ state: 'waiting', attempts: 0 })

    // A paused queue claims nothing, and needs no general claim to know it.
    await c.write((db) => ask(db.queueSetPaused('replies', true)))
    await rows(`update jobs_queue set concurrency = null where name = 'replies'`)
    expect(
      await executor().jobFlush!({
        queue: 'replies',
        owner: 'owner-1',
        now: NOW + 300,
        ends: [],
        limit: 5,
        passOver: [],
        renewLease: null,
      }),
    ).toEqual({ landed: [], claimed: [] })
  })

  test('JOB-06 [postgres] a step is kept once, only while its run holds the lease', async () => {
    const c = connection()
    const seq = (await addJobs(c, [newJob('replies', 'a')])).get('a')!
    const write = (fields: { owner?: string; attempt?: number; name?: string; answer?: string | null }) =>
      c.write((db) => ask(db.stepSetIfLeased({ seq, owner: 'owner-1', attempt: 1, name: 'step', answer: '"x"', ...fields })))
    expect(await write({}), 'no lease yet').toBe(false)
    await claim(c, replies, request('owner-1', 1))
    expect(await write({ owner: 'owner-2' })).toBe(false)
    expect(await write({ attempt: 2 })).toBe(false)
    expect(await write({ name: 'second' })).toBe(true)
    expect(await write({ name: 'first', answer: '{"a":[1,{"b":null}]}' })).toBe(true)
    expect(await write({ name: 'first', answer: '"again"' }), 'a kept step is not replaced').toBe(false)
    expect(await write({ name: 'nothing', answer: null })).toBe(true)
    expect(await c.executor.stepGet(seq, 'first')).toBe('{"a": [1, {"b": null}]}')
    expect(await c.executor.stepGet(seq, 'nothing')).toBeNull()
    expect(await c.executor.stepGet(seq, 'missing')).toBeUndefined()
    expect(await c.executor.stepList(seq)).toEqual([
      { name: 'second', answer: '"x"' },
      { name: 'first', answer: '{"a": [1, {"b": null}]}' },
      { name: 'nothing', answer: null },
    ])
    // Two steps kept by one transaction come back in the order they were kept, not by name.
    await c.write(function* (db) {
      yield* ask(db.stepSetIfLeased({ seq, owner: 'owner-1', attempt: 1, name: 'zeta', answer: '1' }))
      yield* ask(db.stepSetIfLeased({ seq, owner: 'owner-1', attempt: 1, name: 'alpha', answer: '2' }))
    })
    expect((await c.executor.stepList(seq)).map((step) => step.name)).toEqual(['second', 'first', 'nothing', 'zeta', 'alpha'])
    await c.write((db) => ask(db.stepDeleteMany([seq])))
    expect(await c.executor.stepList(seq)).toEqual([])
  })

  test('JOB-07 [postgres] a per-group cap leaves out groups at it, counting the jobs the claim takes', async () => {
    const c = connection()
    const grouped = defineQueue('replies', { concurrency: { total: 10, perGroup: 1 } })
    await store(c, grouped)
    await addJobs(c, [
      newJob('replies', 'a1', { grp: 'a', runAt: NOW - 5 }),
      newJob('replies', 'a2', { grp: 'a', runAt: NOW - 4 }),
      newJob('replies', 'b1', { grp: 'b', runAt: NOW - 3 }),
      newJob('replies', 'free1', { runAt: NOW - 2 }),
      newJob('replies', 'free2', { runAt: NOW - 1 }),
    ])
    expect((await claim(c, grouped, request('owner-1', 10))).map((job) => job.id)).toEqual(['a1', 'b1', 'free1', 'free2'])
    expect(await c.executor.jobCountRunningByGroup('replies')).toEqual(
      expect.arrayContaining([
        { grp: 'a', running: 1 },
        { grp: 'b', running: 1 },
      ]),
    )
    expect(await claim(c, grouped, request('owner-1', 10))).toEqual([])
    expect(await c.executor.jobGetAvailableByGroup({ queue: 'replies', now: NOW, perGroup: 2, limit: 10, skipAbandoned: 0 })).toEqual([
      { seq: expect.any(Number), grp: 'a' },
    ])
  })
})

describe('leases', () => {
  /** The worker rows, as plain SQL reads them. */
  const workers = () =>
    rows<{ owner: string; expires: number; channel: string | null }>(
      `select owner, (extract(epoch from expires_at) * 1000)::float8 as expires, channel from jobs_worker order by owner`,
    )

  test('one row per worker: workerRenew writes it and answers the runs the worker holds, read from its jobs; workerDelete, jobListHeld, jobRunningOwners and leaseGet', async () => {
    const c = connection()
    const seqs = await addJobs(
      c,
      ['a', 'b', 'c'].map((id) => newJob('replies', id)),
    )
    await claim(c, replies, request('owner-1', 2))
    await claim(c, replies, request('owner-2', 1))
    const [a, b, cc] = ['a', 'b', 'c'].map((id) => seqs.get(id)!)
    expect(await workers()).toEqual([
      { owner: 'owner-1', expires: NOW + 30_000, channel: null },
      { owner: 'owner-2', expires: NOW + 30_000, channel: null },
    ])
    const renewed = await c.executor.workerRenew({ owner: 'owner-1', expiresAt: NOW + 99_000, channel: 'chan' })
    expect(renewed.sort((x, y) => x.job - y.job)).toEqual([
      { job: a, attempt: 1 },
      { job: b, attempt: 1 },
    ])
    // A worker with no row yet gets one; it holds no runs.
    expect(await c.executor.workerRenew({ owner: 'owner-3', expiresAt: NOW + 5_000, channel: null })).toEqual([])
    expect(await workers()).toEqual([
      { owner: 'owner-1', expires: NOW + 99_000, channel: 'chan' },
      { owner: 'owner-2', expires: NOW + 30_000, channel: null },
      { owner: 'owner-3', expires: NOW + 5_000, channel: null },
    ])
    expect(await c.executor.jobListHeld('owner-2')).toEqual([{ job: cc, attempt: 1 }])
    expect(await c.executor.jobListHeld('nobody')).toEqual([])
    expect(await c.executor.leaseGet(a!)).toEqual({ owner: 'owner-1', attempt: 1, expiresAt: NOW + 99_000 })
    expect(await c.executor.leaseGet(cc!)).toEqual({ owner: 'owner-2', attempt: 1, expiresAt: NOW + 30_000 })
    expect(await c.executor.leaseGet(123_456)).toBeUndefined()
    expect((await c.executor.jobRunningOwners('replies')).sort()).toEqual(['owner-1', 'owner-2'])
    expect(await c.executor.jobRunningOwners('other')).toEqual([])

    // A worker's row gone: its runs still name it, with no expiry.
    await c.write((db) => ask(db.workerDelete('owner-2')))
    await c.write((db) => ask(db.workerDelete('owner-3')))
    expect((await workers()).map((row) => row.owner)).toEqual(['owner-1'])
    expect(await c.executor.leaseGet(cc!)).toEqual({ owner: 'owner-2', attempt: 1, expiresAt: null })
    // A running job that names no worker has no lease, and no worker runs it.
    await rows(`update jobs_job set owner = null where seq = $1`, [b])
    expect(await c.executor.leaseGet(b!)).toBeUndefined()
    expect(await c.executor.jobListHeld('owner-1')).toEqual([{ job: a, attempt: 1 }])
    // A cancel clears the worker of its job.
    await c.write((db) => ask(db.jobCancel(a!, NOW)))
    expect(await c.executor.leaseGet(a!)).toBeUndefined()
    expect(await c.executor.jobRunningOwners('replies')).toEqual(['owner-2'])
    expect(await c.executor.workerRenew({ owner: 'owner-1', expiresAt: NOW + 99_000, channel: null })).toEqual([])
  })

  test("JOB-05 [postgres] workerRenew waits for nothing: a worker's row another transaction holds is passed over, and its runs are answered all the same", async () => {
    const c = connection()
    const seq = (await addJobs(c, [newJob('replies', 'a')])).get('a')!
    await claim(c, replies, request('owner-1', 1))
    const other = await t.pool.connect()
    try {
      await other.query('begin')
      await other.query(`select 1 from jobs_worker where owner = 'owner-1' for update`)
      const renewing = c.executor.workerRenew({ owner: 'owner-1', expiresAt: NOW + 99_000, channel: 'chan' })
      const answered = await Promise.race([renewing, new Promise((resolve) => setTimeout(() => resolve('waited'), 5_000))])
      expect(answered).toEqual([{ job: seq, attempt: 1 }])
      await other.query('commit')
    } finally {
      other.release()
    }
    // Passed over, so not renewed: the next renewal renews it.
    expect(await workers()).toEqual([{ owner: 'owner-1', expires: NOW + 30_000, channel: null }])
    await c.executor.workerRenew({ owner: 'owner-1', expiresAt: NOW + 99_000, channel: 'chan' })
    expect(await workers()).toEqual([{ owner: 'owner-1', expires: NOW + 99_000, channel: 'chan' }])
  })

  test('workerHasExpired and workerDeleteExpired: the rows of workers expired and holding no run go; a row that holds, or whose worker runs a job, stays', async () => {
    const c = connection()
    const seq = (await addJobs(c, [newJob('replies', 'a')])).get('a')!
    await claim(c, replies, request('running', 1, { renewLease: workerLease('running', { expiresAt: NOW + 1_000 }) }))
    await c.executor.workerRenew({ owner: 'idle', expiresAt: NOW + 1_000, channel: null })
    await c.executor.workerRenew({ owner: 'fresh', expiresAt: NOW + 60_000, channel: null })
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
      await other.query(`select 1 from jobs_worker where owner = 'running' for update`)
      expect(await c.write((db) => ask(db.workerDeleteExpired(NOW + 5_000)))).toBe(0)
      await other.query('commit')
    } finally {
      other.release()
    }
    expect(await c.write((db) => ask(db.workerDeleteExpired(Infinity)))).toBe(2)
    expect(await workers()).toEqual([])
  })

  test('JOB-16 [postgres] leaseRenewIfHeld renews the row of a run that holds its job, writing it where it is gone; a run that lost its job renews nothing', async () => {
    const c = connection()
    const seqs = await addJobs(
      c,
      ['a', 'b'].map((id) => newJob('replies', id)),
    )
    const [a, b] = [seqs.get('a')!, seqs.get('b')!]
    await claim(c, replies, request('owner-1', 1))
    await claim(c, replies, request('owner-2', 1, { renewLease: workerLease('owner-2', { channel: 'chan' }) }))
    expect(await c.executor.leaseRenewIfHeld({ seq: b, owner: 'owner-2', attempt: 1, expiresAt: NOW + 50_000 })).toBe(true)
    // Another worker, another attempt, a job it does not run: no row of theirs is written.
    expect(await c.executor.leaseRenewIfHeld({ seq: b, owner: 'owner-1', attempt: 1, expiresAt: NOW + 90_000 })).toBe(false)
    expect(await c.executor.leaseRenewIfHeld({ seq: b, owner: 'owner-2', attempt: 2, expiresAt: NOW + 90_000 })).toBe(false)
    expect(await c.executor.leaseRenewIfHeld({ seq: a, owner: 'owner-3', attempt: 1, expiresAt: NOW + 90_000 })).toBe(false)
    expect(await workers()).toEqual([
      { owner: 'owner-1', expires: NOW + 30_000, channel: null },
      { owner: 'owner-2', expires: NOW + 50_000, channel: 'chan' },
    ])
    await c.write((db) => ask(db.workerDelete('owner-1')))
    expect(await c.executor.leaseRenewIfHeld({ seq: a, owner: 'owner-1', attempt: 1, expiresAt: NOW + 60_000 })).toBe(true)
    expect(await workers()).toEqual([
      { owner: 'owner-1', expires: NOW + 60_000, channel: null },
      { owner: 'owner-2', expires: NOW + 50_000, channel: 'chan' },
    ])
  })

  test("JOB-05 [postgres] runs whose worker's row expired or is gone, or whose worker is dead, are taken back, never the asking worker's own", async () => {
    const c = connection()
    const seqs = await addJobs(
      c,
      ['a', 'b', 'c', 'd', 'e', 'f'].map((id) => newJob('replies', id)),
    )
    await claim(c, replies, request('expired', 1, { renewLease: workerLease('expired', { expiresAt: NOW + 1_000 }) }))
    await claim(c, replies, request('dead', 1))
    await claim(c, replies, request('rowless', 1, { renewLease: null }))
    await claim(c, replies, request('alive', 1))
    await claim(c, replies, request('self', 1, { renewLease: workerLease('self', { expiresAt: NOW + 1_000 }) }))
    await claim(c, replies, request('unowned', 1))
    await rows(`update jobs_job set owner = null where id = 'f'`)
    const find = (deadOwners: string[]) =>
      c.executor.leaseGetAbandoned({ queue: 'replies', self: 'self', now: NOW + 5_000, deadOwners, limit: 10 })
    const found = await find(['dead'])
    expect(found.sort((x, y) => x.seq - y.seq)).toEqual([
      { seq: seqs.get('a'), owner: 'expired', attempt: 1, expiresAt: NOW + 1_000, attempts: 1, maxAttempts: 3 },
      { seq: seqs.get('b'), owner: 'dead', attempt: 1, expiresAt: NOW + 30_000, attempts: 1, maxAttempts: 3 },
      { seq: seqs.get('c'), owner: 'rowless', attempt: 1, expiresAt: null, attempts: 1, maxAttempts: 3 },
    ])
    expect((await find([])).map((lease) => lease.owner).sort()).toEqual(['expired', 'rowless'])
    expect(await c.executor.leaseGetAbandoned({ queue: 'replies', self: 'self', now: NOW + 5_000, deadOwners: [], limit: 1 })).toHaveLength(
      1,
    )
    expect(await c.executor.leaseGetAbandoned({ queue: 'other', self: 'self', now: NOW + 5_000, deadOwners: ['dead'], limit: 10 })).toEqual(
      [],
    )
    expect(isOwnerGone('dead')).toBe(false)

    const released = await c.write((db) => releaseAbandoned(db, replies, found, NOW + 5_000))
    expect(released.sort()).toEqual([seqs.get('a'), seqs.get('b'), seqs.get('c')].sort())
    const a = await stateOf(seqs.get('a')!)
    expect(a).toMatchObject({ state: 'scheduled', abandoned: true })
    expect(a.error).toMatch(/its lease expired/)
    expect(await c.executor.leaseGet(seqs.get('a')!)).toBeUndefined()
    expect(await rows(`select id from jobs_job where owner is not null order by id`)).toEqual([{ id: 'd' }, { id: 'e' }])
    // The rescued job runs again alone, once due, found by jobGetFirstAbandoned.
    const runAt = Math.min(a.run_at_ms, (await stateOf(seqs.get('b')!)).run_at_ms, (await stateOf(seqs.get('c')!)).run_at_ms)
    expect(await c.executor.jobGetFirstAbandoned({ queue: 'replies', now: runAt - 1 })).toBeUndefined()
    const first = await c.write((db) => ask(db.jobGetFirstAbandoned({ queue: 'replies', now: runAt + 10_000 })))
    expect(first).toMatchObject({ id: expect.stringMatching(/^[abc]$/), abandoned: 1, attempts: 2, claimedFrom: 'scheduled' })
    expect(first!.runAt).toBe(runAt)
    // Jobs that must run alone are left out of an ordinary claim that skips them.
    expect(await c.write((db) => ask(db.jobGetAvailable({ queue: 'replies', now: runAt + 10_000, limit: 10 }, true)))).toEqual([])
    expect(await c.write((db) => ask(db.jobGetAvailable({ queue: 'replies', now: runAt + 10_000, limit: 10 }, false)))).toHaveLength(3)
  })

  describe("the expiry rule: a run whose worker's row expired, but that nobody took, still holds its jobs", () => {
    /** A run of owner-1 whose row expired at NOW + 1 s, and the rescue of it that a worker reading it at NOW + 5 s writes. */
    async function expiredRun() {
      const c = connection()
      const seq = (await addJobs(c, [newJob('replies', 'a')])).get('a')!
      await claim(c, replies, request('owner-1', 1, { renewLease: workerLease('owner-1', { expiresAt: NOW + 1_000 }) }))
      const rescue = (expiredBy: number | null) =>
        c.write((db) => ask(db.jobSetStateIfLeased({ ...retried(NOW + 9_000), seq, owner: 'owner-1', attempt: 1, expiredBy })))
      return { c, seq, rescue }
    }

    test('JOB-16 [postgres] its own steps and end land', async () => {
      const { c, seq } = await expiredRun()
      expect(await c.write((db) => ask(db.stepSetIfLeased({ seq, owner: 'owner-1', attempt: 1, name: 's', answer: '1' })))).toBe(true)
      expect(await end(c, 'replies', [{ seq, owner: 'owner-1', attempt: 1, transition: done() }])).toEqual([true])
      expect(await stateOf(seq)).toMatchObject({ state: 'done' })
    })

    test('JOB-05 [postgres] a rescue takes it while the row is still the expired one it read, or is gone', async () => {
      const { c, seq, rescue } = await expiredRun()
      expect(await rescue(NOW + 5_000)).toBe(true)
      expect(await stateOf(seq)).toMatchObject({ state: 'scheduled', error: 'it threw' })
      expect(await rows(`select owner from jobs_job where seq = $1`, [seq])).toEqual([{ owner: null }])

      const again = await addJobs(c, [newJob('replies', 'b')])
      await claim(c, replies, request('owner-2', 1))
      await c.write((db) => ask(db.workerDelete('owner-2')))
      const b = again.get('b')!
      expect(
        await c.write((db) => ask(db.jobSetStateIfLeased({ ...retried(NOW), seq: b, owner: 'owner-2', attempt: 1, expiredBy: NOW }))),
      ).toBe(true)
    })

    test('JOB-05 [postgres] a renewal after the rescuer read the row expired makes the rescue change nothing; a dead owner is taken whatever its row says', async () => {
      const { c, seq, rescue } = await expiredRun()
      // The worker's renewal, or its run's before a step.
      expect(await c.executor.leaseRenewIfHeld({ seq, owner: 'owner-1', attempt: 1, expiresAt: NOW + 40_000 })).toBe(true)
      expect(await rescue(NOW + 5_000)).toBe(false)
      await c.executor.workerRenew({ owner: 'owner-1', expiresAt: NOW + 40_000, channel: null })
      expect(await rescue(NOW + 5_000)).toBe(false)
      expect(await stateOf(seq)).toMatchObject({ state: 'running', attempts: 1, error: null })
      expect(await c.executor.jobListHeld('owner-1')).toEqual([{ job: seq, attempt: 1 }])
      // A worker known dead (its process gone from this host) renews nothing more: its runs are taken at once.
      expect(await rescue(null)).toBe(true)
      expect(await c.executor.jobListHeld('owner-1')).toEqual([])
    })

    test("JOB-16 [postgres] a rescue that waited on the worker's row while a renewal committed changes nothing: the fence re-checks the row it waited for", async () => {
      const { seq, rescue } = await expiredRun()
      const other = await t.pool.connect()
      try {
        await other.query('begin')
        await other.query(`update jobs_worker set expires_at = $1 where owner = 'owner-1'`, [new Date(NOW + 60_000)])
        // The rescue reads the row expired in its snapshot, locks the job row, and waits for the worker's row.
        const rescuing = rescue(NOW + 5_000)
        const deadline = performance.now() + 10_000
        while (
          (await rows(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`)).length === 0
        ) {
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

  test('JOB-18 [postgres] running jobs that name no worker are found and ended, only while they still name none', async () => {
    const c = connection()
    const seqs = await addJobs(
      c,
      ['a', 'b'].map((id) => newJob('replies', id)),
    )
    await claim(c, replies, request('owner-1', 2))
    expect(await c.executor.jobCountUnleased('replies')).toBe(0)
    await rows(`update jobs_job set owner = null where seq = $1`, [seqs.get('a')])
    expect(await c.executor.jobCountUnleased('replies')).toBe(1)
    expect(await c.executor.jobCountUnleased('other')).toBe(0)
    const unleased = await c.executor.jobGetUnleased({ queue: 'replies', limit: 10 })
    expect(unleased).toEqual([{ seq: seqs.get('a'), attempts: 1, maxAttempts: 3 }])
    // A run that names its worker is not ended as unleased.
    const transition = done()
    expect(await c.write((db) => ask(db.jobSetStateIfUnleased({ ...transition, seq: seqs.get('b')! })))).toBe(false)
    expect(await c.write((db) => releaseUnleased(db, replies, unleased, NOW))).toEqual([seqs.get('a')])
    expect(await stateOf(seqs.get('a')!)).toMatchObject({ state: 'scheduled', abandoned: false })
    expect(await c.executor.jobCountUnleased('replies')).toBe(0)
    // Ended once: a second end finds it no longer running.
    expect(await c.write((db) => ask(db.jobSetStateIfUnleased({ ...transition, seq: seqs.get('a')! })))).toBe(false)
  })
})

describe('pruning', () => {
  test('jobHasPrunable and jobDeleteEnded delete ended jobs past retention, with their steps', async () => {
    const c = connection()
    const seqs = await addJobs(
      c,
      ['old', 'new', 'failed', 'waiting'].map((id) => newJob('replies', id)),
    )
    await rows(`update jobs_job set state = 'done', finished_at = to_timestamp($1::float8 / 1000) where id = 'old'`, [NOW - 2 * 86_400_000])
    await rows(`update jobs_job set state = 'done', finished_at = to_timestamp($1::float8 / 1000) where id = 'new'`, [NOW])
    await rows(`update jobs_job set state = 'failed', finished_at = to_timestamp($1::float8 / 1000) where id = 'failed'`, [
      NOW - 2 * 86_400_000,
    ])
    await rows(`insert into jobs_step (job, name, answer) values ($1, 'kept', '1')`, [seqs.get('old')])
    const db = c.executor
    expect(await db.jobHasPrunable({ queue: 'replies', state: 'done', before: NOW - 86_400_000 })).toBe(true)
    expect(await db.jobHasPrunable({ queue: 'replies', state: 'canceled', before: NOW })).toBe(false)
    expect(await db.jobHasPrunable({ queue: 'other', state: 'done', before: NOW })).toBe(false)
    // A retention of a million years reaches before the first time PostgreSQL holds: nothing, and no error.
    expect(await db.jobHasPrunable({ queue: 'replies', state: 'done', before: NOW - 1e6 * 365 * 86_400_000 })).toBe(false)
    expect(await c.write((tx) => ask(tx.jobDeleteEnded({ queue: 'replies', state: 'done', before: NOW - 86_400_000, limit: 10 })))).toBe(1)
    // pruneEnded walks every ended state with the queue's retention (failed: 7 days by default).
    expect(await c.write((tx) => pruneEnded(tx, defineQueue('replies', { retention: { failed: '1d' } }), NOW))).toBe(1)
    expect((await rows<{ id: string }>(`select id from jobs_job order by id`)).map((row) => row.id)).toEqual(['new', 'waiting'])
    expect(await rows(`select * from jobs_step`)).toEqual([])
  })
})

describe('reading jobs', () => {
  test('jobGetSnapshot and jobGetSnapshots read a job with its lease, its result only once ended', async () => {
    const c = connection()
    const seqs = await addJobs(c, [newJob('replies', 'a', { grp: 'g', priority: 3 }), newJob('replies', 'b')])
    const [a, b] = [seqs.get('a')!, seqs.get('b')!]
    await claim(c, replies, request('owner-1', 2, { renewLease: workerLease('owner-1', { channel: 'chan' }) }))
    await rows(`update jobs_job set result = '{"early":1}' where seq = $1`, [a])
    const running = await c.executor.jobGetSnapshot('replies', 'a')
    expect(running).toEqual({
      seq: a,
      queue: 'replies',
      id: 'a',
      grp: 'g',
      state: 'running',
      priority: 3,
      runAt: NOW,
      attempts: 1,
      maxAttempts: 3,
      createdAt: NOW,
      finishedAt: null,
      error: null,
      result: null,
      owner: 'owner-1',
      leaseAttempt: 1,
      channel: 'chan',
      rateLimit: null,
      ratePer: null,
      ratePerGroup: null,
      rateStarts: null,
      rateNow: null,
    })
    await end(c, 'replies', [{ seq: b, owner: 'owner-1', attempt: 1, transition: done(NOW + 7, '[1,"two"]') }])
    const both = await c.executor.jobGetSnapshots([a, b, 999_999])
    expect(both.sort((x, y) => x.seq - y.seq).map((row) => [row.state, row.result, row.finishedAt, row.owner])).toEqual([
      ['running', null, null, 'owner-1'],
      ['done', '[1, "two"]', NOW + 7, null],
    ])
    expect(await c.executor.jobGetSnapshot('replies', 'missing')).toBeUndefined()
    // A run whose worker has no row still names its worker and attempt; it has no channel. A job that is not running
    // names no worker, whatever another program left in its owner.
    await c.write((db) => ask(db.workerDelete('owner-1')))
    expect(await c.executor.jobGetSnapshot('replies', 'a')).toMatchObject({ owner: 'owner-1', leaseAttempt: 1, channel: null })
    await rows(`update jobs_job set owner = 'owner-1' where seq = $1`, [b])
    expect(await c.executor.jobGetSnapshot('replies', 'b')).toMatchObject({ state: 'done', owner: null, leaseAttempt: null })
  })

  test('JOB-17 [postgres] jobCountAhead and jobPlacesInLine count the jobs before each in claim order, as computed by hand', async () => {
    const c = connection()
    // A deterministic mix: priorities, run_at (some shared), scheduled jobs due and not, and jobs not runnable.
    const jobs = Array.from({ length: 40 }, (_, i) => {
      const priority = [0, 1, -1, 0, 2][i % 5]!
      const runAt = NOW - 10_000 + ((i * 7) % 6) * 1_000 + (i % 9 === 0 ? 20_000 : 0)
      return newJob('replies', `j${i}`, { priority, runAt, state: runAt > NOW || i % 4 === 0 ? 'scheduled' : 'waiting' })
    })
    const seqs = await addJobs(c, [...jobs, newJob('other', 'elsewhere', { priority: -10 })])
    await rows(`update jobs_job set state = 'running' where id in ('j3', 'j13')`)
    await rows(`update jobs_job set state = 'done' where id = 'j23'`)
    const runnable = jobs
      .map((job) => ({ ...job, seq: seqs.get(job.id)! }))
      .filter((job) => !['j3', 'j13', 'j23'].includes(job.id) && job.runAt <= NOW)
      .sort((x, y) => x.priority - y.priority || x.runAt - y.runAt || x.seq - y.seq)
    expect(runnable.length).toBeGreaterThan(20)
    for (const [place, job] of runnable.entries()) {
      expect(
        await c.executor.jobCountAhead({
          queue: 'replies',
          priority: job.priority,
          runAt: job.runAt,
          seq: job.seq,
          now: NOW,
          limit: 10_000,
        }),
        job.id,
      ).toBe(place)
      expect(
        await c.executor.jobCountAhead({ queue: 'replies', priority: job.priority, runAt: job.runAt, seq: job.seq, now: NOW, limit: 5 }),
      ).toBe(Math.min(place, 5))
    }
    const asked = [runnable[0]!, runnable[4]!, runnable[17]!, runnable[runnable.length - 1]!]
    const places = await c.read((db) =>
      ask(db.jobPlacesInLine({ queue: 'replies', now: NOW, limit: 10_000 }, new Set(asked.map((job) => job.seq)))),
    )
    expect(places).toEqual(
      new Map([
        [asked[0]!.seq, 0],
        [asked[1]!.seq, 4],
        [asked[2]!.seq, 17],
        [asked[3]!.seq, runnable.length - 1],
      ]),
    )
    // Those not met within the limit are given the place the walk stopped at; a job not runnable is never met.
    const notRunnable = seqs.get('j3')!
    const short = await c.executor.jobPlacesInLine(
      { queue: 'replies', now: NOW, limit: 10 },
      new Set([asked[1]!.seq, asked[2]!.seq, notRunnable]),
    )
    expect(short).toEqual(
      new Map([
        [asked[1]!.seq, 4],
        [asked[2]!.seq, 10],
        [notRunnable, 10],
      ]),
    )
    const emptyQueue = await c.executor.jobPlacesInLine({ queue: 'nothing', now: NOW, limit: 10 }, new Set([1, 2]))
    expect(emptyQueue).toEqual(
      new Map([
        [1, 0],
        [2, 0],
      ]),
    )
  })
})

describe('the admin API', () => {
  /** Every page of a listing, walked by keyset as admin/list.ts walks it, `size` jobs at a time. */
  async function walk(order: ListingOrder, filters: Pick<ListParams, 'queue' | 'state' | 'grp'>, size: number): Promise<string[]> {
    const first: Record<ListingOrder, ListParams['k1'][]> = {
      waiting: [-Infinity, -Infinity, -Infinity],
      scheduled: [-Infinity, -Infinity],
      ended: [Buffer.alloc(0), Infinity],
      running: [Infinity],
      newest: [Infinity],
    }
    const next = (row: AdminJobRow): ListParams['k1'][] => {
      if (order === 'waiting') return [row.priority, row.runAt, row.seq]
      if (order === 'scheduled') return [row.runAt, row.seq]
      if (order === 'ended') return [row.finishedAt ?? 0, row.seq]
      return [row.seq]
    }
    const ids: string[] = []
    let keys = first[order]
    for (let pages = 0; pages < 100; pages++) {
      const page = await connection().executor.jobList(order, { ...filters, limit: size, k1: keys[0]!, k2: keys[1], k3: keys[2] })
      ids.push(...page.map((row) => row.id))
      if (page.length < size) return ids
      keys = next(page[page.length - 1]!)
    }
    throw new Error('the listing did not end')
  }

  test('listings page by keyset in the order of each state, filtered by group', async () => {
    const c = connection()
    const seqs = await addJobs(c, [
      newJob('replies', 'w1', { priority: 1, runAt: NOW - 100 }),
      newJob('replies', 'w2', { priority: 0, runAt: NOW - 50, grp: 'g' }),
      newJob('replies', 'w3', { priority: 0, runAt: NOW - 50 }),
      newJob('replies', 'w4', { priority: 0, runAt: NOW - 200, grp: 'g' }),
      newJob('replies', 'w5', { priority: -1, runAt: NOW }),
      newJob('replies', 's1', { runAt: NOW + 3_000 }),
      newJob('replies', 's2', { runAt: NOW + 1_000, grp: 'g' }),
      newJob('replies', 's3', { runAt: NOW + 1_000 }),
      newJob('replies', 'r1'),
      newJob('replies', 'r2'),
      newJob('replies', 'd1'),
      newJob('replies', 'd2'),
      newJob('replies', 'd3'),
      newJob('other', 'o1'),
    ])
    await rows(`update jobs_job set state = 'running', attempts = 1, owner = 'o' where id = 'r1'`)
    // A running job that names no worker is listed too: it holds a place until a worker ends it (JOB-18).
    await rows(`update jobs_job set state = 'running' where id = 'r2'`)
    for (const [id, at] of [
      ['d1', NOW + 5],
      ['d2', NOW + 9],
      ['d3', NOW + 5],
    ] as const) {
      await rows(`update jobs_job set state = 'done', finished_at = to_timestamp($1::float8 / 1000) where id = $2`, [at, id])
    }
    const all = { queue: 'replies', grp: null }
    for (const size of [1, 2, 50]) {
      expect(await walk('waiting', { ...all, state: 'waiting' }, size)).toEqual(['w5', 'w4', 'w2', 'w3', 'w1'])
      expect(await walk('scheduled', { ...all, state: 'scheduled' }, size)).toEqual(['s2', 's3', 's1'])
      expect(await walk('running', { ...all, state: 'running' }, size)).toEqual(['r2', 'r1'])
      expect(await walk('ended', { ...all, state: 'done' }, size)).toEqual(['d2', 'd3', 'd1'])
      expect(await walk('newest', { queue: null, state: null, grp: null }, size)).toEqual([...seqs.keys()].reverse())
    }
    expect(await walk('waiting', { queue: 'replies', state: 'waiting', grp: 'g' }, 1)).toEqual(['w4', 'w2'])
    expect(await walk('scheduled', { queue: 'replies', state: 'scheduled', grp: 'g' }, 1)).toEqual(['s2'])
    expect(await walk('newest', { queue: 'replies', state: 'waiting', grp: null }, 2)).toEqual(['w5', 'w4', 'w3', 'w2', 'w1'])
    expect(await walk('newest', { queue: 'other', state: null, grp: null }, 2)).toEqual(['o1'])
    // A key that only SQLite stores (a text) sorts after every number, as SQLite sorts it.
    expect(
      await c.executor.jobList('waiting', { queue: 'replies', state: 'waiting', grp: null, limit: 10, k1: 'text', k2: 0, k3: 0 }),
    ).toEqual([])

    const record = await c.executor.jobGetRecord('replies', 'd2')
    expect(record).toEqual({
      seq: seqs.get('d2'),
      queue: 'replies',
      id: 'd2',
      grp: null,
      value: '{"id": "d2"}',
      state: 'done',
      priority: 0,
      attempts: 0,
      maxAttempts: 3,
      runAt: NOW,
      createdAt: NOW,
      finishedAt: NOW + 9,
      error: null,
      errorStack: null,
      result: null,
    })
    expect(await c.executor.jobFind('replies', 'd2')).toEqual({ seq: seqs.get('d2'), state: 'done' })
    expect(await c.executor.jobFind('replies', 'nope')).toBeUndefined()
    expect((await c.executor.jobListOfQueue('replies')).map((row) => row.id)).toEqual([...seqs.keys()].filter((id) => id !== 'o1'))
  })

  test('counts by state are counted from the jobs, a queue written with plain SQL included', async () => {
    const c = connection()
    await addJobs(c, [newJob('replies', 'a'), newJob('replies', 'b', { runAt: NOW + 1 }), newJob('replies', 'c')])
    await rows(`update jobs_job set state = 'failed', finished_at = now() where id = 'c'`)
    await rows(`insert into jobs_job (queue, id, state) values ('plain', 'x', 'waiting'), ('plain', 'y', 'canceled')`)
    await c.write((db) => ask(db.queueSetPaused('paused-only', true)))
    const db = c.executor
    expect(await db.queueGetCounts('replies')).toEqual({
      name: 'replies',
      paused: 0,
      waiting: 1,
      scheduled: 1,
      running: 0,
      done: 0,
      failed: 1,
      canceled: 0,
    })
    expect(await db.queueGetCounts('plain')).toEqual({
      name: 'plain',
      paused: 0,
      waiting: 1,
      scheduled: 0,
      running: 0,
      done: 0,
      failed: 0,
      canceled: 1,
    })
    expect(await db.queueGetCounts('paused-only')).toEqual({
      name: 'paused-only',
      paused: 1,
      waiting: 0,
      scheduled: 0,
      running: 0,
      done: 0,
      failed: 0,
      canceled: 0,
    })
    expect(await db.queueGetCounts('nothing')).toBeUndefined()
    expect(await db.queueNames()).toEqual(['paused-only', 'plain', 'replies'])
    expect((await db.queueGetCountsAll()).map((row) => [row.name, row.paused, row.waiting, row.failed, row.canceled])).toEqual([
      ['paused-only', 1, 0, 0, 0],
      ['plain', 0, 1, 0, 1],
      ['replies', 0, 1, 1, 0],
    ])
  })

  test('cancel ends a job that has not ended; retry puts a failed or canceled one back with fresh attempts', async () => {
    const c = connection()
    const seqs = await addJobs(c, [newJob('replies', 'a'), newJob('replies', 'b')])
    const [a, b] = [seqs.get('a')!, seqs.get('b')!]
    await claim(c, replies, request('owner-1', 1))
    expect(await c.executor.jobListHeld('owner-1')).toEqual([{ job: a, attempt: 1 }])
    expect(await c.write((db) => ask(db.jobCancel(a, NOW + 1)))).toBe(true)
    // The canceled run holds its job no more: its fence fails.
    expect(await c.executor.jobListHeld('owner-1')).toEqual([])
    expect(await rows(`select owner from jobs_job where seq = $1`, [a])).toEqual([{ owner: null }])
    expect(await c.executor.leaseRenewIfHeld({ seq: a, owner: 'owner-1', attempt: 1, expiresAt: NOW + 30_000 })).toBe(false)
    expect(await c.write((db) => ask(db.jobCancel(a, NOW + 2)))).toBe(false)
    expect(await c.executor.jobGetOutcome(a)).toEqual({ state: 'canceled', error: null })
    expect(await c.write((db) => ask(db.jobRetry(b, NOW + 3))), 'a waiting job is not retried').toBe(false)
    await rows(`update jobs_job set error = 'gone', result = '1' where seq = $1`, [a])
    expect(await c.write((db) => ask(db.jobRetry(a, NOW + 4)))).toBe(true)
    expect(await stateOf(a)).toMatchObject({
      state: 'waiting',
      attempts: 0,
      run_at_ms: NOW + 4,
      finished_at_ms: null,
      error: null,
      result: null,
    })
    expect(await c.executor.jobGetOutcome(999_999)).toBeUndefined()
  })

  test('ended counts per window and per bucket, and the earliest runnable time', async () => {
    const c = connection()
    await addJobs(
      c,
      ['a', 'b', 'c', 'd'].map((id, i) => newJob('replies', id, { priority: i % 2, runAt: NOW + 1_000 * (4 - i) })),
    )
    for (const [id, at] of [
      ['a', NOW + 100],
      ['b', NOW + 1_100],
      ['c', NOW + 1_500],
    ] as const) {
      await rows(`update jobs_job set state = 'done', finished_at = to_timestamp($1::float8 / 1000) where id = $2`, [at, id])
    }
    const window = { queue: 'replies', state: 'done' as const, since: NOW, until: NOW + 1_500 }
    expect(await c.executor.jobCountEnded(window)).toBe(2)
    expect(await c.executor.jobCountEnded({ ...window, since: -Infinity, until: Infinity })).toBe(3)
    expect(await c.executor.jobCountEndedPerBucket({ ...window, until: NOW + 2_000, bucketMs: 1_000 })).toEqual([
      { bucket: Math.floor((NOW + 100) / 1_000), count: 1 },
      { bucket: Math.floor((NOW + 1_100) / 1_000), count: 2 },
    ])
    expect(await c.executor.jobEarliestRunnable('replies')).toBe(NOW + 1_000)
    await addJobs(c, [newJob('replies', 'e', { priority: 7, runAt: NOW - 1 })])
    expect(await c.executor.jobEarliestRunnable('replies')).toBe(NOW - 1)
    expect(await c.executor.jobEarliestRunnable('nothing')).toBeNull()
  })
})

describe('queues: paused, limits, what a worker reads before it claims', () => {
  test('a paused queue claims nothing; queueClaimable and queueClaimLimits say so', async () => {
    const c = connection()
    await addJobs(c, [newJob('replies', 'a')])
    await c.write((db) => ask(db.queueSetPaused('replies', true)))
    expect(await c.executor.queueClaimable('replies')).toMatchObject({ paused: 1 })
    expect(await c.executor.queueClaimLimits('replies', 0)).toMatchObject({ paused: 1 })
    expect(await claim(c, replies, request('owner-1', 5))).toEqual([])
    await c.write((db) => ask(db.queueSetPaused('replies', false)))
    expect(await claim(c, replies, request('owner-1', 5))).toHaveLength(1)
  })

  test('queueClaimable counts running jobs, says whether a job is due or scheduled, and when the next scheduled job is due', async () => {
    const c = connection()
    expect(await c.executor.queueClaimable('replies')).toEqual({
      paused: 0,
      concurrency: null,
      running: 0,
      waiting: 0,
      scheduled: 0,
      nextScheduled: null,
    })
    // Due or not by the server's clock: these two are due in an hour and in a minute.
    const soon = Date.now() + 60_000
    await addJobs(c, [
      newJob('replies', 'a'),
      newJob('replies', 'b'),
      newJob('replies', 'later', { runAt: soon + 3_600_000 }),
      newJob('replies', 'soon', { runAt: soon }),
    ])
    await store(c, defineQueue('replies', { concurrency: 3 }))
    await claim(c, replies, request('owner-1', 1))
    expect(await c.executor.queueClaimable('replies')).toEqual({
      paused: 0,
      concurrency: 3,
      running: 1,
      waiting: 1,
      scheduled: 1,
      nextScheduled: soon,
    })
    await claim(c, replies, request('owner-1', 1))
    expect(await c.executor.queueClaimable('replies')).toEqual({
      paused: 0,
      concurrency: 3,
      running: 2,
      waiting: 0,
      scheduled: 1,
      nextScheduled: soon,
    })
    // A scheduled job whose time has come may be claimed: it counts as due.
    await addJobs(c, [newJob('replies', 'overdue', { runAt: NOW - 1, state: 'scheduled' })])
    expect(await c.executor.queueClaimable('replies')).toEqual({
      paused: 0,
      concurrency: 3,
      running: 2,
      waiting: 1,
      scheduled: 1,
      nextScheduled: NOW - 1,
    })
    // Jobs written with plain SQL, with no queue row, are seen too.
    await rows(`insert into jobs_job (queue, id) values ('plain', 'x')`)
    expect(await c.executor.queueClaimable('plain')).toEqual({
      paused: 0,
      concurrency: null,
      running: 0,
      waiting: 1,
      scheduled: 0,
      nextScheduled: null,
    })
  })

  test('JOB-19 [postgres] stored limits replace each other, the last stored wins, and the claim reads them', async () => {
    const c = connection()
    expect(await c.executor.queueLimitsGet('replies')).toBeUndefined()
    expect(await store(c, defineQueue('replies', { concurrency: { total: 4, perGroup: 2 } }))).toBeNull()
    expect(await c.executor.queueLimitsGet('replies')).toEqual({
      concurrency: 4,
      perGroup: 2,
      setAt: NOW,
      rateLimit: null,
      ratePer: null,
      ratePerGroup: null,
    })
    expect(await store(c, defineQueue('replies', { concurrency: 1 }), NOW + 1)).toMatch(/total: 4, perGroup: 2.*total: 1/)
    expect(await c.executor.queueLimitsGet('replies')).toEqual({
      concurrency: 1,
      perGroup: null,
      setAt: NOW + 1,
      rateLimit: null,
      ratePer: null,
      ratePerGroup: null,
    })
    await addJobs(
      c,
      ['a', 'b'].map((id) => newJob('replies', id)),
    )
    // The claiming process's definition says no limit; the stored limit holds.
    expect(await claim(c, replies, request('owner-1', 5))).toHaveLength(1)
    expect(await c.write((db) => ask(db.queueClaimLimits('replies', 0)))).toMatchObject({
      paused: 0,
      running: 1,
      concurrency: 1,
      perGroup: null,
      rateLimit: null,
    })
    expect(await claim(c, replies, request('owner-1', 5))).toEqual([])
    expect(await c.executor.queueClaimLimits('nothing', 0)).toBeUndefined()
  })

  test("JOB-22 [postgres] a stored rate is read under the queue row's lock with the server's clock, and its log written back by the claim", async () => {
    const c = connection()
    const rated = defineQueue('replies', { rate: { limit: 2, per: '1m', perGroup: 1 } })
    expect(await store(c, rated)).toBeNull()
    expect(await c.executor.queueLimitsGet('replies')).toEqual({
      concurrency: null,
      perGroup: null,
      setAt: NOW,
      rateLimit: 2,
      ratePer: 60_000,
      ratePerGroup: 1,
    })
    await addJobs(
      c,
      ['a', 'b', 'c'].map((id) => newJob('replies', id, { grp: id === 'c' ? 'g2' : 'g1' })),
    )
    const before = Date.now()
    // b is passed over: its group started a run in this window already.
    expect((await claim(c, rated, request('owner-1', 5))).map((job) => job.id)).toEqual(['a', 'c'])
    const [row] = await rows<{ starts: { starts: number[]; groups: Record<string, number[]> } }>(
      `select rate_starts as starts from jobs_queue where name = 'replies'`,
    )
    expect(row!.starts.starts).toHaveLength(2)
    expect(Object.keys(row!.starts.groups).sort()).toEqual(['g1', 'g2'])
    expect(row!.starts.starts[0]).toBeGreaterThanOrEqual(before - 5_000)
    expect(await claim(c, rated, request('owner-1', 5))).toEqual([])
    const limits = await c.write((db) => ask(db.queueClaimLimits('replies', 0)))
    expect(limits).toMatchObject({ rateLimit: 2, ratePer: 60_000, ratePerGroup: 1 })
    expect(Math.abs(limits!.rateNow! - Date.now())).toBeLessThan(5_000)
  })
})

describe.each(POSTGRES_JS)('the executor on %s', (major) => {
  test(`JOB-20 [${major}] a claim and its end answer the same rows as on node-postgres`, async () => {
    const c = pgConnectionOf(t.postgresJs(major).db)
    const seqs = await addJobs(c, [newJob('replies', 'a', { grp: 'g' }), newJob('replies', 'b')])
    const claimed = await claim(c, replies, request('owner-1', 5))
    expect(claimed).toEqual([
      { seq: seqs.get('a'), id: 'a', grp: 'g', value: '{"id": "a"}', attempts: 1, maxAttempts: 3, abandoned: 0, claimedFrom: 'waiting' },
      { seq: seqs.get('b'), id: 'b', grp: null, value: '{"id": "b"}', attempts: 1, maxAttempts: 3, abandoned: 0, claimedFrom: 'waiting' },
    ])
    const records = claimed.map((job) => ({ seq: job.seq, owner: 'owner-1', attempt: 1, transition: done(NOW + 5, '{"ok":true}') }))
    expect(await end(c, 'replies', records)).toEqual([true, true])
    expect(await c.executor.jobGetSnapshot('replies', 'a')).toMatchObject({
      state: 'done',
      finishedAt: NOW + 5,
      result: '{"ok": true}',
      runAt: NOW,
    })
    expect(await c.executor.queueGetCounts('replies')).toEqual({
      name: 'replies',
      paused: 0,
      waiting: 0,
      scheduled: 0,
      running: 0,
      done: 2,
      failed: 0,
      canceled: 0,
    })
    expect(await c.executor.leaseGet(seqs.get('a')!)).toBeUndefined()
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
    expect(await rows(`select count(*)::int as workers from jobs_worker`)).toEqual([
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
