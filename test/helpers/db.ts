/** Fresh SQLite files on disk, migrated with the project's drizzle-kit migrations, as a user would. */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import Database from 'better-sqlite3'
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3'
import { afterEach, beforeEach } from 'vitest'
import type { Worker } from '../../src/index.js'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import * as schema from '../../src/schema/index.js'

export const MIGRATIONS = resolve(import.meta.dirname, '../../drizzle')

export interface TestDb {
  file: string
  client: Database.Database
  db: BetterSQLite3Database<typeof schema>
  /** Opens another connection to the same file, as another part of the app would. */
  reopen(): { client: Database.Database; db: BetterSQLite3Database<typeof schema> }
  close(): void
}

const dirs: string[] = []

/** A new folder for this test run's files; removed by `removeTempDirs`. */
export function tempDir(prefix = 'drizzle-jobs-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}

export function removeTempDirs(): void {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
}

/** Opens a connection configured as the README recommends: WAL, synchronous NORMAL. */
export function openDb(file: string): { client: Database.Database; db: BetterSQLite3Database<typeof schema> } {
  const client = new Database(file)
  client.pragma('journal_mode = WAL')
  client.pragma('synchronous = NORMAL')
  return { client, db: drizzle(client, { schema }) }
}

/** A fresh database file with the queue tables migrated in. */
export function freshDb(name = 'test.db'): TestDb {
  const file = join(tempDir(), name)
  const opened = openDb(file)
  migrate(opened.db, { migrationsFolder: MIGRATIONS })
  const extra: Database.Database[] = []
  return {
    file,
    ...opened,
    reopen() {
      const again = openDb(file)
      extra.push(again.client)
      return again
    },
    close() {
      for (const client of extra) client.close()
      opened.client.close()
    },
  }
}

/**
 * Gives each test of the file a fresh migrated database as `t`, and after each test stops the workers
 * pushed to `workers`, closes the database and removes its files.
 */
export function eachFreshDb(): { t: TestDb; workers: Worker[] } {
  let current: TestDb | undefined
  const workers: Worker[] = []
  const now = (): TestDb => {
    if (!current) throw new Error('the fresh database exists only inside a test')
    return current
  }
  beforeEach(() => {
    current = freshDb()
  })
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
    current?.close()
    current = undefined
    removeTempDirs()
  })
  const t: TestDb = {
    get file() {
      return now().file
    },
    get client() {
      return now().client
    },
    get db() {
      return now().db
    },
    reopen: () => now().reopen(),
    close: () => now().close(),
  }
  return { t, workers }
}
