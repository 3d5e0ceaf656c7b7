/**
 * The contracts of adding, running, ending and watching jobs, once per dialect (JOB-20), in one process.
 * The test names carry the dialect: `JOB-08 [postgres] …`. Every API call is awaited: on SQLite it answers
 * at once, on PostgreSQL a promise.
 */
import { describe, expect, test } from 'vitest'
import {
  cancel,
  defineQueue,
  enqueue,
  enqueueMany,
  getJob,
  isJobsError,
  listJobs,
  queueCounts,
  watch,
  work,
  type JobSnapshot,
  type Run,
} from '../../src/index.js'
import { CONTRACT_DATABASES, CONTRACT_TEST_MS, eachContractDb } from '../helpers/dialects.js'
import { cpuWait, serverPids } from '../helpers/load.js'
import { waitFor } from '../helpers/wait.js'

describe.each(CONTRACT_DATABASES)('%s', { timeout: CONTRACT_TEST_MS }, (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`

  const state = async (queue: string, id: string) => (await t.job(queue, id))?.state

  test(`JOB-02 ${on} a job added in a transaction commits with it or not at all`, async () => {
    const q = defineQueue<{ n: number }>('tx')
    await t.run('create table messages (id integer primary key, text text not null)')
    if (t.sqlite) {
      const db = t.sqlite
      db.transaction((tx) => {
        tx.run("insert into messages (id, text) values (1, 'kept')" as never)
        enqueue(tx, q, { n: 1 }, { id: 'kept' })
      })
      expect(() =>
        db.transaction((tx) => {
          enqueue(tx, q, { n: 2 }, { id: 'gone' })
          throw new Error('the app changes its mind')
        }),
      ).toThrow('the app changes its mind')
    } else {
      const inTransaction = t.inTransaction!
      await inTransaction(async (tx, exec) => {
        await exec("insert into messages (id, text) values (1, 'kept')")
        await enqueue(tx, q, { n: 1 }, { id: 'kept' })
      })
      await expect(
        inTransaction(async (tx) => {
          await enqueue(tx, q, { n: 2 }, { id: 'gone' })
          throw new Error('the app changes its mind')
        }),
      ).rejects.toThrow('the app changes its mind')
    }
    expect(await state('tx', 'kept')).toBe('waiting')
    expect(await t.job('tx', 'gone')).toBeUndefined()
    expect(await t.query('select text from messages')).toEqual([{ text: 'kept' }])
  })

  test(`JOB-03 ${on} a second add with an id the queue holds adds nothing and says so, whatever that job's state`, async () => {
    const q = defineQueue<{ n: number }>('dupes')
    expect(await enqueue(t.db, q, { n: 1 }, { id: 'one' })).toEqual({ id: 'one', added: true })
    expect(await enqueue(t.db, q, { n: 2 }, { id: 'one' })).toEqual({ id: 'one', added: false, matched: 'id' })
    expect(
      await enqueueMany(t.db, q, [
        { value: { n: 3 }, id: 'one' },
        { value: { n: 4 }, id: 'two' },
      ]),
    ).toEqual([
      { id: 'one', added: false, matched: 'id' },
      { id: 'two', added: true },
    ])
    const values: number[] = []
    workers.push(work(t.db, q, (value) => void values.push(value.n)))
    await waitFor(async () => (await state('dupes', 'one')) === 'done' && (await state('dupes', 'two')) === 'done', 'both jobs to run')
    expect(await enqueue(t.db, q, { n: 5 }, { id: 'one' })).toEqual({ id: 'one', added: false, matched: 'id' })
    expect(values.sort()).toEqual([1, 4])
    expect(await t.count('jobs_job')).toBe(2)
  })

  test(`JOB-03 ${on} enqueueMany adds in order and answers per item: an id repeated in the batch, or held by the queue, adds nothing, also across the statements of a batch of large values`, async () => {
    const q = defineQueue<{ n: number; pad?: string }>('batched')
    await enqueue(t.db, q, { n: 0 }, { id: 'held' })
    const items = [
      { value: { n: 1 }, id: 'a' },
      { value: { n: 2 }, id: 'held' },
      { value: { n: 3 }, id: 'a' },
      { value: { n: 4 }, id: 'b', group: 'g', priority: 3 },
      { value: { n: 5 }, id: 'later', delay: '1h' as const },
    ]
    expect(await enqueueMany(t.db, q, items)).toEqual([
      { id: 'a', added: true },
      { id: 'held', added: false, matched: 'id' },
      { id: 'a', added: false, matched: 'id' },
      { id: 'b', added: true },
      { id: 'later', added: true },
    ])
    const rows = await t.query<{ id: string; value: string; state: string; grp: string | null; priority: number | string }>(
      `select id, value, state, grp, priority from jobs_job where queue = 'batched' order by seq`,
    )
    expect(
      rows.map((row) => [
        row.id,
        typeof row.value === 'string' ? JSON.parse(row.value).n : (row.value as { n: number }).n,
        row.state,
        row.grp,
        Number(row.priority),
      ]),
    ).toEqual([
      ['held', 0, 'waiting', null, 0],
      ['a', 1, 'waiting', null, 0],
      ['b', 4, 'waiting', 'g', 3],
      ['later', 5, 'scheduled', null, 0],
    ])
    // Six values of 900 KiB: more than one statement carries; the repeat in the last one adds nothing.
    const pad = 'x'.repeat(900 * 1024)
    const big = [1, 2, 3, 4, 5, 1].map((n) => ({ value: { n: 10 + n, pad }, id: `big-${n}` }))
    expect(await enqueueMany(t.db, q, big)).toEqual(
      [1, 2, 3, 4, 5, 1].map((n, i) => (i < 5 ? { id: `big-${n}`, added: true } : { id: `big-${n}`, added: false, matched: 'id' })),
    )
    expect(await queueCounts(t.db, q)).toMatchObject({ waiting: 8, scheduled: 1 })
  })

  test(`JOB-08 ${on} each handler outcome leads to its state: done with a result, scheduled after a throw, failed, retried, snoozed`, async () => {
    const q = defineQueue<{ outcome: string }>('outcomes', { attempts: 2, backoff: { initial: '1h', max: '1h' } })
    for (const outcome of ['return', 'throw', 'throw-last', 'fail', 'retry', 'snooze']) await enqueue(t.db, q, { outcome }, { id: outcome })
    workers.push(
      work(t.db, q, (value, run: Run) => {
        switch (value.outcome) {
          case 'return':
            return { answer: 42 }
          case 'throw':
            throw new Error('the model timed out')
          case 'throw-last':
            if (run.attempt === 1) return run.retry(0)
            throw new Error('out of attempts')
          case 'fail':
            return run.fail('the message was deleted')
          case 'retry':
            return run.retry('1h')
          default:
            return run.snooze('1h')
        }
      }),
    )
    // 'throw-last' passes through scheduled (its retry) before its last attempt fails it.
    await waitFor(async () => {
      const states = await Promise.all(['return', 'throw', 'fail', 'retry', 'snooze'].map((id) => state('outcomes', id)))
      return states.every((s) => s !== 'waiting' && s !== 'running') && (await state('outcomes', 'throw-last')) === 'failed'
    }, 'every outcome to be written')
    expect(await getJob(t.db, q, 'return')).toMatchObject({ state: 'done', result: { answer: 42 }, attempt: 1 })
    expect(await getJob(t.db, q, 'throw')).toMatchObject({ state: 'scheduled', error: 'the model timed out', attempt: 1 })
    expect(await getJob(t.db, q, 'throw-last')).toMatchObject({ state: 'failed', error: 'out of attempts', attempt: 2 })
    expect(await getJob(t.db, q, 'fail')).toMatchObject({ state: 'failed', error: 'the message was deleted' })
    expect(await getJob(t.db, q, 'retry')).toMatchObject({ state: 'scheduled', attempt: 1 })
    expect(await t.job('outcomes', 'snooze')).toMatchObject({ state: 'scheduled', attempts: 0 })
    const scheduled = (await getJob(t.db, q, 'throw'))!
    // The backoff: 1 h, times a random factor in [0.9, 1.1] (JOB-09).
    const wait = scheduled.runAt!.getTime() - Date.now()
    expect(wait).toBeGreaterThan(0.85 * 3_600_000)
    expect(wait).toBeLessThan(1.1 * 3_600_000)
  })

  test(`JOB-09 ${on} every retry wait of a job follows the backoff: doubling from initial, times a factor in [0.9, 1.1], capped at max`, async () => {
    // The worker's clock is frozen and moved by the test to each retry's run_at: each wait it writes is run_at − now.
    let now = Date.now()
    const q = defineQueue('backoff', { attempts: 6, backoff: { initial: 40, max: 200 } })
    await enqueue(t.db, q, null, { id: 'b', runAt: now })
    workers.push(
      work(
        t.db,
        q,
        () => {
          throw new Error('always')
        },
        { clock: () => now, pollInterval: '10ms' },
      ),
    )
    const waits: number[] = []
    for (let attempt = 1; attempt <= 5; attempt++) {
      const job = await waitFor(async () => {
        const job = await getJob(t.db, q, 'b')
        return job?.state === 'scheduled' && job.attempt === attempt && job
      }, `attempt ${attempt} to be scheduled`)
      waits.push(job.runAt!.getTime() - now)
      now = job.runAt!.getTime()
    }
    await waitFor(async () => (await state('backoff', 'b')) === 'failed', 'the last attempt to fail')
    waits.forEach((wait, i) => {
      const base = 40 * 2 ** i
      expect(wait, `wait after failed run ${i + 1}`).toBeGreaterThanOrEqual(Math.min(200, Math.round(base * 0.9)))
      expect(wait, `wait after failed run ${i + 1}`).toBeLessThanOrEqual(Math.min(200, Math.round(base * 1.1)))
    })
    // 40 × 2^3 × 0.9 is past the cap: the fourth and fifth waits are max itself.
    expect(waits.slice(3)).toEqual([200, 200])
    expect(await t.job('backoff', 'b')).toMatchObject({ state: 'failed', attempts: 6, error: 'always' })
  })

  test(`JOB-10 ${on} a run past its timeout has its signal aborted and counts as a failed attempt`, async () => {
    const q = defineQueue('slow', { timeout: '100ms', attempts: 1 })
    await enqueue(t.db, q, null, { id: 'slow' })
    let aborted: unknown
    workers.push(
      work(t.db, q, async (_value, run) => {
        await new Promise<void>((resolve) => run.signal.addEventListener('abort', () => resolve(), { once: true }))
        aborted = run.signal.reason
        return 'too late'
      }),
    )
    await waitFor(async () => (await state('slow', 'slow')) === 'failed', 'the timed-out run to fail')
    expect(isJobsError(aborted, 'TIMEOUT')).toBe(true)
    expect((await t.job('slow', 'slow'))!.error).toMatch(/timeout|timed out/i)
  })

  test(`JOB-11 ${on} the running and ended snapshots a worker of the same connection hands its watchers are the ones a read shows`, async () => {
    const q = defineQueue<{ fail: boolean }, { text: string; n: number[] }>('as-read', { attempts: 1 })
    await enqueue(t.db, q, { fail: false }, { id: 'ok', group: 'g' })
    await enqueue(t.db, q, { fail: true }, { id: 'bad' })
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    const watches = { ok: watch(t.db, q, 'ok'), bad: watch(t.db, q, 'bad') }
    for (const w of Object.values(watches)) await w.next()
    workers.push(
      work(
        t.db,
        q,
        async ({ fail }) => {
          await released
          if (fail) throw new Error('no luck')
          return { text: 'héllo', n: [1, 2] }
        },
        { slots: 2 },
      ),
    )
    for (const [id, w] of Object.entries(watches)) {
      const running = (await w.next()).value as JobSnapshot
      expect(running.state, id).toBe('running')
      expect(running, id).toEqual(await getJob(t.db, q, id))
    }
    release()
    for (const [id, w] of Object.entries(watches)) {
      const ended = (await w.next()).value as JobSnapshot
      expect(ended.state, id).toBe(id === 'ok' ? 'done' : 'failed')
      expect(ended, id).toEqual(await getJob(t.db, q, id))
      expect((await w.next()).done, id).toBe(true)
    }
  })

  test(`JOB-11 ${on} watch yields the current state, then every change, and ends when the job ends`, async () => {
    const q = defineQueue<{ n: number }, { text: string }>('watched')
    await enqueue(t.db, q, { n: 1 }, { id: 'w' })
    const seen: JobSnapshot<{ text: string }>[] = []
    const following = (async () => {
      for await (const snapshot of watch(t.db, q, 'w')) seen.push(snapshot)
    })()
    await waitFor(() => seen.length > 0, 'the first snapshot')
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    workers.push(
      work(t.db, q, async (_value, run) => {
        run.setProgress({ step: 'thinking' })
        await released
        return { text: 'hello' }
      }),
    )
    await waitFor(
      () => seen.some((snapshot) => snapshot.state === 'running' && (snapshot.progress as { step?: string } | null)?.step === 'thinking'),
      'the running snapshot with its progress',
    )
    release()
    await following
    expect(seen[0]).toMatchObject({ id: 'w', state: 'waiting', ahead: 0 })
    expect(seen.at(-1)).toMatchObject({ state: 'done', result: { text: 'hello' } })
    expect(seen.map((snapshot) => snapshot.state).filter((s, i, all) => s !== all[i - 1])).toEqual(['waiting', 'running', 'done'])
  })

  test(`JOB-11 ${on} ahead alone comes at most once per aheadInterval while the jobs ahead are claimed, its latest count after the interval, and every change of state still comes`, async () => {
    const q = defineQueue<number>('coalesced', { concurrency: 1 })
    const ahead = 30
    const intervalMs = 100
    await enqueueMany(
      t.db,
      q,
      Array.from({ length: ahead }, (_, i) => ({ value: i, id: `a${i}` })),
    )
    await enqueue(t.db, q, ahead, { id: 'w' })
    const seen: { at: number; snapshot: JobSnapshot }[] = []
    const following = (async () => {
      for await (const snapshot of watch(t.db, q, 'w', { aheadInterval: intervalMs })) seen.push({ at: performance.now(), snapshot })
    })()
    await waitFor(() => seen.length > 0, 'the first snapshot')
    expect(seen[0]!.snapshot).toMatchObject({ state: 'waiting', ahead })
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    const claimedAt: number[] = []
    workers.push(
      work(t.db, q, async (value) => {
        claimedAt.push(performance.now())
        // The last job ahead holds the line still, with 'w' next.
        if (value === ahead - 1) await released
      }),
    )
    // The latest count comes within 20 intervals of the line standing still, not counting the time this process (and
    // the server's) waited for a CPU meanwhile: the machine's load.
    const pids = [process.pid, ...(dialect === 'postgres' ? await serverPids((sql) => t.query(sql)) : [])]
    await waitFor(async () => (await state('coalesced', `a${ahead - 1}`)) === 'running', 'the last job ahead to run')
    const load = cpuWait(pids)
    const stoppedAt = performance.now()
    await waitFor(() => seen.at(-1)!.snapshot.ahead === 0, 'the latest count, 0 ahead')
    const latestAfterMs = performance.now() - stoppedAt
    expect(latestAfterMs - load.ms(), `the latest count came ${latestAfterMs} ms after the line stood still`).toBeLessThan(20 * intervalMs)
    release()
    await following
    const waiting = seen.filter(({ snapshot }) => snapshot.state === 'waiting')
    for (let i = 1; i < waiting.length; i++) {
      expect(waiting[i]!.snapshot.ahead!).toBeLessThan(waiting[i - 1]!.snapshot.ahead!)
      expect(waiting[i]!.at - waiting[i - 1]!.at).toBeGreaterThan(intervalMs - 25)
    }
    // Fewer counts than jobs ahead: the watch passed some over for a later one, as it must where the claims came faster
    // than it may yield (all of them within `ahead` − 4 intervals, an interval to spare for the trailing count), as on
    // an idle machine. A loaded machine may space the claims out past the interval, every count then due its own snapshot.
    const claimsMs = claimedAt.at(-1)! - claimedAt[0]!
    if (claimsMs < (ahead - 4) * intervalMs)
      expect(waiting.length, `${waiting.length} counts for ${ahead} claims made in ${claimsMs} ms`).toBeLessThan(ahead)
    expect(seen.slice(waiting.length).map(({ snapshot }) => [snapshot.state, snapshot.ahead])).toEqual([
      ['running', null],
      ['done', null],
    ])
  })

  test(`JOB-13 ${on} bad input gives a JobsError with its code and writes nothing`, async () => {
    const q = defineQueue('bad', { maxWaiting: 1 })
    const refused = async (call: () => unknown, code: string) => {
      let error: unknown
      try {
        await call()
      } catch (caught) {
        error = caught
      }
      expect(isJobsError(error, code as never), String(error)).toBe(true)
    }
    // What the compiler refuses too: a caller past it (plain JavaScript, say) gets the same answer at run time.
    await refused(() => enqueue(t.db, q, { n: 1n } as never), 'INVALID_VALUE')
    await refused(() => enqueue(t.db, q, 'x'.repeat(1_100_000)), 'TOO_LARGE')
    await refused(() => enqueue(t.db, q, 1, { id: '' }), 'INVALID_OPTION')
    await refused(() => enqueue(t.db, q, 1, { priority: 1.5 }), 'INVALID_OPTION')
    await refused(() => enqueueMany(t.db, q, [{ value: 1 }, { value: (() => 1) as never }]), 'INVALID_VALUE')
    expect(await t.count('jobs_job')).toBe(0)
    await enqueue(t.db, q, 1, { id: 'first' })
    await refused(() => enqueue(t.db, q, 2, { id: 'second' }), 'QUEUE_FULL')
    await refused(() => enqueueMany(t.db, q, [{ value: 3 }, { value: 4 }]), 'QUEUE_FULL')
    expect(await t.count('jobs_job')).toBe(1)
  })

  test(`JOB-13 ${on} a value holding U+0000 is refused naming where, writes nothing, and leaves the caller's transaction usable`, async () => {
    const q = defineQueue<{ text: string } | number>('nul')
    const refusal = (error: unknown) => {
      expect(isJobsError(error, 'INVALID_VALUE'), String(error)).toBe(true)
      expect((error as Error).message).toMatch(/value\.text .*U\+0000/)
    }
    const bad = { text: 'before\u0000after' }
    if (t.sqlite) {
      t.sqlite.transaction((tx) => {
        let error: unknown
        try {
          enqueue(tx, q, bad, { id: 'bad' })
        } catch (caught) {
          error = caught
        }
        refusal(error)
        enqueue(tx, q, { text: 'kept' }, { id: 'after' })
      })
    } else {
      await t.inTransaction!(async (tx) => {
        refusal(await enqueue(tx, q, bad, { id: 'bad' }).catch((error: unknown) => error))
        await enqueue(tx, q, { text: 'kept' }, { id: 'after' })
      })
    }
    refusal(
      await Promise.resolve()
        .then(() =>
          enqueueMany(t.db, q, [
            { value: 1, id: 'one' },
            { value: bad, id: 'two' },
          ]),
        )
        .catch((error: unknown) => error),
    )
    let keyError: unknown
    try {
      await enqueue(t.db, q, { 'k\u0000': 1 } as never)
    } catch (caught) {
      keyError = caught
    }
    expect(isJobsError(keyError, 'INVALID_VALUE'), String(keyError)).toBe(true)
    expect(await t.query('select id from jobs_job')).toEqual([{ id: 'after' }])
    expect(await t.job('nul', 'after')).toMatchObject({ state: 'waiting' })
  })

  test(`JOB-13 ${on} JOB-17 every safe integer priority round-trips and claims in order`, async () => {
    const q = defineQueue<{ n: number }>('priorities')
    const priorities = [Number.MAX_SAFE_INTEGER, 2 ** 31, 0, -(2 ** 31) - 1, 2 ** 40 + 1, Number.MIN_SAFE_INTEGER, -1]
    await enqueueMany(
      t.db,
      q,
      priorities.map((priority, n) => ({ value: { n }, id: `p${priority}`, priority })),
    )
    const listed = await listJobs(t.db, { queue: q, state: 'waiting' })
    const sorted = [...priorities].sort((a, b) => a - b)
    expect(listed.jobs.map((job) => job.priority)).toEqual(sorted)
    const order: number[] = []
    workers.push(work(t.db, q, (_value, run) => void order.push(Number(run.id.slice(1))), { slots: 1 }))
    await waitFor(() => order.length === priorities.length, 'every job to run')
    expect(order).toEqual(sorted)
  })

  test(`JOB-14 ${on} JOB-06 steps run once per job and end with it: no step row outlives its job`, async () => {
    const q = defineQueue('stepped', { attempts: 3, backoff: { initial: 0, max: 0 } })
    await enqueue(t.db, q, null, { id: 's' })
    const calls: string[] = []
    workers.push(
      work(t.db, q, async (_value, run) => {
        await run.step('one', () => void calls.push(`one@${run.attempt}`))
        expect(await t.count('jobs_step')).toBe(1)
        if (run.attempt === 1) throw new Error('again')
        await run.step('two', () => void calls.push(`two@${run.attempt}`))
      }),
    )
    await waitFor(async () => (await state('stepped', 's')) === 'done', 'the job to finish on its second attempt')
    expect(calls).toEqual(['one@1', 'two@2'])
    expect(await t.count('jobs_step')).toBe(0)
  })

  test(`JOB-15 ${on} stop() claims nothing more and waits for the runs under way`, async () => {
    const q = defineQueue<{ n: number }>('stopping')
    await enqueueMany(t.db, q, [
      { value: { n: 1 }, id: 'a' },
      { value: { n: 2 }, id: 'b' },
    ])
    let started = 0
    let finished = 0
    const worker = work(
      t.db,
      q,
      async () => {
        started++
        await new Promise((resolve) => setTimeout(resolve, 200))
        finished++
      },
      { slots: 1 },
    )
    await waitFor(() => started === 1, 'the first run to start')
    await worker.stop()
    expect(finished).toBe(1)
    expect(started).toBe(1)
    const states = [await state('stopping', 'a'), await state('stopping', 'b')].sort()
    expect(states).toEqual(['done', 'waiting'])
    expect(await t.held()).toBe(0)
  })

  test(`JOB-16 ${on} a run whose job was canceled is aborted, and cannot keep a step or end its job`, async () => {
    const q = defineQueue('canceled')
    await enqueue(t.db, q, null, { id: 'c' })
    let reason: unknown
    let stepError: unknown
    let running = false
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    workers.push(
      work(t.db, q, async (_value, run) => {
        running = true
        await released
        // In this process the signal aborts as the cancel's notice arrives: at once on SQLite, after one look at the lease on PostgreSQL.
        if (!run.signal.aborted) await new Promise((resolve) => run.signal.addEventListener('abort', resolve, { once: true }))
        reason = run.signal.reason
        await run.step('late', () => 'never kept').catch((error: unknown) => (stepError = error))
        return 'refused'
      }),
    )
    await waitFor(() => running, 'the run to start')
    expect(await cancel(t.db, q, 'c')).toBe(true)
    release()
    await waitFor(() => stepError !== undefined, 'the run to try its step')
    expect(isJobsError(reason, 'LEASE_LOST')).toBe(true)
    expect(isJobsError(stepError, 'LEASE_LOST')).toBe(true)
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(await getJob(t.db, q, 'c')).toMatchObject({ state: 'canceled', result: null })
    expect(await t.count('jobs_step')).toBe(0)
    expect(await t.held()).toBe(0)
  })

  test(`JOB-16 ${on} an owner another program left on a waiting job is stale: a claim replaces it, the job runs once, and no owner is left`, async () => {
    const q = defineQueue<{ n: number }>('stale-owner')
    await enqueue(t.db, q, { n: 1 }, { id: 'left' })
    // Plain SQL that put back a running job and kept its owner, whose worker's row holds for an hour more.
    const expires = t.dialect === 'sqlite' ? Date.now() + 3_600_000 : new Date(Date.now() + 3_600_000).toISOString()
    await t.run(`insert into jobs_lease (owner, expires_at, channel) values ('gone-host/1/1/x/1', $1, null)`, expires)
    await t.run(`update jobs_job set owner = 'gone-host/1/1/x/1' where queue = 'stale-owner' and id = 'left' and state = 'waiting'`)
    expect(await t.held()).toBe(1)
    const ran: number[] = []
    workers.push(work(t.db, q, (value) => void ran.push(value.n)))
    await waitFor(async () => (await state('stale-owner', 'left')) === 'done', 'the job with a stale owner to run')
    expect(ran).toEqual([1])
    expect(await t.held()).toBe(0)
  })

  test(`JOB-17 ${on} waiting jobs run in order of priority, then run_at, then add order`, async () => {
    const q = defineQueue<{ n: number }>('ordered')
    const now = Date.now()
    await enqueueMany(t.db, q, [
      { value: { n: 1 }, id: 'late', runAt: now - 1_000 },
      { value: { n: 2 }, id: 'first-added' },
      { value: { n: 3 }, id: 'urgent', priority: -1 },
      { value: { n: 4 }, id: 'second-added' },
      { value: { n: 5 }, id: 'earliest', runAt: now - 5_000 },
      { value: { n: 6 }, id: 'lazy', priority: 5 },
    ])
    const order: string[] = []
    workers.push(work(t.db, q, (_value, run) => void order.push(run.id), { slots: 1 }))
    await waitFor(() => order.length === 6, 'every job to run')
    expect(order).toEqual(['urgent', 'earliest', 'late', 'first-added', 'second-added', 'lazy'])
  })

  test(`JOB-19 ${on} a queue's limit is one stored value: the worker started last replaces it, and claims follow it`, async () => {
    const first = defineQueue<{ n: number }>('one-truth', { concurrency: 1 })
    const second = defineQueue<{ n: number }>('one-truth', { concurrency: 3 })
    const warnings: string[] = []
    const warn = console.warn
    console.warn = (message: string) => void warnings.push(message)
    try {
      let running = 0
      let high = 0
      const handler = async () => {
        high = Math.max(high, ++running)
        await new Promise((resolve) => setTimeout(resolve, 30))
        running--
      }
      workers.push(work(t.db, first, handler, { slots: 5 }))
      await enqueueMany(
        t.db,
        first,
        Array.from({ length: 6 }, (_, n) => ({ value: { n } })),
      )
      await waitFor(
        async () => Number((await t.query<{ n: number | string }>(`select count(*) as n from jobs_job where state = 'done'`))[0]!.n) === 6,
        'the first batch to run',
      )
      expect(high).toBe(1)
      workers.push(work(t.db, second, handler, { slots: 5 }))
      await waitFor(() => warnings.length > 0, 'the second worker to store its limit and warn')
      expect(warnings[0]).toMatch(/total: 1.*total: 3/)
      await enqueueMany(
        t.db,
        first,
        Array.from({ length: 12 }, (_, n) => ({ value: { n } })),
      )
      await waitFor(
        async () => Number((await t.query<{ n: number | string }>(`select count(*) as n from jobs_job where state = 'done'`))[0]!.n) === 18,
        'the second batch to run',
      )
      expect(high).toBeGreaterThan(1)
      expect(high).toBeLessThanOrEqual(3)
    } finally {
      console.warn = warn
    }
  })
})
