/**
 * A SQLite file of its own for a bench script: in a temp folder, WAL and synchronous NORMAL, migrated with
 * drizzle-kit's migrations as a user would, and removed at the end, whatever ends the run.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import Database from 'better-sqlite3'
import { type BetterSQLite3Database, drizzle } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'

/** Runs `run` on a fresh migrated file; removes it after. */
export async function withSqliteDatabase<T>(run: (client: Database.Database, db: BetterSQLite3Database) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'drizzle-jobs-bench-'))
  const client = new Database(join(dir, 'bench.db'))
  client.pragma('journal_mode = WAL')
  client.pragma('synchronous = NORMAL')
  const db = drizzle({ client })
  migrate(db, { migrationsFolder: resolve(import.meta.dirname, '../../drizzle') })
  try {
    return await run(client, db)
  } finally {
    client.close()
    rmSync(dir, { recursive: true, force: true })
  }
}
