/**
 * Every request of the Executor (src/dialect/executor.ts), once, on every driver of DRIVERS (driver.ts), each test
 * named with its driver (`JOB-16 [sqlite] …`, `JOB-16 [postgres.js 4] …`). Requests run as the engine runs them (the
 * flush with the engine's plan, jobEndMany, releaseAbandoned, releaseUnleased, counting, storeLimits), and the rows they
 * leave are read back with plain SQL. Where drivers differ by design, a test asks what the executor states (how it
 * keeps counts, whether it notifies, whether the database keeps a clock) and holds it to that promise, never which
 * database it is. What only PostgreSQL can show (plans, lock waits, SKIP LOCKED across pools) stays in
 * test/pg/executor.test.ts.
 */
import { describe, expect, test } from 'vitest'
import {
  ask,
  type AdminJobRow,
  type ClaimPlanner,
  type ClaimTake,
  type ClaimTaken,
  type ListingOrder,
  type DebouncedJob,
  type ListParams,
  type NewJob,
  type UniqueJob,
} from '../../src/dialect/index.js'
import { writeShift } from '../../src/engine/counts.js'
import { MAX_TIME_MS } from '../../src/limits.js'
import { isOwnerGone } from '../../src/engine/owner.js'
import { notifyOthers } from '../../src/engine/wake.js'
import { defineQueue } from '../../src/queue/define.js'
import { pruneEnded, releaseAbandoned, releaseUnleased } from '../../src/worker/maintenance.js'
import { waitFor } from '../helpers/wait.js'
import {
  addJobs,
  claim,
  databaseClock,
  done,
  DRIVERS,
  eachDriverDb,
  end,
  flush,
  flushPlanned,
  endOne,
  json,
  newJob,
  NOW,
  policyOf,
  request,
  retried,
  store,
  WORKER_HOST_AND_PID,
  workerLease,
} from './driver.js'

const replies = defineQueue('replies', { attempts: 3, backoff: { initial: '1s', max: '1m' } })

