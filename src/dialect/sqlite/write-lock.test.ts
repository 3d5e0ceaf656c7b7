import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import Database from 'better-sqlite3'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { writeLockTaker } from './write-lock.js'

/** Another connection, in a thread of its own, holds the write lock for `holdMs` and answers once it has it. */
async function holdWriteLock(file: string, holdMs: number): Promise<Worker> {
  const holder = new Worker(
    `const { workerData, parentPort } = require('node:worker_threads')
     const db = new (require('better-sqlite3'))(workerData.file)
     db.exec('begin immediate')
     parentPort.postMessage('held')
     Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, workerData.holdMs)
     db.exec('commit')
     db.close()`,
    { eval: true, workerData: { file, holdMs } },
  )
  await new Promise((resolve, reject) => {
    holder.once('message', resolve)
    holder.once('error', reject)
  })
  return holder
}

describe('writeLockTaker', () => {
  let dir: string
  let client: Database.Database

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'drizzle-jobs-write-lock-'))
    client = new Database(join(dir, 'lock.db'), { timeout: 2_000 })
    client.pragma('journal_mode = WAL')
    client.exec('create table t (x)')
  })

  afterEach(() => {
    client.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('takes the lock soon after another connection frees it, and gives the busy timeout back', async () => {
    const holder = await holdWriteLock(client.name, 230)
    const asked = performance.now()
    writeLockTaker(client)()
    const waitedMs = performance.now() - asked
    client.exec('commit')
    await once(holder, 'exit')
    // SQLite's own handler sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms: it would have asked again at 328 ms.
    expect(waitedMs).toBeLessThan(300)
    expect(client.pragma('busy_timeout', { simple: true })).toBe(2_000)
  })

  it('throws SQLITE_BUSY once the busy timeout is spent, and gives it back', async () => {
    client.pragma('busy_timeout = 50')
    const holder = await holdWriteLock(client.name, 300)
    const asked = performance.now()
    expect(() => writeLockTaker(client)()).toThrow(expect.objectContaining({ code: 'SQLITE_BUSY' }))
    const waitedMs = performance.now() - asked
    await once(holder, 'exit')
    expect(waitedMs).toBeGreaterThanOrEqual(49)
    expect(waitedMs).toBeLessThan(250)
    expect(client.inTransaction).toBe(false)
    expect(client.pragma('busy_timeout', { simple: true })).toBe(50)
  })

  it('asks once when the busy timeout is 0', async () => {
    client.pragma('busy_timeout = 0')
    const holder = await holdWriteLock(client.name, 100)
    expect(() => writeLockTaker(client)()).toThrow(expect.objectContaining({ code: 'SQLITE_BUSY' }))
    await once(holder, 'exit')
  })
})
