/** Watching jobs in one process: JOB-11 (watch yields every change and ends), JOB-12 (progress in memory only, at most 4 KiB), ahead, getJob. */
import { randomUUID } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { afterEach, describe, expect, test } from 'vitest'
import { defineQueue, enqueue, enqueueMany, getJob, isJobsError, watch, work, type JobSnapshot, type Worker } from '../src/index.js'
import { activeWatchers } from '../src/queue/refresher.js'
import { openChannelConnections } from '../src/progress/remote.js'
import { freshDb, removeTempDirs, type TestDb } from './helpers/db.js'
import { cpuWait } from './helpers/load.js'
import { waitFor } from './helpers/wait.js'

const open: TestDb[] = []
const workers: Worker[] = []

afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: '1s' })))
  for (const t of open.splice(0)) t.close()
  removeTempDirs()
})

function db(): TestDb {
  const t = freshDb()
  open.push(t)
  return t
}

/** Collects every snapshot of a watch until it ends. */
async function collect<R>(iterable: AsyncIterable<JobSnapshot<R>>): Promise<JobSnapshot<R>[]> {
  const seen: JobSnapshot<R>[] = []
  for await (const snapshot of iterable) seen.push(snapshot)
  return seen
}

function path(snapshots: JobSnapshot[]): string[] {
  return snapshots.map((s) => {
    const step = (s.progress as { step?: string } | null)?.step
    return step ? `${s.state} ${step}` : s.state
  })
}

function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void
  const promise = new Promise<void>((resolve) => (open = resolve))
  return { promise, open }
}

const JOB_11_PATH = ['waiting', 'running', 'running thinking', 'scheduled', 'running', 'running thinking', 'done']