describe.each(DRIVERS.map((driver) => [driver.name, driver] as const))('%s', (_name, driver) => {
  const d = eachDriverDb(driver)
  const on = `[${driver.name}]`
  const c = () => d.connection
  const db = () => d.executor
  /** Ends a job as another program would, with plain SQL, at `at`. */
  const endPlain = (id: string, state: string, at: number) =>
    d.rows(`update jobs_job set state = $1, finished_at = ${d.time('$2')} where id = $3`, state, at, id)
  /** A claim of up to 10 jobs of `replies` for `owner`, due by NOW, with no cap, as the engine's plan hands it to the flush. */
  const take = (owner: string, fields: Partial<ClaimTake> = {}): ClaimTake => ({
    queue: 'replies',
    owner,
    now: NOW,
    limit: 10,
    window: 10,
    passOver: [],
    skipAbandoned: false,
    only: null,
    perGroup: null,
    groupRoom: null,
    renewLease: null,
    ...fields,
  })
  /** A planner that claims `claim` as it is, whatever the queue's policy, and keeps what it took. */
  const planning = (claim: ClaimTake): ClaimPlanner & { taken: ClaimTaken } => ({
    taken: { claimed: [], heldBack: [] },
    plan: () => ({ alone: null, holdBack: false, take: claim }),
    claimed(taken) {
      this.taken = taken
      return null
    },
  })
  /** What a flush takes for `claim`, committed. */
  const takeWith = async (claim: ClaimTake): Promise<ClaimTaken> =>
    (
      await flushPlanned(c(), { queue: claim.queue, owner: claim.owner, now: claim.now }, () => ({
        alone: null,
        holdBack: false,
        take: claim,
      }))
    ).taken
  /** What a flush takes for `claim`, in a transaction then rolled back. */
  const rolledBack = async (claim: ClaimTake): Promise<ClaimTaken> => {
    const planner = planning(claim)
    const rollback = new Error('rolled back')
    // A synchronous driver throws at once, an asynchronous one rejects: either way the transaction rolls back.
    const write = async () =>
      c().write(function* (tx) {
        yield* ask(
          tx.jobFlush({ queue: claim.queue, owner: claim.owner, now: claim.now, clock: () => claim.now, ends: [], claim: planner }),
        )
        throw rollback
      })
    await expect(write()).rejects.toBe(rollback)
    return planner.taken
  }

  describe('adding jobs', () => {
    test(`JOB-03 ${on} jobInsert adds a job once per id, and jobExists finds it`, async () => {
      expect(await c().write((tx) => ask(tx.jobInsert(newJob('replies', 'a', { grp: 'g', priority: -3 }))))).toBe(true)
      expect(await c().write((tx) => ask(tx.jobInsert(newJob('replies', 'a', { value: '{"other":true}' }))))).toBe(false)
      expect(await db().jobExists('replies', 'a')).toBe(true)
      expect(await db().jobExists('replies', 'b')).toBe(false)
      expect(await db().jobExists('other', 'a')).toBe(false)
      const [row] = await d.rows<Record<string, unknown>>(
        `select queue, id, grp, value, state, cast(priority as integer) as priority, attempts, max_attempts,
          ${d.ms('created_at')} as created, ${d.ms('run_at')} as "runAt", owner from jobs_job`,
      )
      expect({ ...row, value: json(row!.value) }).toEqual({
        queue: 'replies',
        id: 'a',
        grp: 'g',
        value: { id: 'a' },
        state: 'waiting',
        priority: -3,
        attempts: 0,
        max_attempts: 3,
        created: NOW,
        runAt: NOW,
        owner: null,
      })
    })

    test(`JOB-13 ${on} jobAdd refuses a job past maxWaiting, counting waiting and scheduled jobs only, and counts the jobs it adds; queueCountWaiting`, async () => {
      // As enqueue adds: the whole add, in one transaction.
      const insert = (job: NewJob) => c().write((tx) => ask(tx.jobAdd(job)))
      const room = (id: string, fields: Partial<NewJob> = {}) => insert(newJob('replies', id, { maxWaiting: 2, ...fields }))
      expect(await room('a')).toBe(true)
      expect(await room('b', { runAt: NOW + 60_000 })).toBe(true)
      expect(await room('c')).toBe(false)
      expect(await db().jobExists('replies', 'c')).toBe(false)
      expect(await db().queueCountWaiting('replies')).toBe(2)
      // Another queue has room of its own; an ended job holds no place.
      expect(await insert(newJob('other', 'c', { maxWaiting: 2 }))).toBe(true)
      await endPlain('a', 'done', NOW)
      expect(await db().queueCountWaiting('replies')).toBe(1)
      expect(await room('c')).toBe(true)
      // A taken id answers false as a full queue does: the caller tells them apart with jobExists.
      expect(await room('c')).toBe(false)
      expect((await db().queueCountWaiting('nothing')) ?? 0).toBe(0)
      // The add counted each job in the state it was added in.
      expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 1, scheduled: 1 })
    })

    test(`JOB-03 ${on} jobInsertMany adds a batch in order, but for ids taken or repeated, and answers the ids it added`, async () => {
      await addJobs(c(), [newJob('replies', 'job-7'), newJob('replies', 'job-150')])
      const ids = Array.from({ length: 250 }, (_, i) => `job-${i}`)
      const batch = [...ids, 'job-3'].map(
        (id, i) =>
          [id, i % 2 ? 'g' : null, JSON.stringify({ i }), i === 5 ? 'scheduled' : 'waiting', i % 3, NOW + (i === 5 ? 60_000 : 0)] as const,
      )
      const added = await c().write((tx) =>
        ask(tx.jobInsertMany({ queue: 'replies', maxAttempts: 4, now: NOW, traceContext: null, jobs: batch })),
      )
      const expected = ids.filter((id) => id !== 'job-7' && id !== 'job-150')
      expect(added).toEqual(expected)
      const stored = await d.rows<{
        id: string
        grp: string | null
        value: unknown
        state: string
        priority: number
        max_attempts: number
      }>(
        `select id, grp, value, state, cast(priority as integer) as priority, max_attempts from jobs_job
        where queue = 'replies' order by seq`,
      )
      expect(stored.map((row) => row.id)).toEqual(['job-7', 'job-150', ...expected])
      expect(stored.find((row) => row.id === 'job-5')).toMatchObject({ grp: 'g', state: 'scheduled', priority: 2, max_attempts: 4 })
      expect(json(stored.find((row) => row.id === 'job-5')!.value)).toEqual({ i: 5 })
      expect(
        await c().write((tx) =>
          ask(tx.jobInsertMany({ queue: 'replies', maxAttempts: 4, now: NOW, traceContext: null, jobs: batch.slice(0, 3) })),
        ),
      ).toEqual([])
    })

    test(`JOB-25 ${on} jobAddUnique adds a job unless its id is taken, its key is held in a state that holds it, or the queue is full, and answers the holder; jobGetHolder`, async () => {
      const states = ',waiting,scheduled,running,done,'
      const unique = (id: string, key: string, fields: Partial<NewJob> = {}): UniqueJob => ({
        ...newJob('replies', id, fields),
        uniqueKey: key,
        uniqueStates: states,
      })
      const add = (job: UniqueJob) => c().write((tx) => ask(tx.jobAddUnique(job)))
      expect(await add(unique('a', 'k'))).toEqual({ added: true })
      expect(await add(unique('b', 'k'))).toEqual({ added: false, holder: { id: 'a', matched: 'unique' } })
      expect(await add(unique('a', 'other'))).toEqual({ added: false, holder: { id: 'a', matched: 'id' } })
      expect(await add({ ...unique('c', 'k'), queue: 'elsewhere' })).toEqual({ added: true })
      expect(await db().jobGetHolder({ queue: 'replies', id: 'x', uniqueKey: 'k' })).toEqual({ id: 'a', matched: 'unique' })
      expect(await db().jobGetHolder({ queue: 'replies', id: 'a', uniqueKey: 'k' })).toEqual({ id: 'a', matched: 'id' })
      expect(await db().jobGetHolder({ queue: 'replies', id: 'x', uniqueKey: null })).toBeUndefined()
      expect(await db().jobGetHolder({ queue: 'replies', id: 'x', uniqueKey: 'nobody' })).toBeUndefined()
      // A state its unique_states leave out lets the key go; one they name holds it.
      await endPlain('a', 'failed', NOW)
      expect(await add(unique('b', 'k', { runAt: NOW + 60_000 }))).toEqual({ added: true })
      await endPlain('b', 'done', NOW)
      expect(await add(unique('d', 'k'))).toEqual({ added: false, holder: { id: 'b', matched: 'unique' } })
      // A full queue adds nothing and names no holder; a held key still answers its holder.
      expect(await add(unique('e', 'new', { maxWaiting: 1 }))).toEqual({ added: true })
      expect(await add(unique('f', 'newer', { maxWaiting: 1 }))).toEqual({ added: false, holder: null })
      expect(await add(unique('f', 'k', { maxWaiting: 1 }))).toEqual({ added: false, holder: { id: 'b', matched: 'unique' } })
      expect(await d.rows(`select id, state, unique_key, unique_states from jobs_job where queue = 'replies' order by seq`)).toEqual([
        { id: 'a', state: 'failed', unique_key: 'k', unique_states: states },
        { id: 'b', state: 'done', unique_key: 'k', unique_states: states },
        { id: 'e', state: 'waiting', unique_key: 'new', unique_states: states },
      ])
      // Counted as added, and nothing for the adds that added nothing.
      expect(await db().queueCountWaiting('replies')).toBe(1)
      expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 1, scheduled: 0, failed: 1, done: 1 })
    })

    test(`JOB-26 ${on} jobAddDebounced adds a job, or gives the job of its debounce id that has not started its value, run_at and state, even in a full queue; a started job holds the id no more`, async () => {
      const debounced = (id: string, key: string, fields: Partial<NewJob> = {}): DebouncedJob => ({
        ...newJob('replies', id, fields),
        debounceKey: key,
      })
      const add = (job: DebouncedJob) => c().write((tx) => ask(tx.jobAddDebounced(job)))
      const stored = () =>
        d.rows<{ id: string; value: unknown; state: string; runAt: number; debounce_key: string | null }>(
          `select id, value, state, ${d.ms('run_at')} as "runAt", debounce_key from jobs_job where queue = 'replies' order by seq`,
        )
      expect(await add(debounced('a', 'k', { runAt: NOW + 1_000 }))).toEqual({ added: true })
      expect(await add(debounced('b', 'k', { runAt: NOW + 5_000, value: '{"n":2}' }))).toEqual({
        added: false,
        holder: { id: 'a', matched: 'debounce' },
      })
      expect((await stored()).map((row) => ({ ...row, value: json(row.value) }))).toEqual([
        { id: 'a', value: { n: 2 }, state: 'scheduled', runAt: NOW + 5_000, debounce_key: 'k' },
      ])
      expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 0, scheduled: 1 })
      // Due at once: the job waits, counted so.
      expect(await add(debounced('c', 'k', { value: '{"n":3}' }))).toEqual({ added: false, holder: { id: 'a', matched: 'debounce' } })
      expect(await stored()).toMatchObject([{ id: 'a', state: 'waiting', runAt: NOW }])
      expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 1, scheduled: 0 })
      // Another id, another job; a full queue merges but adds nothing.
      expect(await add(debounced('d', 'other', { maxWaiting: 1 }))).toEqual({ added: false, holder: null })
      expect(await add(debounced('d', 'k', { maxWaiting: 1, value: '{"n":4}' }))).toEqual({
        added: false,
        holder: { id: 'a', matched: 'debounce' },
      })
      // Started, the job takes no more adds: the next one is a job of its own.
      expect((await claim(c(), replies, request('owner-1', 10))).map((job) => job.id)).toEqual(['a'])
      expect(await add(debounced('e', 'k', { runAt: NOW + 1_000 }))).toEqual({ added: true })
      expect(await add(debounced('f', 'k', { runAt: NOW + 2_000 }))).toEqual({ added: false, holder: { id: 'e', matched: 'debounce' } })
      expect((await stored()).map((row) => [row.id, row.state, json(row.value)])).toEqual([
        ['a', 'running', { n: 4 }],
        ['e', 'scheduled', { id: 'f' }],
      ])
      expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 0, scheduled: 1, running: 1 })
    })

    test(`JOB-25 ${on} jobRetry puts a failed or canceled job back unless another job holds its unique key, answering that job; a retried job holds no debounce id`, async () => {
      const unique = (id: string): UniqueJob => ({
        ...newJob('replies', id),
        uniqueKey: 'k',
        uniqueStates: ',waiting,scheduled,running,done,',
      })
      await c().write((tx) => ask(tx.jobAddUnique(unique('a'))))
      await endPlain('a', 'failed', NOW)
      await c().write((tx) => ask(tx.jobAddUnique(unique('b'))))
      const seqA = (await db().jobFind('replies', 'a'))!.seq
      const retry = (seq: number) => c().write((tx) => ask(tx.jobRetry(seq, NOW + 1_000)))
      expect(await retry(seqA)).toEqual({ outcome: 'held', holder: 'b' })
      expect((await db().jobFind('replies', 'a'))!.state).toBe('failed')
      await endPlain('b', 'canceled', NOW)
      expect(await retry(seqA)).toEqual({ outcome: 'retried' })
      expect(await retry(seqA)).toEqual({ outcome: 'unchanged' })
      expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 1, failed: 0, canceled: 1 })
      // A debounced job canceled before it ran, retried: a later add of its debounce id is a job of its own.
      await c().write((tx) => ask(tx.jobAddDebounced({ ...newJob('replies', 'c'), debounceKey: 'd' })))
      const seqC = (await db().jobFind('replies', 'c'))!.seq
      expect(await c().write((tx) => ask(tx.jobCancel(seqC, NOW)))).toBe(true)
      expect(await retry(seqC)).toEqual({ outcome: 'retried' })
      expect(await d.rows(`select debounce_key from jobs_job where id = 'c'`)).toEqual([{ debounce_key: null }])
      expect(await c().write((tx) => ask(tx.jobAddDebounced({ ...newJob('replies', 'e'), debounceKey: 'd' })))).toEqual({ added: true })
    })
  })

  describe('counts, notices and the data version', () => {
    test(`${on} writeShift: counts kept in the queue's row take the engine's moves; counts kept apart (their triggers counted the writes) only make the row`, async () => {
      const moved = { waiting: 3, scheduled: 1, running: 0, done: 0, failed: 0, canceled: 0 }
      await c().write((tx) => writeShift(tx, 'replies', moved))
      await c().write((tx) => writeShift(tx, 'replies', { ...moved, waiting: -1, running: 1 }))
      const counters = await d.rows(
        `select name, cast(paused as integer) as paused, cast(waiting as integer) as waiting,
          cast(scheduled as integer) as scheduled, cast(running as integer) as running from jobs_queue`,
      )
      expect(counters).toEqual([
        db().counts === 'in-row'
          ? { name: 'replies', paused: 0, waiting: 2, scheduled: 2, running: 1 }
          : { name: 'replies', paused: 0, waiting: 0, scheduled: 0, running: 0 },
      ])
    })

    test(`JOB-18 ${on} every write is counted, a plain SQL insert too: in the row at once, or kept apart until queueFoldCounts folds it`, async () => {
      await addJobs(c(), [newJob('replies', 'a'), newJob('replies', 'b')])
      await d.rows(`insert into jobs_job (queue, id, state) values ('replies', 'plain', 'waiting')`)
      const counters = () =>
        d.rows(`select cast(waiting as integer) as waiting from jobs_queue where name = 'replies'`).then((rows) => rows[0])
      const executor = db()
      if (executor.counts === 'apart') {
        expect(await executor.queueHasUnfolded('replies')).toBe(true)
        expect(await executor.queueHasUnfolded('other')).toBe(false)
        expect(await counters()).toEqual({ waiting: 0 })
        expect(await executor.queueFoldCounts('replies')).toBeGreaterThan(0)
        expect(await executor.queueHasUnfolded('replies')).toBe(false)
        expect(await executor.queueFoldCounts('replies')).toBe(0)
      }
      expect(await counters()).toEqual({ waiting: 3 })
      expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 3 })
    })

    test(`${on} other processes learn of a commit: by its notices, sent once it commits, where the database notifies; else by the data version, which moves when another connection commits`, async () => {
      const executor = db()
      if (!executor.notifies) {
        const first = await executor.dataVersion()
        await addJobs(c(), [newJob('replies', 'mine')])
        expect(await executor.dataVersion(), "this connection's own commit").toBe(first)
        await addJobs(d.other(), [newJob('replies', 'theirs')])
        expect(await executor.dataVersion()).not.toBe(first)
        return
      }
      const listener = await d.listen()
      try {
        await c().write(function* (tx) {
          yield* notifyOthers(tx, 'replies', 'added')
          yield* notifyOthers(tx, 'other', 'ended')
        })
        await waitFor(() => listener.heard.length >= 2 || undefined, 'the notices')
        expect(listener.heard).toEqual(['added:replies', 'ended:other'])
      } finally {
        listener.stop()
      }
      // A connection that is not listening cannot tell when others commit: its data version moves on every look.
      const first = await executor.dataVersion()
      expect(await executor.dataVersion()).not.toBe(first)
    })
  })

  describe('claims', () => {
    test(`JOB-17 ${on} a claim takes due runnable jobs in priority, run_at, seq order, counts the attempt and names its worker, whose row it writes`, async () => {
      const seqs = await addJobs(c(), [
        newJob('replies', 'late', { runAt: NOW - 1_000 }),
        newJob('replies', 'urgent', {
          priority: -5,
          runAt: NOW - 10,
          traceContext: '{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}',
        }),
        newJob('replies', 'early', { runAt: NOW - 5_000 }),
        newJob('replies', 'same-time-1', { runAt: NOW - 1_000 }),
        newJob('replies', 'future', { runAt: NOW + 60_000 }),
        newJob('replies', 'due-scheduled', { runAt: NOW - 2_000, state: 'scheduled' }),
        newJob('other', 'elsewhere'),
      ])
      const claimed = await claim(c(), replies, request('owner-1', 4, { renewLease: workerLease('owner-1', { channel: 'chan' }) }))
      expect(claimed.map((job) => job.id)).toEqual(['urgent', 'early', 'due-scheduled', 'late'])
      expect({ ...claimed[0], value: json(claimed[0]!.value) }).toEqual({
        seq: seqs.get('urgent'),
        id: 'urgent',
        grp: null,
        value: { id: 'urgent' },
        attempts: 1,
        maxAttempts: 3,
        abandoned: 0,
        claimedFrom: 'waiting',
        // What the run's span and its wait are made of: the trace context stored with the job, and when it was due.
        traceContext: '{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}',
        runAt: NOW - 10,
      })
      expect(claimed[1]).toMatchObject({ traceContext: null, runAt: NOW - 5_000 })
      expect(claimed[2]!.claimedFrom).toBe('scheduled')
      expect(await d.owned()).toEqual(['due-scheduled:owner-1', 'early:owner-1', 'late:owner-1', 'urgent:owner-1'])
      expect(await d.job(seqs.get('urgent')!)).toMatchObject({ state: 'running', attempts: 1 })
      expect(await d.workers()).toEqual([{ owner: 'owner-1', expires: NOW + 30_000, channel: 'chan' }])
      // The rest, then nothing: the job due later is not due yet.
      expect((await claim(c(), replies, request('owner-1', 10))).map((job) => job.id)).toEqual(['same-time-1'])
      expect(await claim(c(), replies, request('owner-1', 10))).toEqual([])
      expect((await claim(c(), replies, request('owner-1', 10, { now: NOW + 60_000 }))).map((job) => job.id)).toEqual(['future'])
      expect(await db().jobGetState(seqs.get('elsewhere')!)).toBe('waiting')
      expect(await db().jobGetState(123_456)).toBeUndefined()
      expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 0, scheduled: 0, running: 6 })
    })

    test(`JOB-16 ${on} no renewal shortens a worker's row: a claim, workerRenew and leaseRenewIfHeld whose time was read before a later renewal keep the later expiry`, async () => {
      const seqs = await addJobs(c(), [newJob('replies', 'a'), newJob('replies', 'b')])
      await claim(c(), replies, request('owner-1', 1, { renewLease: workerLease('owner-1', { expiresAt: NOW + 50_000 }) }))
      expect(
        await db().leaseRenewIfHeld({ ...WORKER_HOST_AND_PID, seq: seqs.get('a')!, owner: 'owner-1', attempt: 1, expiresAt: NOW + 40_000 }),
      ).toBe(true)
      await db().workerRenew(workerLease('owner-1', { expiresAt: NOW + 45_000, channel: null }))
      await claim(c(), replies, request('owner-1', 1, { renewLease: workerLease('owner-1', { expiresAt: NOW + 35_000 }) }))
      expect(await d.workers()).toEqual([{ owner: 'owner-1', expires: NOW + 50_000, channel: null }])
      expect(
        await db().leaseRenewIfHeld({ ...WORKER_HOST_AND_PID, seq: seqs.get('b')!, owner: 'owner-1', attempt: 1, expiresAt: NOW + 60_000 }),
      ).toBe(true)
      expect(await d.workers()).toEqual([{ owner: 'owner-1', expires: NOW + 60_000, channel: null }])
    })

    test(`JOB-05 ${on} a claim renews its worker's row only when asked; a claim of nothing writes no row`, async () => {
      await addJobs(c(), [newJob('replies', 'a'), newJob('replies', 'b')])
      expect(await claim(c(), replies, request('owner-1', 1, { renewLease: null }))).toHaveLength(1)
      expect(await d.workers()).toEqual([])
      expect(
        await claim(c(), replies, request('owner-2', 1, { renewLease: workerLease('owner-2', { expiresAt: NOW + 7_000 }) })),
      ).toHaveLength(1)
      expect(await claim(c(), replies, request('owner-3', 1))).toEqual([])
      expect(await d.workers()).toEqual([{ owner: 'owner-2', expires: NOW + 7_000, channel: null }])
      expect(await d.owned()).toEqual(['a:owner-1', 'b:owner-2'])
    })

    test(`JOB-17 ${on} a claim passes over the jobs its transaction ended, taking the next ones in order`, async () => {
      const seqs = await addJobs(
        c(),
        ['a', 'b', 'c', 'd'].map((id) => newJob('replies', id)),
      )
      const passOver = [seqs.get('a')!, seqs.get('c')!]
      expect((await claim(c(), replies, request('owner-1', 2, { passOver }))).map((job) => job.id)).toEqual(['b', 'd'])
      expect((await claim(c(), replies, request('owner-1', 5, { passOver }))).map((job) => job.id)).toEqual([])
      expect((await claim(c(), replies, request('owner-1', 5))).map((job) => job.id)).toEqual(['a', 'c'])
    })

    test(`JOB-07 ${on} a per-group cap leaves out groups at it, counting the jobs the claim takes`, async () => {
      const grouped = defineQueue('replies', { concurrency: { total: 10, perGroup: 1 } })
      await store(c(), grouped)
      const seqs = await addJobs(c(), [
        newJob('replies', 'a1', { grp: 'a', runAt: NOW - 5 }),
        newJob('replies', 'a2', { grp: 'a', runAt: NOW - 4 }),
        newJob('replies', 'b1', { grp: 'b', runAt: NOW - 3 }),
        newJob('replies', 'free1', { runAt: NOW - 2 }),
        newJob('replies', 'free2', { runAt: NOW - 1 }),
      ])
      expect((await claim(c(), grouped, request('owner-1', 10))).map((job) => job.id)).toEqual(['a1', 'b1', 'free1', 'free2'])
      expect(await claim(c(), grouped, request('owner-1', 10))).toEqual([])
      // Straight through the operation: a cap of 1 leaves group a out, a cap of 2 lets its second job go.
      expect(await takeWith(take('owner-2', { perGroup: 1 }))).toEqual({ claimed: [], heldBack: [] })
      const taken = await takeWith(take('owner-2', { perGroup: 2 }))
      expect(taken.claimed).toEqual([
        expect.objectContaining({ seq: seqs.get('a2'), id: 'a2', attempts: 1, grp: 'a', claimedFrom: 'waiting' }),
      ])
      expect(await d.owned()).toEqual(['a1:owner-1', 'a2:owner-2', 'b1:owner-1', 'free1:owner-1', 'free2:owner-1'])
    })

    test(`JOB-05 ${on} a job whose last run was abandoned runs alone: only an idle worker takes it, and takes nothing else`, async () => {
      const seqs = await addJobs(c(), [newJob('replies', 'crashed', { runAt: NOW - 10 }), newJob('replies', 'b'), newJob('replies', 'c')])
      await d.rows(`update jobs_job set abandoned = ${d.flag(true)} where id = 'crashed'`)
      // The flush's policy finds it once it is due.
      expect(await policyOf(c(), 'replies', NOW - 11)).toMatchObject({ aloneSeq: null, aloneRunAt: null })
      expect(await policyOf(c(), 'replies', NOW)).toMatchObject({
        aloneSeq: seqs.get('crashed'),
        aloneRunAt: NOW - 10,
      })
      // Straight through the operation, in transactions rolled back: it is left out, taken with the others, or taken alone.
      expect((await rolledBack(take('busy', { skipAbandoned: true }))).claimed.map((job) => job.id)).toEqual(['b', 'c'])
      expect((await rolledBack(take('busy'))).claimed.map((job) => job.id)).toEqual(['crashed', 'b', 'c'])
      expect((await rolledBack(take('idle', { only: seqs.get('crashed')!, limit: 1, window: 1 }))).claimed).toEqual([
        expect.objectContaining({ id: 'crashed', abandoned: 1, attempts: 1 }),
      ])
      // A busy worker passes over it; an idle one takes it alone.
      expect((await claim(c(), replies, request('busy', 1, { idle: false }))).map((job) => job.id)).toEqual(['b'])
      const alone = await claim(c(), replies, request('idle', 5))
      expect(alone.map((job) => [job.id, job.abandoned])).toEqual([['crashed', 1]])
      expect((await claim(c(), replies, request('idle', 5))).map((job) => job.id)).toEqual(['c'])
    })

    test(`JOB-22 ${on} a flush takes what the rate's room per group lets start, says which groups it held back before it was full, and renews the worker's row`, async () => {
      await addJobs(c(), [
        newJob('replies', 'x1', { grp: 'x', runAt: NOW - 6 }),
        newJob('replies', 'x2', { grp: 'x', runAt: NOW - 5 }),
        newJob('replies', 'y1', { grp: 'y', runAt: NOW - 4 }),
        newJob('replies', 'x3', { grp: 'x', runAt: NOW - 3 }),
        newJob('replies', 'y2', { grp: 'y', runAt: NOW - 2 }),
        newJob('replies', 'free', { runAt: NOW - 1 }),
      ])
      const groupRoom = { listed: { x: 1 }, other: 1 }
      // Full after x1 and y1: only x was passed over before it was.
      const two = await rolledBack(take('owner-1', { limit: 2, window: 10, groupRoom }))
      expect([two.claimed.map((job) => job.id), two.heldBack]).toEqual([['x1', 'y1'], ['x']])
      const all = await rolledBack(take('owner-1', { window: 10, groupRoom }))
      expect([all.claimed.map((job) => job.id), all.heldBack.sort()]).toEqual([
        ['x1', 'y1', 'free'],
        ['x', 'y'],
      ])
      // A group with no room left takes nothing; a job with no group is never held.
      const none = await rolledBack(take('owner-1', { window: 10, groupRoom: { listed: { x: 0 }, other: 0 } }))
      expect([none.claimed.map((job) => job.id), none.heldBack.sort()]).toEqual([['free'], ['x', 'y']])
      // The claim renews the worker's row when it takes a job, and only then.
      const renewLease = workerLease('owner-1')
      await takeWith(take('owner-1', { window: 10, groupRoom: { listed: {}, other: 0 }, renewLease }))
      expect(await d.rows(`select owner from jobs_lease`)).toEqual([{ owner: 'owner-1' }])
      const nothing = take('owner-2', { window: 10, groupRoom: { listed: {}, other: 0 }, renewLease: workerLease('owner-2') })
      expect(await takeWith(nothing)).toEqual({ claimed: [], heldBack: ['x', 'y'] })
      expect(await d.rows(`select owner from jobs_lease`)).toEqual([{ owner: 'owner-1' }])
      expect(await d.owned()).toEqual(['free:owner-1'])
    })

    test(`${on} a paused queue claims nothing, limited or not; queueGetClaimable says so`, async () => {
      await addJobs(c(), [newJob('replies', 'a')])
      await c().write((tx) => ask(tx.queueSetPaused('replies', true)))
      expect(await db().queueGetClaimable('replies')).toMatchObject({ paused: 1 })
      expect(await claim(c(), replies, request('owner-1', 5))).toEqual([])
      const limited = defineQueue('replies', { concurrency: 3 })
      await store(c(), limited)
      expect(await claim(c(), limited, request('owner-1', 5))).toEqual([])
      expect(await claim(c(), replies, request('owner-1', 5))).toEqual([])
      await c().write((tx) => ask(tx.queueSetPaused('replies', false)))
      expect(await claim(c(), replies, request('owner-1', 5))).toHaveLength(1)
    })
  })

  describe('ends', () => {
    test(`JOB-16 ${on} an end with a lost lease writes nothing; the end that holds it clears the owner and drops the steps`, async () => {
      const seq = (await addJobs(c(), [newJob('replies', 'a')])).get('a')!
      await claim(c(), replies, request('owner-1', 1))
      expect(
        await c().write((tx) => ask(tx.stepSetIfLeased({ seq, owner: 'owner-1', attempt: 1, name: 'history', answer: '[1,2]' }))),
      ).toBe(true)
      const record = { seq, owner: 'owner-1', attempt: 1, transition: done(NOW + 1_500, '{"text":"hi"}') }
      expect(await end(c(), 'replies', [{ ...record, owner: 'owner-2' }])).toEqual([false])
      expect(await end(c(), 'replies', [{ ...record, attempt: 2 }])).toEqual([false])
      expect(await d.job(seq)).toMatchObject({ state: 'running', owner: 'owner-1', finishedAt: null, result: null })
      expect(json(await db().stepGet(seq, 'history'))).toEqual([1, 2])

      expect(await end(c(), 'replies', [record])).toEqual([true])
      expect(await d.job(seq)).toEqual({
        state: 'done',
        attempts: 1,
        owner: null,
        error: null,
        runAt: NOW,
        finishedAt: NOW + 1_500,
        result: { text: 'hi' },
        abandoned: 0,
      })
      // JOB-14: the steps ended with the job.
      expect(await d.rows(`select * from jobs_step`)).toEqual([])
      // An end that already landed does not land again.
      expect(await end(c(), 'replies', [record])).toEqual([false])
      expect(await db().queueGetCounts('replies')).toMatchObject({ running: 0, done: 1 })
    })

    test(`JOB-16 ${on} several ends of one owner land in one request, each with its own next state, each fenced by its own attempt; a retry's refund`, async () => {
      const seqs = await addJobs(
        c(),
        ['a', 'b', 'c'].map((id) => newJob('replies', id)),
      )
      await claim(c(), replies, request('owner-1', 3))
      const [a, b, cc] = ['a', 'b', 'c'].map((id) => seqs.get(id)!)
      // Straight through the request, as jobEndMany asks it for ends alike (counting them is the caller's: here, none).
      const ended = await c().write((tx) =>
        ask(
          tx.jobEndMany({
            owner: 'owner-1',
            expiredBy: null,
            ends: [
              { transition: done(NOW + 10, '{"n":1}'), seq: a!, attempt: 1 },
              { transition: retried(NOW + 20), seq: b!, attempt: 2 },
            ],
          }),
        ),
      )
      expect(ended).toEqual([a])
      expect(await end(c(), 'replies', [{ seq: cc!, owner: 'owner-1', attempt: 1, transition: done(NOW + 30, null) }])).toEqual([true])
      expect(await d.job(a!)).toMatchObject({ state: 'done', finishedAt: NOW + 10, result: { n: 1 }, owner: null })
      expect(await d.job(b!)).toMatchObject({ state: 'running', finishedAt: null, result: null, owner: 'owner-1' })
      expect(await d.job(cc!)).toMatchObject({ state: 'done', finishedAt: NOW + 30, result: null })
      // Several alike through jobEndMany: another owner's and a lost attempt's land not.
      await addJobs(c(), [newJob('replies', 'd'), newJob('replies', 'e')])
      await claim(c(), replies, request('owner-1', 2))
      const more = await d.rows<{ seq: number }>(`select cast(seq as integer) as seq from jobs_job where id in ('d', 'e') order by seq`)
      const landed = await end(c(), 'replies', [
        { seq: more[0]!.seq, owner: 'owner-1', attempt: 1, transition: retried(NOW + 40, 'first') },
        { seq: more[1]!.seq, owner: 'owner-1', attempt: 1, transition: done(NOW + 50, '2') },
        { seq: b!, owner: 'owner-1', attempt: 2, transition: done(NOW + 60, '3') },
      ])
      expect(landed).toEqual([true, true, false])
      expect(await d.job(more[0]!.seq)).toMatchObject({ state: 'scheduled', runAt: NOW + 40, error: 'first', owner: null })
      expect(await d.job(more[1]!.seq)).toMatchObject({ state: 'done', finishedAt: NOW + 50, result: 2, error: null })

      // A retry writes its run_at, error and stack; a snooze gives its attempt back.
      expect(
        await c().write((tx) => endOne(tx, { ...retried(NOW + 5_000), refund: 1, seq: b!, owner: 'owner-1', attempt: 1, expiredBy: null })),
      ).toBe(true)
      expect(await d.job(b!)).toMatchObject({ state: 'scheduled', attempts: 0, runAt: NOW + 5_000, error: 'it threw', owner: null })
      const [stack] = await d.rows<{ error_stack: string }>(`select error_stack from jobs_job where seq = $1`, b)
      expect(stack!.error_stack).toMatch(/^Error: it threw/)
    })

    test(`JOB-18 ${on} running jobs that name no worker are found and ended, only while they still name none`, async () => {
      const seqs = await addJobs(
        c(),
        ['a', 'b'].map((id) => newJob('replies', id)),
      )
      await claim(c(), replies, request('owner-1', 2))
      expect(await db().jobCountUnleased('replies')).toBe(0)
      await d.rows(`update jobs_job set owner = null where id = 'a'`)
      expect(await db().jobCountUnleased('replies')).toBe(1)
      expect(await db().jobCountUnleased('other')).toBe(0)
      const unleased = await db().jobGetUnleased({ queue: 'replies', limit: 10 })
      expect(unleased).toEqual([{ seq: seqs.get('a'), attempts: 1, maxAttempts: 3 }])
      // A run that names its worker is not ended as unleased.
      expect(await c().write((tx) => ask(tx.jobSetStateIfUnleased({ ...done(), seq: seqs.get('b')! })))).toBe(false)
      expect(await c().write((tx) => releaseUnleased(tx, replies, unleased, NOW))).toEqual([seqs.get('a')])
      expect(await d.job(seqs.get('a')!)).toMatchObject({ state: 'scheduled', abandoned: 0, owner: null })
      expect((await d.job(seqs.get('a')!)).error).toMatch(/with no lease/)
      expect(await db().jobCountUnleased('replies')).toBe(0)
      // Ended once: a second end finds it no longer running.
      expect(await c().write((tx) => ask(tx.jobSetStateIfUnleased({ ...done(), seq: seqs.get('a')! })))).toBe(false)
      expect(await db().queueGetCounts('replies')).toMatchObject({ running: 1, scheduled: 1 })
    })

    test(`JOB-03 ${on} the driver writes a whole add: once per id, under maxWaiting, the queue's row made on its first job, and one notice where the database notifies`, async () => {
      // Where it does not, other processes find the add by the data version, which moves for another connection.
      const listener = db().notifies ? await d.listen() : undefined
      const other = listener ? undefined : d.other().executor
      const version = await other?.dataVersion()
      try {
        expect(await c().write((tx) => ask(tx.jobAdd(newJob('fresh', 'a'))))).toBe(true)
        expect(await c().write((tx) => ask(tx.jobAdd(newJob('fresh', 'a', { value: '{"other":true}' }))))).toBe(false)
        expect(await c().write((tx) => ask(tx.jobAdd(newJob('fresh', 'b', { maxWaiting: 1 }))))).toBe(false)
        expect(await db().jobExists('fresh', 'b')).toBe(false)
        expect(await d.rows(`select name from jobs_queue`)).toEqual([{ name: 'fresh' }])
        expect(json((await d.rows<{ value: unknown }>(`select value from jobs_job where id = 'a'`))[0]!.value)).toEqual({ id: 'a' })
        expect(await db().queueGetCounts('fresh')).toMatchObject({ waiting: 1, scheduled: 0 })
        if (listener) {
          await waitFor(() => listener.heard.length >= 1 || undefined, 'the notice')
          expect(listener.heard).toEqual(['added:fresh'])
        } else expect(await other!.dataVersion(), "another connection's data version").not.toBe(version)
      } finally {
        listener?.stop()
      }
    })

    test(`JOB-16 ${on} a flush writes its ends, each behind its own fence with its own next state, drops the steps of the jobs that ended, claims in claim order passing over what it ended, renews the row, and sends one notice where the database notifies`, async () => {
      const seqs = await addJobs(
        c(),
        ['a', 'b', 'c', 'd', 'e', 'f'].map((id, i) => newJob('replies', id, { priority: i < 3 ? 0 : 1 })),
      )
      const seq = (id: string) => seqs.get(id)!
      await claim(c(), replies, request('owner-1', 3))
      await d.rows(`insert into jobs_step (job, name, answer) values ($1, 'kept', '1'), ($2, 'kept', '1')`, seq('a'), seq('b'))
      const listener = db().notifies ? await d.listen() : null
      const other = listener ? null : d.other().executor
      const version = await other?.dataVersion()
      try {
        const ends = [
          { owner: 'owner-1', transition: done(NOW + 10, '{"n":1}'), seq: seq('a'), attempt: 1 },
          { owner: 'owner-1', transition: retried(NOW + 50, 'it threw'), seq: seq('b'), attempt: 1 },
          // Its run lost the job: another attempt.
          { owner: 'owner-1', transition: done(NOW + 30, null), seq: seq('c'), attempt: 2 },
        ]
        const renewLease = workerLease('owner-1', { expiresAt: NOW + 60_000, channel: 'chan' })
        const passOver = [seq('d'), ...ends.map((end) => end.seq)]
        const answer = await flush(c(), 'replies', request('owner-1', 2, { now: NOW + 100, passOver, renewLease }), ends)
        expect(answer.landed).toEqual([true, true, false])
        // Claim order, with d passed over, and b (put back by this flush, due again) left for the next one.
        expect(answer.claimed.map((job) => [job.id, job.attempts, job.claimedFrom])).toEqual([
          ['e', 1, 'waiting'],
          ['f', 1, 'waiting'],
        ])
        expect(await d.job(seq('a'))).toMatchObject({ state: 'done', finishedAt: NOW + 10, result: { n: 1 } })
        expect(await d.job(seq('b'))).toMatchObject({ state: 'scheduled', attempts: 1, runAt: NOW + 50, error: 'it threw' })
        expect(await d.job(seq('c'))).toMatchObject({ state: 'running', attempts: 1 })
        expect(await d.rows(`select cast(job as integer) as job from jobs_step order by job`)).toEqual([{ job: seq('b') }])
        expect(await d.owned()).toEqual(['c:owner-1', 'e:owner-1', 'f:owner-1'])
        expect(await d.workers()).toEqual([{ owner: 'owner-1', expires: NOW + 60_000, channel: 'chan' }])
        expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 1, scheduled: 1, running: 3, done: 1 })
        if (listener) {
          await waitFor(() => listener.heard.length > 0 || undefined, 'the notice')
          expect(listener.heard).toEqual(['ended:replies'])
        } else expect(await other!.dataVersion(), "another connection's data version").not.toBe(version)
      } finally {
        listener?.stop()
      }
    })

    test(`JOB-07 ${on} a flush of a queue with a policy writes its ends and claims as planned from the policy it read, counting the runs it ended as free`, async () => {
      const limited = defineQueue('replies', { concurrency: 2 })
      await store(c(), limited)
      const seqs = await addJobs(
        c(),
        ['a', 'b', 'c', 'd'].map((id) => newJob('replies', id)),
      )
      expect((await claim(c(), limited, request('owner-1', 5))).map((job) => job.id)).toEqual(['a', 'b'])
      expect(await claim(c(), limited, request('owner-2', 5))).toEqual([])
      // One end frees one slot, in the same flush.
      const ends = [{ owner: 'owner-1', transition: done(NOW + 10), seq: seqs.get('a')!, attempt: 1 }]
      const answer = await flush(c(), 'replies', request('owner-1', 5, { passOver: [seqs.get('a')!] }), ends)
      expect([answer.landed, answer.claimed.map((job) => job.id)]).toEqual([[true], ['c']])
      expect(await d.owned()).toEqual(['b:owner-1', 'c:owner-1'])
      expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 1, running: 2, done: 1 })
      // Paused, it writes the ends and claims nothing.
      await c().write((tx) => ask(tx.queueSetPaused('replies', true)))
      const paused = await flush(c(), 'replies', request('owner-1', 5), [
        { owner: 'owner-1', transition: done(NOW + 20), seq: seqs.get('b')!, attempt: 1 },
      ])
      expect([paused.landed, paused.claimed]).toEqual([[true], []])
      // Ends alone, with no claim.
      const alone = await flush(c(), 'replies', null, [{ owner: 'owner-1', transition: done(NOW + 30), seq: seqs.get('c')!, attempt: 1 }])
      expect(alone).toEqual({ landed: [true], claimed: [] })
      expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 1, running: 0, done: 3 })
    })
  })

  describe('leases', () => {
    test(`JOB-05 ${on} one row per worker: workerRenew writes it and answers the runs the worker holds; workerDelete, jobListHeld, jobListRunningOwners and leaseGet`, async () => {
      const seqs = await addJobs(
        c(),
        ['a', 'b', 'c'].map((id) => newJob('replies', id)),
      )
      await claim(c(), replies, request('owner-1', 2))
      await claim(c(), replies, request('owner-2', 1))
      const [a, b, cc] = ['a', 'b', 'c'].map((id) => seqs.get(id)!)
      const renewed = await db().workerRenew(workerLease('owner-1', { expiresAt: NOW + 99_000, channel: 'chan' }))
      expect([...renewed].sort((x, y) => x.job - y.job)).toEqual([
        { job: a, attempt: 1 },
        { job: b, attempt: 1 },
      ])
      // A worker with no row yet gets one; it holds no runs.
      expect(await db().workerRenew(workerLease('owner-3', { expiresAt: NOW + 5_000, channel: null }))).toEqual([])
      expect(await d.workers()).toEqual([
        { owner: 'owner-1', expires: NOW + 99_000, channel: 'chan' },
        { owner: 'owner-2', expires: NOW + 30_000, channel: null },
        { owner: 'owner-3', expires: NOW + 5_000, channel: null },
      ])
      expect(await db().jobListHeld('owner-2')).toEqual([{ job: cc, attempt: 1 }])
      expect(await db().jobListHeld('nobody')).toEqual([])
      expect(await db().leaseGet(a!)).toEqual({ owner: 'owner-1', attempt: 1, expiresAt: NOW + 99_000 })
      expect(await db().leaseGet(cc!)).toEqual({ owner: 'owner-2', attempt: 1, expiresAt: NOW + 30_000 })
      expect(await db().leaseGet(123_456)).toBeUndefined()
      expect([...(await db().jobListRunningOwners('replies'))].sort()).toEqual(['owner-1', 'owner-2'])
      expect(await db().jobListRunningOwners('other')).toEqual([])

      // A worker's row gone: its runs still name it, with no expiry.
      await c().write((tx) => ask(tx.workerDelete('owner-2')))
      await c().write((tx) => ask(tx.workerDelete('owner-3')))
      expect((await d.workers()).map((row) => row.owner)).toEqual(['owner-1'])
      expect(await db().leaseGet(cc!)).toEqual({ owner: 'owner-2', attempt: 1, expiresAt: null })
      // A running job that names no worker has no lease, and no worker runs it.
      await d.rows(`update jobs_job set owner = null where seq = $1`, b)
      expect(await db().leaseGet(b!)).toBeUndefined()
      expect(await db().jobListHeld('owner-1')).toEqual([{ job: a, attempt: 1 }])
      // A cancel clears the worker of its job: its run holds it no more.
      expect(await c().write((tx) => ask(tx.jobCancel(a!, NOW)))).toBe(true)
      expect(await db().leaseGet(a!)).toBeUndefined()
      expect(await db().jobListRunningOwners('replies')).toEqual(['owner-2'])
      expect(await db().workerRenew(workerLease('owner-1', { expiresAt: NOW + 99_000, channel: null }))).toEqual([])
    })

    test(`${on} workerHasExpired and workerDeleteExpired: the rows of workers expired and holding no run go; a row that holds, or whose worker runs a job, stays`, async () => {
      const seq = (await addJobs(c(), [newJob('replies', 'a')])).get('a')!
      await claim(c(), replies, request('running', 1, { renewLease: workerLease('running', { expiresAt: NOW + 1_000 }) }))
      await db().workerRenew(workerLease('idle', { expiresAt: NOW + 1_000, channel: null }))
      await db().workerRenew(workerLease('fresh', { expiresAt: NOW + 60_000, channel: null }))
      expect(await db().workerHasExpired(NOW + 1_000 - 1)).toBe(false)
      expect(await db().workerHasExpired(NOW + 5_000)).toBe(true)
      expect(await c().write((tx) => ask(tx.workerDeleteExpired(NOW + 5_000)))).toBe(1)
      expect((await d.workers()).map((row) => row.owner)).toEqual(['fresh', 'running'])
      expect(await db().workerHasExpired(NOW + 5_000)).toBe(false)
      // Once its run is taken back, the expired worker's row goes too.
      expect(await end(c(), 'replies', [{ seq, owner: 'running', attempt: 1, transition: done(), expiredBy: NOW + 5_000 }])).toEqual([true])
      expect(await db().workerHasExpired(NOW + 5_000)).toBe(true)
      expect(await c().write((tx) => ask(tx.workerDeleteExpired(NOW + 5_000)))).toBe(1)
      expect(await c().write((tx) => ask(tx.workerDeleteExpired(Infinity)))).toBe(1)
      expect(await d.workers()).toEqual([])
    })

    test(`JOB-16 ${on} leaseRenewIfHeld renews the row of a run that holds its job, writing it where it is gone; a run that lost its job renews nothing`, async () => {
      const seqs = await addJobs(
        c(),
        ['a', 'b'].map((id) => newJob('replies', id)),
      )
      const [a, b] = [seqs.get('a')!, seqs.get('b')!]
      await claim(c(), replies, request('owner-1', 1))
      await claim(c(), replies, request('owner-2', 1, { renewLease: workerLease('owner-2', { channel: 'chan' }) }))
      expect(await db().leaseRenewIfHeld({ ...WORKER_HOST_AND_PID, seq: b, owner: 'owner-2', attempt: 1, expiresAt: NOW + 50_000 })).toBe(
        true,
      )
      // Another worker, another attempt, a job it does not run: no row of theirs is written.
      expect(await db().leaseRenewIfHeld({ ...WORKER_HOST_AND_PID, seq: b, owner: 'owner-1', attempt: 1, expiresAt: NOW + 90_000 })).toBe(
        false,
      )
      expect(await db().leaseRenewIfHeld({ ...WORKER_HOST_AND_PID, seq: b, owner: 'owner-2', attempt: 2, expiresAt: NOW + 90_000 })).toBe(
        false,
      )
      expect(await db().leaseRenewIfHeld({ ...WORKER_HOST_AND_PID, seq: a, owner: 'owner-3', attempt: 1, expiresAt: NOW + 90_000 })).toBe(
        false,
      )
      expect(await d.workers()).toEqual([
        { owner: 'owner-1', expires: NOW + 30_000, channel: null },
        { owner: 'owner-2', expires: NOW + 50_000, channel: 'chan' },
      ])
      await c().write((tx) => ask(tx.workerDelete('owner-1')))
      expect(await db().leaseRenewIfHeld({ ...WORKER_HOST_AND_PID, seq: a, owner: 'owner-1', attempt: 1, expiresAt: NOW + 60_000 })).toBe(
        true,
      )
      expect(await d.workers()).toEqual([
        { owner: 'owner-1', expires: NOW + 60_000, channel: null },
        { owner: 'owner-2', expires: NOW + 50_000, channel: 'chan' },
      ])
      // A canceled run renews nothing.
      await c().write((tx) => ask(tx.jobCancel(b, NOW)))
      expect(await db().leaseRenewIfHeld({ ...WORKER_HOST_AND_PID, seq: b, owner: 'owner-2', attempt: 1, expiresAt: NOW + 70_000 })).toBe(
        false,
      )
    })

    test(`JOB-05 ${on} every write of a worker's row that inserts it stores its host and pid: workerRenew, a flush's claim with or without a policy, and leaseRenewIfHeld`, async () => {
      const seqs = await addJobs(
        c(),
        ['a', 'b', 'c'].map((id) => newJob('replies', id)),
      )
      await db().workerRenew(workerLease('renewed', { host: 'renew-host', pid: 11 }))
      await claim(c(), replies, request('claimed', 1, { renewLease: workerLease('claimed', { host: 'claim-host', pid: 12 }) }))
      await claim(c(), replies, request('stepped', 1, { renewLease: workerLease('stepped', { host: 'gone-host', pid: 13 }) }))
      await c().write((tx) => ask(tx.workerDelete('stepped')))
      const stepped = seqs.get('b')!
      expect(
        await db().leaseRenewIfHeld({ seq: stepped, owner: 'stepped', attempt: 1, host: 'step-host', pid: 14, expiresAt: NOW + 40_000 }),
      ).toBe(true)
      const expected = [
        { owner: 'claimed', host: 'claim-host', pid: 12 },
        { owner: 'renewed', host: 'renew-host', pid: 11 },
        { owner: 'stepped', host: 'step-host', pid: 14 },
      ]
      // A flush whose queue has a policy renews the row as the one statement does.
      await store(c(), defineQueue('replies', { concurrency: 10 }))
      const flushed = await claim(
        c(),
        replies,
        request('flushed', 1, { renewLease: workerLease('flushed', { host: 'flush-host', pid: 15 }) }),
      )
      expect(flushed.map((job) => job.seq)).toEqual([seqs.get('c')])
      expected.splice(1, 0, { owner: 'flushed', host: 'flush-host', pid: 15 })
      expect(await d.rows(`select owner, host, cast(pid as integer) as pid from jobs_lease order by owner`)).toEqual(expected)
    })

    test(`JOB-05 ${on} runs whose worker's row expired or is gone, or whose worker is dead, are taken back, never the asking worker's own`, async () => {
      const seqs = await addJobs(
        c(),
        ['a', 'b', 'c', 'd', 'e', 'f'].map((id) => newJob('replies', id)),
      )
      await claim(c(), replies, request('expired', 1, { renewLease: workerLease('expired', { expiresAt: NOW + 1_000 }) }))
      await claim(c(), replies, request('dead', 1))
      await claim(c(), replies, request('rowless', 1, { renewLease: null }))
      await claim(c(), replies, request('alive', 1))
      await claim(c(), replies, request('self', 1, { renewLease: workerLease('self', { expiresAt: NOW + 1_000 }) }))
      await claim(c(), replies, request('unowned', 1))
      await d.rows(`update jobs_job set owner = null where id = 'f'`)
      const find = (deadOwners: string[], limit = 10, queue = 'replies') =>
        db().leaseGetAbandoned({ queue, self: 'self', now: NOW + 5_000, deadOwners, limit })
      const found = await find(['dead'])
      expect([...found].sort((x, y) => x.seq - y.seq)).toEqual([
        { seq: seqs.get('a'), owner: 'expired', attempt: 1, expiresAt: NOW + 1_000, attempts: 1, maxAttempts: 3 },
        { seq: seqs.get('b'), owner: 'dead', attempt: 1, expiresAt: NOW + 30_000, attempts: 1, maxAttempts: 3 },
        { seq: seqs.get('c'), owner: 'rowless', attempt: 1, expiresAt: null, attempts: 1, maxAttempts: 3 },
      ])
      expect((await find([])).map((lease) => lease.owner).sort()).toEqual(['expired', 'rowless'])
      expect(await find([], 1)).toHaveLength(1)
      expect(await find(['dead'], 10, 'other')).toEqual([])
      expect(isOwnerGone('dead')).toBe(false)

      const released = await c().write((tx) => releaseAbandoned(tx, replies, found, NOW + 5_000))
      expect([...released].sort()).toEqual([seqs.get('a'), seqs.get('b'), seqs.get('c')].sort())
      const a = await d.job(seqs.get('a')!)
      expect(a).toMatchObject({ state: 'scheduled', abandoned: 1, owner: null })
      expect(a.error).toMatch(/its lease expired/)
      expect((await d.job(seqs.get('b')!)).error).toMatch(/is gone/)
      expect(await db().leaseGet(seqs.get('a')!)).toBeUndefined()
      expect(await d.owned()).toEqual(['d:alive', 'e:self'])
      expect(await db().queueGetCounts('replies')).toMatchObject({ running: 3, scheduled: 3 })
    })

    describe("the expiry rule: a run whose worker's row expired, but that nobody took, still holds its job", () => {
      /** A run of owner-1 whose row expired at NOW + 1 s, and the rescue of it that a worker reading it at NOW + 5 s writes. */
      async function expiredRun() {
        const seq = (await addJobs(c(), [newJob('replies', 'a')])).get('a')!
        await claim(c(), replies, request('owner-1', 1, { renewLease: workerLease('owner-1', { expiresAt: NOW + 1_000 }) }))
        const rescue = (expiredBy: number | null) =>
          c().write((tx) => endOne(tx, { ...retried(NOW + 9_000), seq, owner: 'owner-1', attempt: 1, expiredBy }))
        return { seq, rescue }
      }

      test(`JOB-16 ${on} its own steps and end land after its row expired`, async () => {
        const { seq } = await expiredRun()
        expect(await c().write((tx) => ask(tx.stepSetIfLeased({ seq, owner: 'owner-1', attempt: 1, name: 's', answer: '1' })))).toBe(true)
        expect(await end(c(), 'replies', [{ seq, owner: 'owner-1', attempt: 1, transition: done() }])).toEqual([true])
        expect(await d.job(seq)).toMatchObject({ state: 'done', owner: null })
      })

      test(`JOB-05 ${on} a rescue takes it while the row is still the expired one it read, or is gone`, async () => {
        const { seq, rescue } = await expiredRun()
        expect(await rescue(NOW + 500), 'read before the row expired').toBe(false)
        expect(await rescue(NOW + 5_000)).toBe(true)
        expect(await d.job(seq)).toMatchObject({ state: 'scheduled', error: 'it threw', owner: null })

        const b = (await addJobs(c(), [newJob('replies', 'b')])).get('b')!
        await claim(c(), replies, request('owner-2', 1))
        await c().write((tx) => ask(tx.workerDelete('owner-2')))
        expect(await c().write((tx) => endOne(tx, { ...retried(NOW), seq: b, owner: 'owner-2', attempt: 1, expiredBy: NOW }))).toBe(true)
      })

      test(`JOB-05 ${on} a renewal after the rescuer read the row expired makes the rescue change nothing; a dead owner is taken whatever its row says`, async () => {
        const { seq, rescue } = await expiredRun()
        // The run's renewal before a step, then the worker's.
        expect(await db().leaseRenewIfHeld({ ...WORKER_HOST_AND_PID, seq, owner: 'owner-1', attempt: 1, expiresAt: NOW + 40_000 })).toBe(
          true,
        )
        expect(await rescue(NOW + 5_000)).toBe(false)
        await db().workerRenew(workerLease('owner-1', { expiresAt: NOW + 40_000, channel: null }))
        expect(await rescue(NOW + 5_000)).toBe(false)
        expect(await d.job(seq)).toMatchObject({ state: 'running', attempts: 1, error: null, owner: 'owner-1' })
        expect(await db().jobListHeld('owner-1')).toEqual([{ job: seq, attempt: 1 }])
        // A worker known dead (its process gone from this host) renews nothing more: its runs are taken at once.
        expect(await rescue(null)).toBe(true)
        expect(await db().jobListHeld('owner-1')).toEqual([])
      })
    })
  })

  describe('steps and pruning', () => {
    test(`JOB-06 ${on} a step is kept once, only while its run holds the lease`, async () => {
      const seq = (await addJobs(c(), [newJob('replies', 'a')])).get('a')!
      const write = (fields: { owner?: string; attempt?: number; name?: string; answer?: string | null }) =>
        c().write((tx) => ask(tx.stepSetIfLeased({ seq, owner: 'owner-1', attempt: 1, name: 'step', answer: '"x"', ...fields })))
      expect(await write({}), 'no lease yet').toBe(false)
      await claim(c(), replies, request('owner-1', 1))
      expect(await write({ owner: 'owner-2' })).toBe(false)
      expect(await write({ attempt: 2 })).toBe(false)
      expect(await write({ name: 'second' })).toBe(true)
      expect(await write({ name: 'first', answer: '{"a":[1,{"b":null}]}' })).toBe(true)
      expect(await write({ name: 'first', answer: '"again"' }), 'a kept step is not replaced').toBe(false)
      expect(await write({ name: 'nothing', answer: null })).toBe(true)
      expect(json(await db().stepGet(seq, 'first'))).toEqual({ a: [1, { b: null }] })
      expect(await db().stepGet(seq, 'nothing')).toBeNull()
      expect(await db().stepGet(seq, 'missing')).toBeUndefined()
      expect((await db().stepList(seq)).map((step) => [step.name, step.answer === null ? null : json(step.answer)])).toEqual([
        ['second', 'x'],
        ['first', { a: [1, { b: null }] }],
        ['nothing', null],
      ])
      // Two steps kept by one transaction come back in the order they were kept, not by name.
      await c().write(function* (tx) {
        yield* ask(tx.stepSetIfLeased({ seq, owner: 'owner-1', attempt: 1, name: 'zeta', answer: '1' }))
        yield* ask(tx.stepSetIfLeased({ seq, owner: 'owner-1', attempt: 1, name: 'alpha', answer: '2' }))
      })
      expect((await db().stepList(seq)).map((step) => step.name)).toEqual(['second', 'first', 'nothing', 'zeta', 'alpha'])
      await c().write((tx) => ask(tx.stepDeleteMany([seq])))
      expect(await db().stepList(seq)).toEqual([])
    })

    test(`JOB-14 ${on} jobHasPrunable and jobDeleteEnded delete ended jobs past retention, with their steps`, async () => {
      const seqs = await addJobs(
        c(),
        ['old', 'new', 'failed', 'waiting'].map((id) => newJob('replies', id)),
      )
      await endPlain('old', 'done', NOW - 2 * 86_400_000)
      await endPlain('new', 'done', NOW)
      await endPlain('failed', 'failed', NOW - 2 * 86_400_000)
      await d.rows(`insert into jobs_step (job, name, answer) values ($1, 'kept', '1')`, seqs.get('old'))
      expect(await db().jobHasPrunable({ queue: 'replies', state: 'done', before: NOW - 86_400_000 })).toBe(true)
      expect(await db().jobHasPrunable({ queue: 'replies', state: 'canceled', before: NOW })).toBe(false)
      expect(await db().jobHasPrunable({ queue: 'other', state: 'done', before: NOW })).toBe(false)
      // A retention of a million years reaches before the first time PostgreSQL holds: nothing, and no error.
      expect(await db().jobHasPrunable({ queue: 'replies', state: 'done', before: NOW - 1e6 * 365 * 86_400_000 })).toBe(false)
      expect(await c().write((tx) => ask(tx.jobDeleteEnded({ queue: 'replies', state: 'done', before: NOW, limit: 10 })))).toBe(1)
      // pruneEnded walks every ended state with the queue's retention (failed: 7 days by default).
      expect(await c().write((tx) => pruneEnded(tx, defineQueue('replies', { retention: { failed: '1d' } }), NOW))).toBe(1)
      expect((await d.rows<{ id: string }>(`select id from jobs_job order by id`)).map((row) => row.id)).toEqual(['new', 'waiting'])
      expect(await d.rows(`select * from jobs_step`)).toEqual([])
      expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 1, done: 1, failed: 0 })
    })
  })

  describe('reading jobs', () => {
    test(`JOB-11 ${on} jobGetSnapshot and jobGetSnapshots read a job with its lease, its result only once ended`, async () => {
      const seqs = await addJobs(c(), [newJob('replies', 'a', { grp: 'g', priority: 3 }), newJob('replies', 'b')])
      const [a, b] = [seqs.get('a')!, seqs.get('b')!]
      await claim(c(), replies, request('owner-1', 2, { renewLease: workerLease('owner-1', { channel: 'chan' }) }))
      await d.rows(`update jobs_job set result = '{"early":1}' where seq = $1`, a)
      expect(await db().jobGetSnapshot('replies', 'a')).toEqual({
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
        waitsFor: null,
        owner: 'owner-1',
        leaseAttempt: 1,
        channel: 'chan',
        rateLimit: null,
        ratePer: null,
        ratePerGroup: null,
        rateStarts: null,
        rateNow: null,
      })
      await end(c(), 'replies', [{ seq: b, owner: 'owner-1', attempt: 1, transition: done(NOW + 7, '[1,"two"]') }])
      const both = await db().jobGetSnapshots([a, b, 999_999])
      expect([...both].sort((x, y) => x.seq - y.seq).map((row) => [row.state, json(row.result), row.finishedAt, row.owner])).toEqual([
        ['running', null, null, 'owner-1'],
        ['done', [1, 'two'], NOW + 7, null],
      ])
      expect(await db().jobGetSnapshot('replies', 'missing')).toBeUndefined()
      // A run whose worker has no row still names its worker and attempt; it has no channel. A job that is not running
      // names no worker, whatever another program left in its owner.
      await c().write((tx) => ask(tx.workerDelete('owner-1')))
      expect(await db().jobGetSnapshot('replies', 'a')).toMatchObject({ owner: 'owner-1', leaseAttempt: 1, channel: null })
      await d.rows(`update jobs_job set owner = 'owner-1' where seq = $1`, b)
      expect(await db().jobGetSnapshot('replies', 'b')).toMatchObject({ state: 'done', owner: null, leaseAttempt: null })
    })

    test(`JOB-24 ${on} the readers read what a parked run waits for only while its job is scheduled; eventList reads the job's events in the order they took their state`, async () => {
      const seq = (await addJobs(c(), [newJob('replies', 'a')])).get('a')!
      await claim(c(), replies, request('owner-1', 1))
      const lease = { seq, owner: 'owner-1', attempt: 1 }
      const scheduled = { queue: 'replies', state: 'scheduled', grp: null, limit: 10 } as const
      await c().write((tx) => ask(tx.eventSetWaitingIfLeased({ ...lease, name: 'late', deadline: NOW + 5_000, now: NOW + 1 })))
      await c().write((tx) => ask(tx.eventSetWaitingIfLeased({ ...lease, name: 'paid', deadline: null, now: NOW + 2 })))
      await c().write((tx) => ask(tx.eventSetTimedOutIfLeased({ ...lease, name: 'late', now: NOW + 4 })))
      // A claim leaves waits_for as it was: a running job waits for nothing, whatever the column holds.
      await d.rows(`update jobs_job set waits_for = 'sleep:nap' where seq = $1`, seq)
      const waitsFor = async () => [
        (await db().jobGetSnapshot('replies', 'a'))?.waitsFor,
        (await db().jobGetRecord('replies', 'a'))?.waitsFor,
        (await db().jobList('scheduled', { ...scheduled, k1: -Infinity, k2: -Infinity, k3: undefined })).map((row) => row.waitsFor),
      ]
      expect(await waitsFor()).toEqual([null, null, []])
      const parked = { ...retried(MAX_TIME_MS), error: null, errorStack: null, refund: 1 as const, waitsFor: 'event:paid', signals: 0 }
      expect(await end(c(), 'replies', [{ ...lease, transition: parked }])).toEqual([true])
      expect(await waitsFor()).toEqual(['event:paid', 'event:paid', ['event:paid']])
      expect(await db().jobGetSnapshot('replies', 'a')).toMatchObject({ state: 'scheduled', runAt: MAX_TIME_MS })
      await c().write((tx) => ask(tx.jobSignal({ queue: 'replies', id: 'a', name: 'early', payload: '{"ok":true}', now: NOW + 3 })))
      expect(await waitsFor(), 'another event wakes nothing').toEqual(['event:paid', 'event:paid', ['event:paid']])
      expect(
        (await db().eventList(seq)).map(({ payload, ...event }) => ({ ...event, payload: payload === null ? null : json(payload) })),
      ).toEqual([
        { name: 'paid', state: 'waiting', payload: null, deadline: null, at: NOW + 2 },
        { name: 'early', state: 'sent', payload: { ok: true }, deadline: null, at: NOW + 3 },
        { name: 'late', state: 'timed_out', payload: null, deadline: NOW + 5_000, at: NOW + 4 },
      ])
      expect(await db().eventList(123_456)).toEqual([])
      // The signal of the event it waits for makes it due, waiting for nothing.
      await c().write((tx) => ask(tx.jobSignal({ queue: 'replies', id: 'a', name: 'paid', payload: 'null', now: NOW + 5 })))
      expect(await waitsFor()).toEqual([null, null, [null]])
      expect(await db().jobGetSnapshot('replies', 'a')).toMatchObject({ state: 'scheduled', runAt: NOW + 5 })
      expect((await db().eventList(seq)).map((event) => [event.name, event.state, event.at])).toEqual([
        ['early', 'sent', NOW + 3],
        ['late', 'timed_out', NOW + 4],
        ['paid', 'sent', NOW + 5],
      ])
    })

    test(`JOB-17 ${on} jobCountAhead and jobGetPlacesInLine count the jobs before each in claim order, as computed by hand`, async () => {
      // A deterministic mix: priorities, run_at (some shared), scheduled jobs due and not, and jobs not runnable.
      const jobs = Array.from({ length: 40 }, (_, i) => {
        const priority = [0, 1, -1, 0, 2][i % 5]!
        const runAt = NOW - 10_000 + ((i * 7) % 6) * 1_000 + (i % 9 === 0 ? 20_000 : 0)
        return newJob('replies', `j${i}`, { priority, runAt, state: runAt > NOW || i % 4 === 0 ? 'scheduled' : 'waiting' })
      })
      const seqs = await addJobs(c(), [...jobs, newJob('other', 'elsewhere', { priority: -10 })])
      await d.rows(`update jobs_job set state = 'running' where id in ('j3', 'j13')`)
      await endPlain('j23', 'done', NOW)
      const runnable = jobs
        .map((job) => ({ ...job, seq: seqs.get(job.id)! }))
        .filter((job) => !['j3', 'j13', 'j23'].includes(job.id) && job.runAt <= NOW)
        .sort((x, y) => x.priority - y.priority || x.runAt - y.runAt || x.seq - y.seq)
      expect(runnable.length).toBeGreaterThan(20)
      for (const [place, job] of runnable.entries()) {
        const at = { queue: 'replies', priority: job.priority, runAt: job.runAt, seq: job.seq, now: NOW }
        expect(await db().jobCountAhead({ ...at, limit: 10_000 }), job.id).toBe(place)
        expect(await db().jobCountAhead({ ...at, limit: 5 })).toBe(Math.min(place, 5))
      }
      const asked = [runnable[0]!, runnable[4]!, runnable[17]!, runnable[runnable.length - 1]!]
      const places = await c().read((tx) =>
        ask(tx.jobGetPlacesInLine({ queue: 'replies', now: NOW, limit: 10_000 }, new Set(asked.map((job) => job.seq)))),
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
      expect(
        await db().jobGetPlacesInLine({ queue: 'replies', now: NOW, limit: 10 }, new Set([asked[1]!.seq, asked[2]!.seq, notRunnable])),
      ).toEqual(
        new Map([
          [asked[1]!.seq, 4],
          [asked[2]!.seq, 10],
          [notRunnable, 10],
        ]),
      )
      expect(await db().jobGetPlacesInLine({ queue: 'nothing', now: NOW, limit: 10 }, new Set([1, 2]))).toEqual(
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
        const page = await db().jobList(order, { ...filters, limit: size, k1: keys[0]!, k2: keys[1], k3: keys[2] })
        ids.push(...page.map((row) => row.id))
        if (page.length < size) return ids
        keys = next(page[page.length - 1]!)
      }
      throw new Error('the listing did not end')
    }

    test(`${on} listings page by keyset in the order of each state, filtered by group; jobFind, jobGetRecord, jobListOfQueue`, async () => {
      const seqs = await addJobs(c(), [
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
      await d.rows(`update jobs_job set state = 'running', attempts = 1, owner = 'o' where id = 'r1'`)
      // A running job that names no worker is listed too: it holds a place until a worker ends it (JOB-18).
      await d.rows(`update jobs_job set state = 'running' where id = 'r2'`)
      await endPlain('d1', 'done', NOW + 5)
      await endPlain('d2', 'done', NOW + 9)
      await endPlain('d3', 'done', NOW + 5)
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
      expect(await db().jobList('waiting', { queue: 'replies', state: 'waiting', grp: null, limit: 10, k1: 'text', k2: 0, k3: 0 })).toEqual(
        [],
      )

      const record = await db().jobGetRecord('replies', 'd2')
      expect({ ...record, value: json(record!.value) }).toEqual({
        seq: seqs.get('d2'),
        queue: 'replies',
        id: 'd2',
        grp: null,
        value: { id: 'd2' },
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
        waitsFor: null,
        traceContext: null,
      })
      expect(await db().jobGetRecord('replies', 'nope')).toBeUndefined()
      expect(await db().jobFind('replies', 'd2')).toEqual({ seq: seqs.get('d2'), state: 'done' })
      expect(await db().jobFind('replies', 'nope')).toBeUndefined()
      expect((await db().jobListOfQueue('replies')).map((row) => row.id)).toEqual([...seqs.keys()].filter((id) => id !== 'o1'))
    })

    test(`JOB-18 ${on} counts by state, of one queue and of all, a queue written with plain SQL and a queue only paused included`, async () => {
      await addJobs(c(), [newJob('replies', 'a'), newJob('replies', 'b', { runAt: NOW + 1 }), newJob('replies', 'c')])
      await endPlain('c', 'failed', NOW)
      await d.rows(`insert into jobs_job (queue, id, state) values ('plain', 'x', 'waiting'), ('plain', 'y', 'canceled')`)
      await c().write((tx) => ask(tx.queueSetPaused('paused-only', true)))
      const none = { paused: 0, waiting: 0, scheduled: 0, running: 0, done: 0, failed: 0, canceled: 0 }
      expect(await db().queueGetCounts('replies')).toEqual({ ...none, name: 'replies', waiting: 1, scheduled: 1, failed: 1 })
      expect(await db().queueGetCounts('plain')).toEqual({ ...none, name: 'plain', waiting: 1, canceled: 1 })
      expect(await db().queueGetCounts('paused-only')).toEqual({ ...none, name: 'paused-only', paused: 1 })
      expect(await db().queueGetCounts('nothing')).toBeUndefined()
      expect(await db().queueListNames()).toEqual(['paused-only', 'plain', 'replies'])
      expect((await db().queueGetCountsAll()).map((row) => [row.name, row.paused, row.waiting, row.failed, row.canceled])).toEqual([
        ['paused-only', 1, 0, 0, 0],
        ['plain', 0, 1, 0, 1],
        ['replies', 0, 1, 1, 0],
      ])
    })

    test(`JOB-16 ${on} cancel ends a job that has not ended; retry puts a failed or canceled one back with fresh attempts; jobGetOutcome`, async () => {
      const seqs = await addJobs(c(), [newJob('replies', 'a'), newJob('replies', 'b')])
      const [a, b] = [seqs.get('a')!, seqs.get('b')!]
      await claim(c(), replies, request('owner-1', 1))
      expect(await db().jobListHeld('owner-1')).toEqual([{ job: a, attempt: 1 }])
      expect(await c().write((tx) => ask(tx.jobCancel(a, NOW + 1)))).toBe(true)
      // The canceled run holds its job no more: its fence fails.
      expect(await db().jobListHeld('owner-1')).toEqual([])
      expect(await d.job(a)).toMatchObject({ state: 'canceled', owner: null, finishedAt: NOW + 1 })
      expect(await end(c(), 'replies', [{ seq: a, owner: 'owner-1', attempt: 1, transition: done() }])).toEqual([false])
      expect(await c().write((tx) => ask(tx.jobCancel(a, NOW + 2)))).toBe(false)
      expect(await db().jobGetOutcome(a)).toEqual({ state: 'canceled', error: null })
      expect(await c().write((tx) => ask(tx.jobRetry(b, NOW + 3))), 'a waiting job is not retried').toEqual({ outcome: 'unchanged' })
      await d.rows(`update jobs_job set error = 'gone', result = '1' where seq = $1`, a)
      expect(await c().write((tx) => ask(tx.jobRetry(a, NOW + 4)))).toEqual({ outcome: 'retried' })
      expect(await d.job(a)).toMatchObject({ state: 'waiting', attempts: 0, runAt: NOW + 4, finishedAt: null, error: null, result: null })
      expect(await db().jobGetOutcome(999_999)).toBeUndefined()
      expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 2, running: 0, canceled: 0 })
    })

    test(`${on} ended counts per window and per bucket, and the earliest runnable time`, async () => {
      await addJobs(
        c(),
        ['a', 'b', 'c', 'd'].map((id, i) => newJob('replies', id, { priority: i % 2, runAt: NOW + 1_000 * (4 - i) })),
      )
      await endPlain('a', 'done', NOW + 100)
      await endPlain('b', 'done', NOW + 1_100)
      await endPlain('c', 'done', NOW + 1_500)
      const window = { queue: 'replies', state: 'done' as const, since: NOW, until: NOW + 1_500 }
      expect(await db().jobCountEnded(window)).toBe(2)
      expect(await db().jobCountEnded({ ...window, since: -Infinity, until: Infinity })).toBe(3)
      expect(await db().jobCountEnded({ ...window, state: 'failed' })).toBe(0)
      expect(
        [...(await db().jobCountEndedPerBucket({ ...window, until: NOW + 2_000, bucketMs: 1_000 }))].sort((x, y) => x.bucket - y.bucket),
      ).toEqual([
        { bucket: Math.floor((NOW + 100) / 1_000), count: 1 },
        { bucket: Math.floor((NOW + 1_100) / 1_000), count: 2 },
      ])
      expect(await db().jobGetEarliestRunnable('replies')).toBe(NOW + 1_000)
      await addJobs(c(), [newJob('replies', 'e', { priority: 7, runAt: NOW - 1 })])
      expect(await db().jobGetEarliestRunnable('replies')).toBe(NOW - 1)
      expect(await db().jobGetEarliestRunnable('nothing')).toBeNull()
    })
  })

  describe('queues: limits, rates, what a worker reads before it claims', () => {
    test(`JOB-19 ${on} queueGetClaimable answers the stored limit, counts running jobs, says whether jobs wait or are scheduled (0 or 1), and when the next scheduled one is due`, async () => {
      const none = { paused: 0, concurrency: null, running: 0, waiting: 0, scheduled: 0, nextScheduled: null }
      // A queue with no row of its own (no job yet) answers as unpaused, unlimited and empty.
      expect(await db().queueGetClaimable('replies')).toEqual(none)
      // Not due by any clock, the database's included: these two are due in an hour and in a minute.
      const soon = Date.now() + 60_000
      await addJobs(c(), [
        newJob('replies', 'a'),
        newJob('replies', 'b'),
        newJob('replies', 'later', { runAt: soon + 3_600_000 }),
        newJob('replies', 'soon', { runAt: soon }),
      ])
      await store(c(), defineQueue('replies', { concurrency: 3 }))
      await claim(c(), replies, request('owner-1', 1))
      // `running` is a count, for the stored limit; `waiting` and `scheduled` say whether there are any.
      expect(await db().queueGetClaimable('replies')).toEqual({
        paused: 0,
        concurrency: 3,
        running: 1,
        waiting: 1,
        scheduled: 1,
        nextScheduled: soon,
      })
      await claim(c(), replies, request('owner-1', 1))
      expect(await db().queueGetClaimable('replies')).toMatchObject({ running: 2, waiting: 0, scheduled: 1, nextScheduled: soon })
      // A scheduled job whose time has come is the next one. Where the database keeps a clock, it is due by that clock,
      // and `waiting` says so; where it keeps none, the caller compares nextScheduled with its own.
      await addJobs(c(), [newJob('replies', 'overdue', { runAt: NOW - 1, state: 'scheduled' })])
      const ownClock = await databaseClock(c())
      expect(await db().queueGetClaimable('replies')).toMatchObject({
        running: 2,
        waiting: ownClock === null ? 0 : 1,
        scheduled: 1,
        nextScheduled: NOW - 1,
      })
      expect(await db().queueGetCounts('replies')).toMatchObject({ waiting: 0, scheduled: 3, running: 2 })
      // Jobs written with plain SQL are read as the engine's own.
      await d.rows(`insert into jobs_job (queue, id) values ('plain', 'x')`)
      expect(await db().queueGetClaimable('plain')).toEqual({ ...none, waiting: 1 })
    })

    test(`JOB-19 ${on} stored limits replace each other, the last stored wins, and the claim reads them`, async () => {
      expect(await db().queueGetLimits('replies')).toBeUndefined()
      expect(await store(c(), defineQueue('replies', { concurrency: { total: 4, perGroup: 2 } }))).toBeNull()
      const noRate = { rateLimit: null, ratePer: null, ratePerGroup: null }
      expect(await db().queueGetLimits('replies')).toEqual({ concurrency: 4, perGroup: 2, setAt: NOW, ...noRate })
      expect(await store(c(), defineQueue('replies', { concurrency: 1 }), NOW + 1)).toMatch(/total: 4, perGroup: 2.*total: 1/)
      expect(await db().queueGetLimits('replies')).toEqual({ concurrency: 1, perGroup: null, setAt: NOW + 1, ...noRate })
      // Straight through the request: a later store replaces every limit.
      await c().write((tx) =>
        ask(
          tx.queueSetLimits({ queue: 'replies', total: 2, perGroup: null, now: NOW + 2, rateLimit: 5, ratePer: 1_000, ratePerGroup: null }),
        ),
      )
      expect(await db().queueGetLimits('replies')).toEqual({
        concurrency: 2,
        perGroup: null,
        setAt: NOW + 2,
        rateLimit: 5,
        ratePer: 1_000,
        ratePerGroup: null,
      })
      await store(c(), defineQueue('replies', { concurrency: 1 }), NOW + 3)
      await addJobs(
        c(),
        ['a', 'b'].map((id) => newJob('replies', id)),
      )
      // The claiming process's definition says no limit; the stored limit holds.
      expect(await claim(c(), replies, request('owner-1', 5))).toHaveLength(1)
      expect(await policyOf(c(), 'replies')).toMatchObject({
        paused: 0,
        running: 1,
        concurrency: 1,
        perGroup: null,
        rateLimit: null,
      })
      expect(await claim(c(), replies, request('owner-1', 5))).toEqual([])
      // A queue with no row of its own (jobs written by another program) reads as unpaused and unlimited.
      expect(await policyOf(c(), 'nothing')).toMatchObject({
        paused: 0,
        running: 0,
        concurrency: null,
        perGroup: null,
        rateLimit: null,
        aloneSeq: null,
        aloneRunAt: null,
      })
    })

    test(`JOB-07 ${on} a flush under a concurrency writes back the workers waiting for their share, which the next flush reads`, async () => {
      const limited = defineQueue('replies', { concurrency: 2 })
      await store(c(), limited)
      await addJobs(
        c(),
        ['a', 'b', 'c', 'd'].map((id) => newJob('replies', id)),
      )
      // owner-1 holds both slots; owner-2 wants some and gets none: it waits, and says so in the queue's row.
      expect(await claim(c(), limited, request('owner-1', 2, { held: 0 }))).toHaveLength(2)
      expect(await claim(c(), limited, request('owner-2', 2, { held: 0 }))).toEqual([])
      expect(JSON.stringify(json((await policyOf(c(), 'replies')).claimWaiters))).toMatch(/owner-2/)
      // Once owner-1's runs end, owner-2 gets what it wants, and its entry goes.
      expect(await d.owned()).toEqual(['a:owner-1', 'b:owner-1'])
      const running = await d.rows<{ seq: number }>(`select cast(seq as integer) as seq from jobs_job where owner = 'owner-1'`)
      await flush(
        c(),
        'replies',
        null,
        running.map(({ seq }) => ({ owner: 'owner-1', seq, attempt: 1, transition: done() })),
      )
      expect(await claim(c(), limited, request('owner-2', 2, { held: 0 }))).toHaveLength(2)
      expect((await policyOf(c(), 'replies')).claimWaiters ?? null).toBeNull()
    })

    test(`JOB-22 ${on} a stored rate is read by the flush with the log of starts it writes back, on the database's clock where it keeps one (PostgreSQL's), else the worker's`, async () => {
      const rated = defineQueue('replies', { rate: { limit: 2, per: '1m', perGroup: 1 } })
      expect(await store(c(), rated)).toBeNull()
      expect(await db().queueGetLimits('replies')).toEqual({
        concurrency: null,
        perGroup: null,
        setAt: NOW,
        rateLimit: 2,
        ratePer: 60_000,
        ratePerGroup: 1,
      })
      await addJobs(
        c(),
        ['a', 'b', 'c'].map((id) => newJob('replies', id, { grp: id === 'c' ? 'g2' : 'g1' })),
      )
      const ownClock = await databaseClock(c())
      const before = Date.now()
      // The clock the flush stamps the log with: the database's where it keeps one, else the worker's (NOW, here).
      const clock = ownClock === null ? NOW : before
      // b is passed over: its group started a run in this window already.
      expect((await claim(c(), rated, request('owner-1', 5))).map((job) => job.id)).toEqual(['a', 'c'])
      const [row] = await d.rows<{ starts: unknown }>(`select rate_starts as starts from jobs_queue where name = 'replies'`)
      const starts = json(row!.starts) as { starts: number[]; groups: Record<string, number[]> }
      expect(starts.starts).toHaveLength(2)
      expect(Object.keys(starts.groups).sort()).toEqual(['g1', 'g2'])
      expect(starts.starts[0]).toBeGreaterThanOrEqual(clock - 5_000)
      expect(await claim(c(), rated, request('owner-1', 5))).toEqual([])
      const limits = await policyOf(c(), 'replies')
      expect(limits).toMatchObject({ rateLimit: 2, ratePer: 60_000, ratePerGroup: 1 })
      expect(json(limits.rateStarts)).toEqual(starts)
      if (ownClock === null) expect(limits.rateNow).toBe(NOW)
      else expect(Math.abs(limits.rateNow - Date.now())).toBeLessThan(5_000)
      // The log is what the next claim reads: emptied by another program, it lets b start.
      await d.rows(`update jobs_queue set rate_starts = '{"starts":[],"groups":{}}' where name = 'replies'`)
      expect(json((await policyOf(c(), 'replies')).rateStarts)).toEqual({ starts: [], groups: {} })
      expect((await claim(c(), rated, request('owner-1', 5))).map((job) => job.id)).toEqual(['b'])
    })
  })
})
