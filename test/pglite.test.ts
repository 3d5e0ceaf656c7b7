/**
 * PGlite serves one process: what a second process on the same data directory gets, and that it gets nothing
 * once the first is gone. The contracts themselves run on PGlite with the others (test/contracts/).
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import { drizzle } from 'drizzle-orm/pglite'
import { afterEach, expect, test } from 'vitest'
import { LOCK_FILE } from '../src/dialect/pglite/data-directory.js'
import { defineQueue, enqueue, getJob, isJobsError } from '../src/index.js'
import { removeTempDirs, tempDir } from './helpers/db.js'
import { killChildren, STARTUP_MS, started, startFixture } from './helpers/processes.js'

afterEach(() => {
  killChildren()
  removeTempDirs()
})

test(
  'JOB-13 JOB-20 [pglite] a second process on a data directory another live process uses gets INVALID_OPTION naming it, and writes nothing; once that process is gone, it takes the directory over',
  async () => {
    const dir = join(tempDir(), 'data')
    const child = startFixture('pglite-child.ts', [dir])
    await started(child, 'ready', 'the first process to start and open its database')
    const pid = Number(/ready (\d+)/.exec(child.output())![1])
    expect(existsSync(join(dir, LOCK_FILE))).toBe(true)

    const replies = defineQueue<{ n: number }>('replies')
    const second = new PGlite(dir)
    let error: unknown
    try {
      await enqueue(drizzle({ client: second }), replies, { n: 2 }, { id: 'from-the-second' })
    } catch (thrown) {
      error = thrown
    }
    await second.close()
    expect(isJobsError(error, 'INVALID_OPTION'), String(error)).toBe(true)
    expect((error as Error).message).toContain(`open in process ${pid}`)

    child.process.kill('SIGKILL')
    await child.exited
    const after = new PGlite(dir)
    try {
      const db = drizzle({ client: after })
      expect((await getJob(db, replies, 'from-the-child'))?.id).toBe('from-the-child')
      expect(await getJob(db, replies, 'from-the-second')).toBeUndefined()
      expect((await enqueue(db, replies, { n: 3 }, { id: 'after' })).added).toBe(true)
    } finally {
      await after.close()
    }
  },
  STARTUP_MS + 60_000,
)