describe('watch', () => {
  for (const where of ["the worker's connection", 'another connection of the process'] as const) {
    test(`JOB-11 watch yields waiting → running → thinking → scheduled → running → thinking → done for a job that fails once (watcher on ${where})`, async () => {
      const t = db()
      const flaky = defineQueue<{ text: string }, { text: string }>('flaky', { attempts: 3, backoff: { initial: 30, max: 30 } })
      enqueue(t.db, flaky, { text: 'hi' }, { id: 'reply:1' })
      const watcherDb = where === "the worker's connection" ? t.db : t.reopen().db
      const watched = collect(watch(watcherDb, flaky, 'reply:1'))
      workers.push(
        work(t.db, flaky, async ({ text }, run) => {
          await new Promise((resolve) => setTimeout(resolve, 5))
          run.setProgress({ step: 'thinking' })
          await new Promise((resolve) => setTimeout(resolve, 5))
          if (run.attempt === 1) throw new Error('the model is overloaded')
          return { text: `you said ${text}` }
        }),
      )
      const seen = await watched
      expect(path(seen)).toEqual(JOB_11_PATH)
      expect(seen.map((s) => s.attempt)).toEqual([0, 1, 1, 1, 2, 2, 2])
      expect(seen[0]!.ahead).toBe(0)
      expect(seen.slice(1).every((s) => s.ahead === null)).toBe(true)
      expect(seen[3]!.error).toBe('the model is overloaded')
      expect(seen[3]!.runAt!.getTime()).toBeGreaterThan(seen[0]!.runAt!.getTime())
      expect(seen[4]!.progress).toBeNull()
      const done = seen[6]!
      expect(done).toMatchObject({
        id: 'reply:1',
        queue: 'flaky',
        group: null,
        state: 'done',
        attempts: 3,
        error: null,
        result: { text: 'you said hi' },
      })
      expect(done.finishedAt).toBeInstanceOf(Date)
      expect(activeWatchers()).toEqual({ watchers: 0, connections: 0 })
    })
  }

  test('JOB-11 a retry whose backoff has passed by the time its end is written is still yielded as scheduled, with its error, before it runs again', async () => {
    const t = db()
    const quick = defineQueue<number>('quick-retry', { attempts: 2, backoff: { initial: 1, max: 1 } })
    enqueue(t.db, quick, 1, { id: 'a' })
    const watched = collect(watch(t.db, quick, 'a'))
    // Each reading of the worker's clock is a second after the last, so the 1 ms backoff has always passed when the end is written.
    let reading = Date.now()
    const clock = () => (reading += 1_000)
    workers.push(
      work(
        t.db,
        quick,
        (_value, run) => {
          if (run.attempt === 1) throw new Error('the first attempt fails')
          return 'second time lucky'
        },
        { clock, lease: '1h' },
      ),
    )
    const seen = await watched
    expect(seen.map((s) => [s.state, s.attempt])).toEqual([
      ['waiting', 0],
      ['running', 1],
      ['scheduled', 1],
      ['running', 2],
      ['done', 2],
    ])
    expect(seen[2]!.error).toBe('the first attempt fails')
    expect(seen[4]).toMatchObject({ error: null, result: 'second time lucky' })
  })

  test('JOB-11 watch of an ended job yields it once and ends', async () => {
    const t = db()
    const q = defineQueue<number>('ended')
    enqueue(t.db, q, 1, { id: 'a' })
    workers.push(work(t.db, q, () => 'fine'))
    await waitFor(() => getJob(t.db, q, 'a')?.state === 'done', 'the job to end')
    const seen = await collect(watch(t.db, q, 'a'))
    expect(seen.map((s) => [s.state, s.result])).toEqual([['done', 'fine']])
  })

  test('JOB-11 watch of an unknown id throws NOT_FOUND at once; getJob answers undefined', () => {
    const t = db()
    const q = defineQueue<number>('q')
    let thrown: unknown
    try {
      watch(t.db, q, 'nope')
    } catch (error) {
      thrown = error
    }
    expect(isJobsError(thrown, 'NOT_FOUND')).toBe(true)
    expect(getJob(t.db, q, 'nope')).toBeUndefined()
    expect(activeWatchers()).toEqual({ watchers: 0, connections: 0 })
  })

  test('JOB-11 an aborted signal ends the iterator and frees what it held; so does break', async () => {
    const t = db()
    const q = defineQueue<number>('held')
    enqueue(t.db, q, 1, { id: 'a' })
    const controller = new AbortController()
    const iterator = watch(t.db, q, 'a', { signal: controller.signal })
    expect((await iterator.next()).value?.state).toBe('waiting')
    const pending = iterator.next()
    expect(activeWatchers()).toEqual({ watchers: 1, connections: 1 })
    controller.abort()
    expect(await pending).toEqual({ value: undefined, done: true })
    expect(await iterator.next()).toEqual({ value: undefined, done: true })
    expect(activeWatchers()).toEqual({ watchers: 0, connections: 0 })

    for await (const snapshot of watch(t.db, q, 'a')) {
      expect(snapshot.state).toBe('waiting')
      break
    }
    expect(activeWatchers()).toEqual({ watchers: 0, connections: 0 })
    const already = new AbortController()
    already.abort()
    expect(await collect(watch(t.db, q, 'a', { signal: already.signal }))).toEqual([])
    expect(activeWatchers()).toEqual({ watchers: 0, connections: 0 })
  })

  test('JOB-11 a change written by another connection reaches a watcher within the poll interval', async () => {
    const t = db()
    const q = defineQueue<number>('polled')
    enqueue(t.db, q, 1, { id: 'a' })
    const iterator = watch(t.db, q, 'a')
    expect((await iterator.next()).value?.state).toBe('waiting')
    const other = t.reopen()
    const next = iterator.next()
    const load = cpuWait()
    const wrote = Date.now()
    other.client.prepare(`update jobs_job set state = 'canceled', finished_at = ? where id = 'a'`).run(wrote)
    const canceled = await next
    expect(canceled.value?.state).toBe('canceled')
    // Within the poll interval, not counting the time this process waited for a CPU meanwhile (the machine's load).
    const seenAfter = Date.now() - wrote
    expect(seenAfter - load.ms(), `seen ${seenAfter} ms after the write`).toBeLessThan(1_000)
    expect((await iterator.next()).done).toBe(true)
  })

  test('JOB-11 a job deleted while watched makes the iterator throw NOT_FOUND', async () => {
    const t = db()
    const q = defineQueue<number>('deleted')
    enqueue(t.db, q, 1, { id: 'a' })
    const iterator = watch(t.db, q, 'a')
    await iterator.next()
    t.reopen().client.prepare(`delete from jobs_job where id = 'a'`).run()
    await expect(iterator.next()).rejects.toMatchObject({ code: 'NOT_FOUND' })
    expect(activeWatchers()).toEqual({ watchers: 0, connections: 0 })
  })

  test('JOB-11 ahead counts the jobs claimed before a waiting one (priority, run_at, seq); with aheadInterval 0 every change of it is yielded as they are claimed', async () => {
    const t = db()
    const q = defineQueue<number>('line', { concurrency: 1 })
    const now = Date.now()
    enqueue(t.db, q, 0, { id: 'low', priority: 5 })
    enqueue(t.db, q, 0, { id: 'first', priority: -1 })
    enqueue(t.db, q, 0, { id: 'older', runAt: now - 60_000 })
    enqueue(t.db, q, 0, { id: 'second' })
    enqueue(t.db, q, 0, { id: 'third' })
    enqueue(t.db, q, 0, { id: 'later', delay: '1h' })
    const order = ['first', 'older', 'second', 'third', 'low']
    expect(order.map((id) => getJob(t.db, q, id)?.ahead)).toEqual([0, 1, 2, 3, 4])
    expect(getJob(t.db, q, 'later')).toMatchObject({ state: 'scheduled', ahead: null })

    const watches = order.map((id) => collect(watch(t.db, q, id, { aheadInterval: 0 })))
    const gates = new Map(order.map((id) => [id, gate()]))
    workers.push(
      work(t.db, q, async (_value, run) => {
        await gates.get(run.id)!.promise
      }),
    )
    for (const id of order) {
      await waitFor(() => getJob(t.db, q, id)?.state === 'running', `${id} to run`)
      gates.get(id)!.open()
    }
    const seen = await Promise.all(watches)
    const aheads = seen.map((snapshots) => snapshots.filter((s) => s.state === 'waiting').map((s) => s.ahead))
    expect(aheads).toEqual([[0], [1, 0], [2, 1, 0], [3, 2, 1, 0], [4, 3, 2, 1, 0]])
    expect(seen.every((snapshots) => path(snapshots).slice(-2).join() === 'running,done')).toBe(true)
  })

  test('JOB-11 ahead counts a more urgent scheduled job only once it is due, in one count and in many', async () => {
    const t = db()
    const q = defineQueue<number>('due')
    enqueue(t.db, q, 0, { id: 'a' })
    enqueue(t.db, q, 0, { id: 'b' })
    enqueue(t.db, q, 0, { id: 'urgent', priority: -5, delay: '1h' })
    expect([getJob(t.db, q, 'a')?.ahead, getJob(t.db, q, 'b')?.ahead]).toEqual([0, 1])
    const iterators = [watch(t.db, q, 'a'), watch(t.db, q, 'b')]
    expect((await Promise.all(iterators.map((i) => i.next()))).map((r) => r.value?.ahead)).toEqual([0, 1])
    // Its time comes (another writer moves it): now it is claimed first.
    t.reopen()
      .client.prepare(`update jobs_job set run_at = ? where id = 'urgent'`)
      .run(Date.now() - 1)
    expect((await Promise.all(iterators.map((i) => i.next()))).map((r) => r.value?.ahead)).toEqual([1, 2])
    expect([getJob(t.db, q, 'a')?.ahead, getJob(t.db, q, 'b')?.ahead]).toEqual([1, 2])
    for (const iterator of iterators) await iterator.return()
  })

  test('JOB-11 ahead is counted up to 10,000, for one job and for many watched at once', async () => {
    const t = db()
    const q = defineQueue<number>('deep')
    enqueueMany(
      t.db,
      q,
      Array.from({ length: 10_050 }, (_, i) => ({ value: i, id: `j${i}` })),
    )
    expect(getJob(t.db, q, 'j9999')?.ahead).toBe(9_999)
    expect(getJob(t.db, q, 'j10000')?.ahead).toBe(10_000)
    expect(getJob(t.db, q, 'j10049')?.ahead).toBe(10_000)
    const ids = [3, 9_998, 9_999, 10_000]
    const iterators = ids.map((i) => watch(t.db, q, `j${i}`))
    expect((await Promise.all(iterators.map((iterator) => iterator.next()))).map((r) => r.value?.ahead)).toEqual([3, 9_998, 9_999, 10_000])
    // A job claimed from the head of the line moves every watched job up by one, read in one refresh.
    t.reopen().client.prepare(`update jobs_job set state = 'running', attempts = 1 where id = 'j0'`).run()
    const moved = await Promise.all(iterators.map((iterator) => iterator.next()))
    expect(moved.map((r) => r.value?.ahead)).toEqual([2, 9_997, 9_998, 9_999])
    expect(getJob(t.db, q, 'j10001')?.ahead).toBe(10_000)
    for (const iterator of iterators) await iterator.return()
  })

  test('JOB-11 ahead alone is yielded at most once per aheadInterval while the jobs ahead are claimed quickly, and its latest count comes after the interval', async () => {
    const t = db()
    const q = defineQueue<number>('quick-line', { concurrency: 1 })
    const ahead = 60
    const intervalMs = 100
    enqueueMany(
      t.db,
      q,
      Array.from({ length: ahead }, (_, i) => ({ value: i, id: `a${i}` })),
    )
    enqueue(t.db, q, 0, { id: 'w' })
    const iterator = watch(t.db, q, 'w', { aheadInterval: intervalMs })
    const seen: { at: number; snapshot: JobSnapshot }[] = []
    const watching = (async () => {
      for await (const snapshot of iterator) seen.push({ at: performance.now(), snapshot })
    })()
    await waitFor(() => seen.length > 0, 'the first snapshot')
    expect(seen[0]!.snapshot).toMatchObject({ state: 'waiting', ahead })
    // The jobs ahead run one at a time, a few ms each, but the last: it holds the line still with 'w' next.
    const hold = gate()
    const claimedAt: number[] = []
    workers.push(
      work(t.db, q, async (value) => {
        claimedAt.push(performance.now())
        if (value === ahead - 1) await hold.promise
        else await new Promise((resolve) => setTimeout(resolve, 2))
      }),
    )
    await waitFor(() => getJob(t.db, q, `a${ahead - 1}`)?.state === 'running', 'the last job ahead to run')
    const load = cpuWait()
    const stoppedAt = performance.now()
    await waitFor(() => seen.at(-1)!.snapshot.ahead === 0, 'the latest count, 0 ahead')
    const latestAfterMs = performance.now() - stoppedAt
    const waited = load.ms()
    hold.open()
    await watching

    const waiting = seen.filter(({ snapshot }) => snapshot.state === 'waiting')
    const counts = waiting.map(({ snapshot }) => snapshot.ahead!)
    expect(counts.every((count, i) => i === 0 || count < counts[i - 1]!)).toBe(true)
    // Each snapshot after the first changed `ahead` alone, and none came sooner than the interval after the one before
    // (a little less as received here, after the turn of the event loop that made it).
    for (let i = 1; i < waiting.length; i++) expect(waiting[i]!.at - waiting[i - 1]!.at).toBeGreaterThan(intervalMs - 25)
    const spanMs = waiting.at(-1)!.at - waiting[0]!.at
    expect(waiting.length - 1).toBeLessThanOrEqual(Math.floor(spanMs / (intervalMs - 25)))
    // Fewer counts than jobs ahead: the watch passed some over for a later one, as it must where the claims came faster
    // than it may yield (all of them within `ahead` − 4 intervals, an interval to spare for the trailing count), as on
    // an idle machine. A loaded machine may space the claims out past the interval, every count then due its own snapshot.
    const claimsMs = claimedAt.at(-1)! - claimedAt[0]!
    if (claimsMs < (ahead - 4) * intervalMs)
      expect(waiting.length, `${waiting.length} counts for ${ahead} claims made in ${claimsMs} ms`).toBeLessThan(ahead)
    // The latest count came within 20 intervals, not counting the time this process waited for a CPU (the machine's load).
    expect(latestAfterMs - waited, `the latest count came ${latestAfterMs} ms after the line stood still`).toBeLessThan(20 * intervalMs)
    expect(seen.slice(waiting.length).map(({ snapshot }) => [snapshot.state, snapshot.ahead])).toEqual([
      ['running', null],
      ['done', null],
    ])
  })

  test('JOB-11 every change of state reaches each of many watchers during a fast drain, retries included', async () => {
    const t = db()
    const q = defineQueue<number>('fast-drain', { attempts: 2, backoff: { initial: 1, max: 1 } })
    const n = 300
    enqueueMany(
      t.db,
      q,
      Array.from({ length: n }, (_, i) => ({ value: i, id: `j${i}` })),
    )
    const watches = Array.from({ length: n }, (_, i) => collect(watch(t.db, q, `j${i}`)))
    workers.push(
      work(
        t.db,
        q,
        (value, run) => {
          if (value % 3 === 0 && run.attempt === 1) throw new Error('the first attempt fails')
          return value
        },
        { slots: 16 },
      ),
    )
    const seen = await Promise.all(watches)
    for (const [i, snapshots] of seen.entries()) {
      // Snapshots that changed `ahead` alone are left out: every other one is a change of state or attempt.
      const changes = snapshots.filter((s, k) => k === 0 || s.state !== snapshots[k - 1]!.state || s.attempt !== snapshots[k - 1]!.attempt)
      expect(changes.length, `j${i}`).toBe(snapshots.filter((s) => s.state !== 'waiting').length + 1)
      const expected =
        i % 3 === 0
          ? [
              ['waiting', 0],
              ['running', 1],
              ['scheduled', 1],
              ['running', 2],
              ['done', 2],
            ]
          : [
              ['waiting', 0],
              ['running', 1],
              ['done', 1],
            ]
      expect(
        changes.map((s) => [s.state, s.attempt]),
        `j${i}`,
      ).toEqual(expected)
      expect(snapshots[0]!.ahead, `j${i}`).toBe(i)
      expect(
        snapshots.every((s) => (s.state === 'waiting') === (s.ahead !== null)),
        `j${i}`,
      ).toBe(true)
      expect(snapshots.at(-1)!.result, `j${i}`).toBe(i)
    }
    expect(activeWatchers()).toEqual({ watchers: 0, connections: 0 })
  })

  test('JOB-13 watch refuses an aheadInterval that is not a duration with INVALID_OPTION, and holds nothing', () => {
    const t = db()
    const q = defineQueue<number>('bad-interval')
    enqueue(t.db, q, 1, { id: 'a' })
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31, 'soon', '250', null, {}]) {
      let thrown: unknown
      try {
        watch(t.db, q, 'a', { aheadInterval: bad as never })
      } catch (error) {
        thrown = error
      }
      expect(isJobsError(thrown, 'INVALID_OPTION'), String(bad)).toBe(true)
      expect((thrown as Error).message).toContain('aheadInterval')
    }
    expect(activeWatchers()).toEqual({ watchers: 0, connections: 0 })
    for (const good of [0, '0ms', '250ms', 1_000] as const) void watch(t.db, q, 'a', { aheadInterval: good }).return()
    expect(activeWatchers()).toEqual({ watchers: 0, connections: 0 })
  })

  test("getJob shows the running attempt's progress, set in this process", async () => {
    const t = db()
    const q = defineQueue<number>('shown')
    enqueue(t.db, q, 1, { id: 'a', group: 'g' })
    const release = gate()
    workers.push(
      work(t.db, q, async (_value, run) => {
        run.setProgress({ percent: 40 })
        await release.promise
      }),
    )
    const running = await waitFor(() => {
      const job = getJob(t.db, q, 'a')
      return job?.progress !== null && job
    }, 'progress')
    expect(running).toMatchObject({ state: 'running', group: 'g', attempt: 1, progress: { percent: 40 }, ahead: null })
    expect(Object.isFrozen(running.progress)).toBe(true)
    release.open()
    await waitFor(() => getJob(t.db, q, 'a')?.state === 'done', 'the end')
    expect(getJob(t.db, q, 'a')?.progress).toBeNull()
  })
})

