/**
 * A worker's flush and SQLite's write lock: the flush takes the lock at once or is refused at once
 * (Connection.tryWrite), and tries again a ms later with its process running meanwhile, where SQLite's busy
 * handler would sleep 1, 2, 5, 10 … ms with the process blocked. The app's own transactions on the same
 * connection keep waiting for the lock as they did.
 */
import { Worker as Thread } from 'node:worker_threads'
import { afterEach, expect, test } from 'vitest'
import { connectionOf } from '../src/dialect/better-sqlite3/connection.js'
import { defineQueue, enqueue, getJob, work, type Worker } from '../src/index.js'
import { freshDb, removeTempDirs, type TestDb } from './helpers/db.js'
import { cpuWait } from './helpers/load.js'
import { waitFor } from './helpers/wait.js'

let t: TestDb | undefined
const workers: Worker[] = []
afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
  t?.close()
  removeTempDirs()
})

/**
 * Another connection, in a thread of its own, holds the file's write lock for `holdMs`; resolves once it holds it.
 * `releasing()` is true from just before its commit: a wait for the lock that ends with it true waited for the holder.
 */
async function holdWriteLock(file: string, holdMs: number): Promise<{ released: Promise<void>; releasing: () => boolean }> {
  const flag = new Int32Array(new SharedArrayBuffer(4))
  const thread = new Thread(
    `const { workerData, parentPort } = require('node:worker_threads')
     const db = new (require('better-sqlite3'))(workerData.file)
     db.exec('begin immediate')
     parentPort.postMessage('held')
     Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, workerData.holdMs)
     Atomics.store(workerData.flag, 0, 1)
     db.exec('commit')
     db.close()`,
    { eval: true, workerData: { file, holdMs, flag } },
  )
  await new Promise((resolve, reject) => {
    thread.once('message', resolve)
    thread.once('error', reject)
  })
  return {
    released: new Promise((resolve) => thread.once('exit', () => resolve())),
    releasing: () => Atomics.load(flag, 0) === 1,
  }
}

test('a write of its own that finds the lock held is refused at once, leaving the busy timeout as it was: the app on the same connection still waits for the lock', async () => {
  t = freshDb()
  const connection = connectionOf(t.db)
  // As a worker does as it starts: the counting triggers are in place before the lock is contended.
  connection.prepareWrites()
  const timeoutMs = t.client.pragma('busy_timeout', { simple: true })
  // Held 2 s from the holder's start: this thread may hear that it holds the lock a second late on a loaded machine.
  const holdMs = 2_000
  expect(timeoutMs).toBeGreaterThan(holdMs)
  const holder = await holdWriteLock(t.file, holdMs)

  const load = cpuWait()
  const asked = performance.now()
  let refusal: unknown
  try {
    // biome-ignore lint/correctness/useYield: a transaction with nothing to ask
    connection.tryWrite(function* () {
      return 'written'
    })
  } catch (error) {
    refusal = error
  }
  // Refused at once: the busy timeout (seconds) would have waited out the holder's hold. The time this thread waited
  // for a CPU meanwhile is the machine's load, not a wait for the lock (which sleeps): it is not counted.
  const tookMs = performance.now() - asked
  expect(tookMs - load.ms(), `refused after ${tookMs} ms`).toBeLessThan(500)
  expect(holder.releasing()).toBe(false)
  expect(connection.isBusy(refusal)).toBe(true)
  expect(t.client.inTransaction).toBe(false)
  expect(t.client.pragma('busy_timeout', { simple: true })).toBe(timeoutMs)

  // The app's own transaction waits in SQLite's busy handler, as before, and gets the lock once it is free.
  t.client.exec('begin immediate')
  expect(holder.releasing()).toBe(true)
  t.client.exec('commit')
  await holder.released

  // biome-ignore lint/correctness/useYield: a transaction with nothing to ask
  const written = connection.tryWrite(function* () {
    return 'written'
  })
  expect(written).toBe('written')
})

test('a worker whose flush finds the lock held keeps its process running, takes the lock soon after it is freed, and surfaces nothing', async () => {
  t = freshDb()
  const queue = defineQueue<{ n: number }>('locked')
  enqueue(t.db, queue, { n: 1 }, { id: 'after-the-lock' })
  const errors: unknown[] = []
  const holdMs = 600
  const holder = await holdWriteLock(t.file, holdMs)
  const heldAt = performance.now()
  // A timer every 10 ms: in SQLite's busy handler the process would sleep through the hold and fire none.
  let ticks = 0
  const ticker = setInterval(() => {
    if (performance.now() - heldAt < holdMs - 50) ticks++
  }, 10)
  try {
    workers.push(work(t.db, queue, async () => {}, { onError: (error) => errors.push(error) }))
    await holder.released
    const load = cpuWait()
    const freedAt = performance.now()
    await waitFor(() => getJob(t!.db, queue, 'after-the-lock')?.state === 'done', 'the job to run once the lock is free', 20_000)
    // Soon: within 2 s, not counting the time this process waited for a CPU meanwhile (the machine's load).
    const tookMs = performance.now() - freedAt
    const waited = load.ms()
    expect(tookMs - waited, `ran ${tookMs} ms after the lock was freed; ${waited} ms waiting for a CPU`).toBeLessThan(2_000)
  } finally {
    clearInterval(ticker)
  }
  expect(ticks).toBeGreaterThan(10)
  expect(errors).toEqual([])
})
