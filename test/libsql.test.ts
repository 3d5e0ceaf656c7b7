/**
 * libsql beyond a local file that the engine may open itself: a database in memory, and a file that is an
 * embedded replica, where the engine works through the app's own client; and on a local file, the engine's own
 * client after libsql refused one of its statements. The contracts on a local file run with the others (`[libsql]`).
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createClient } from '@libsql/client'
import { drizzle } from 'drizzle-orm/libsql'
import { migrate } from 'drizzle-orm/libsql/migrator'
import { afterEach, expect, test } from 'vitest'
import { connectionOf } from '../src/dialect/open.js'
import { defineQueue, enqueue, getJob, work } from '../src/index.js'
import { MIGRATIONS, removeTempDirs, tempDir } from './helpers/db.js'
import { freshLibsql } from './helpers/libsql.js'
import { waitFor } from './helpers/wait.js'
import { workerLease } from './pg/jobs.js'

afterEach(() => removeTempDirs())

const replies = defineQueue<{ n: number }, { doubled: number }>('replies')

test('[libsql] a database in memory: a job added in the app transaction commits with it or not at all, and a worker runs it', async () => {
  const client = createClient({ url: ':memory:' })
  try {
    const db = drizzle({ client })
    await migrate(db, { migrationsFolder: MIGRATIONS })
    await db.transaction(async (tx) => void (await enqueue(tx, replies, { n: 1 }, { id: 'kept' })))
    await expect(
      db.transaction(async (tx) => {
        await enqueue(tx, replies, { n: 2 }, { id: 'gone' })
        throw new Error('the app changes its mind')
      }),
    ).rejects.toThrow('the app changes its mind')
    expect(await getJob(db, replies, 'gone')).toBeUndefined()
    const worker = work(db, replies, ({ n }) => ({ doubled: n * 2 }))
    try {
      await waitFor(async () => (await getJob(db, replies, 'kept'))?.state === 'done', 'the job to run')
    } finally {
      await worker.stop()
    }
    expect((await getJob(db, replies, 'kept'))?.result).toEqual({ doubled: 2 })
  } finally {
    client.close()
  }
})

test('JOB-13 [libsql] on a file with no tables, work tells onError SCHEMA_MISSING once, naming the tables and the commands to run, and stops, writing nothing', async () => {
  const client = createClient({ url: `file:${join(tempDir(), 'bare.db')}` })
  try {
    const db = drizzle({ client })
    const errors: unknown[] = []
    const worker = work(db, replies, ({ n }) => ({ doubled: n * 2 }), { pollInterval: '10ms', onError: (error) => errors.push(error) })
    await waitFor(() => errors.length > 0, 'the worker to tell its error')
    // 30 polls: a worker that went on would meet the missing tables again at each.
    await new Promise((resolve) => setTimeout(resolve, 300))
    await worker.stop()
    expect(errors).toEqual([
      expect.objectContaining({
        code: 'SCHEMA_MISSING',
        message: expect.stringMatching(
          /^table jobs_queue, jobs_job, jobs_step, jobs_lease, jobs_schedule are missing: .*`drizzle-kit migrate`/,
        ),
      }),
    ])
    expect((await client.execute(`select name from sqlite_master`)).rows).toEqual([])
  } finally {
    client.close()
  }
})

test('JOB-13 [libsql] SCHEMA_MISSING on a database in memory says so: the tables of a migrated file are not there, and the file is opened by its path', async () => {
  const client = createClient({ url: ':memory:' })
  try {
    await expect(enqueue(drizzle({ client }), replies, { n: 1 })).rejects.toThrow(
      expect.objectContaining({
        code: 'SCHEMA_MISSING',
        message: expect.stringMatching(/^table jobs_queue, .* are missing: the database is in memory, .*open that file by its path/),
      }),
    )
  } finally {
    client.close()
  }
})

test("[libsql] an embedded replica (a file with libsql's -info beside it) is worked through the app's client, which sends its writes to the primary", async () => {
  const file = join(tempDir(), 'replica.db')
  const setup = createClient({ url: `file:${file}` })
  await migrate(drizzle({ client: setup }), { migrationsFolder: MIGRATIONS })
  setup.close()
  writeFileSync(`${file}-info`, '{}')
  const client = createClient({ url: `file:${file}` })
  try {
    const db = drizzle({ client })
    expect((await enqueue(db, replies, { n: 1 }, { id: 'a' })).added).toBe(true)
    // The app's client lends a connection to each transaction: the data version moves at every look.
    const connection = connectionOf(db)
    const first = await connection.executor.dataVersion()
    expect(await connection.executor.dataVersion()).not.toBe(first)
    expect((await getJob(db, replies, 'a'))?.state).toBe('waiting')
  } finally {
    client.close()
  }
})

test("[libsql] on a local file, a write of the engine's refused while another connection holds the lock leaves nothing stale: its next reads see that connection's commit, its data version moves, and its next write lands", async () => {
  const t = await freshLibsql()
  try {
    const { executor } = connectionOf(t.db)
    const before = await executor.dataVersion()
    // libsql leaves a refused statement in progress: its connection would read the file as at its next read, for good.
    const other = await t.client.transaction('write')
    await expect(executor.workerRenew(workerLease('this', { expiresAt: 1, channel: null }))).rejects.toMatchObject({ code: 'SQLITE_BUSY' })
    const refused = await executor.dataVersion()
    expect(await executor.workerHasExpired(2)).toBe(false)
    await other.execute(`insert into jobs_lease (owner, expires_at) values ('other', 1)`)
    await other.commit()
    expect(await executor.dataVersion()).not.toBe(refused)
    expect(refused).not.toBe(before)
    expect(await executor.workerHasExpired(2)).toBe(true)
    await executor.workerRenew(workerLease('this', { expiresAt: 1, channel: null }))
    expect(await t.query(`select owner from jobs_lease order by owner`)).toEqual([{ owner: 'other' }, { owner: 'this' }])
  } finally {
    t.close()
  }
})