describe('progress', () => {
  test('JOB-12 progress is never written to the database: no row, no column, no byte of the files holds it', async () => {
    const t = db()
    const q = defineQueue<number>('secret')
    const marker = `progress-marker-${randomUUID()}`
    enqueue(t.db, q, 1, { id: 'a' })
    const release = gate()
    workers.push(
      work(t.db, q, async (_value, run) => {
        await run.step('before', () => 'a step')
        for (let i = 0; i < 50; i++) run.setProgress({ marker, i })
        await release.promise
        return 'done'
      }),
    )
    const iterator = watch(t.db, q, 'a')
    let seen: JobSnapshot | undefined
    for await (const snapshot of iterator) {
      if ((snapshot.progress as { i?: number } | null)?.i === 49) {
        seen = snapshot
        break
      }
    }
    expect(seen?.progress).toEqual({ marker, i: 49 })
    const check = (): void => {
      const tables = t.client.prepare(`select name from sqlite_master where type = 'table'`).pluck().all() as string[]
      expect(tables).toEqual(expect.arrayContaining(['jobs_queue', 'jobs_job', 'jobs_step', 'jobs_lease']))
      for (const table of tables) {
        const columns = t.client.prepare(`select name from pragma_table_info(?)`).pluck().all(table) as string[]
        for (const column of columns) {
          const hits = t.client.prepare(`select count(*) from "${table}" where cast("${column}" as text) like ?`).pluck().get(`%${marker}%`)
          expect(hits, `${table}.${column}`).toBe(0)
        }
      }
      for (const file of [t.file, `${t.file}-wal`, `${t.file}-shm`]) {
        if (existsSync(file)) expect(readFileSync(file).includes(marker), file).toBe(false)
      }
    }
    check()
    release.open()
    await waitFor(() => getJob(t.db, q, 'a')?.state === 'done', 'the end')
    check()
  })

  test('JOB-12 progress is capped at 4 KiB of JSON: TOO_LARGE beyond, and bad JSON is INVALID_VALUE', async () => {
    const t = db()
    const q = defineQueue<number>('capped')
    enqueue(t.db, q, 1, { id: 'a' })
    const outcomes: string[] = []
    const attempt = (progress: unknown, what: string, run: { setProgress(p: unknown): void }): void => {
      try {
        run.setProgress(progress)
        outcomes.push(`${what}: ok`)
      } catch (error) {
        outcomes.push(`${what}: ${isJobsError(error) ? error.code : String(error)}`)
      }
    }
    workers.push(
      work(t.db, q, (_value, run) => {
        attempt('x'.repeat(4_094), '4096 bytes', run)
        attempt('x'.repeat(4_095), '4097 bytes', run)
        attempt('é'.repeat(2_048), '4098 bytes in 2-byte characters', run)
        attempt(10n, 'a BigInt', run)
        attempt({ when: new Date() }, 'a Date', run)
        return 'ok'
      }),
    )
    await waitFor(() => getJob(t.db, q, 'a')?.state === 'done', 'the end')
    expect(outcomes).toEqual([
      '4096 bytes: ok',
      '4097 bytes: TOO_LARGE',
      '4098 bytes in 2-byte characters: TOO_LARGE',
      'a BigInt: INVALID_VALUE',
      'a Date: INVALID_VALUE',
    ])
  })

  test('JOB-12 watchers see every progress change of a run as it is set, at once', async () => {
    const t = db()
    const q = defineQueue<number>('steps')
    enqueue(t.db, q, 1, { id: 'a' })
    const iterator = watch(t.db, q, 'a')
    const steps: unknown[] = []
    const watching = (async () => {
      for await (const snapshot of iterator) if (snapshot.state === 'running') steps.push(snapshot.progress)
    })()
    workers.push(
      work(t.db, q, async (_value, run) => {
        for (let i = 1; i <= 5; i++) {
          run.setProgress({ i })
          // The watcher has it before the handler goes on: delivery is synchronous in this process.
          await waitFor(() => (steps.at(-1) as { i?: number } | null)?.i === i, `progress ${i} to arrive`)
        }
      }),
    )
    await watching
    expect(steps).toEqual([null, { i: 1 }, { i: 2 }, { i: 3 }, { i: 4 }, { i: 5 }])
    expect(openChannelConnections()).toBe(0)
  })
})
