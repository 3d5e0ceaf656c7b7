/**
 * better-sqlite3 as the SQLite dialect's synchronous driver: its database known behind a Drizzle handle, and the
 * SQLite connection (dialect/sqlite/connection.ts) on it, checked and prepared as it is made.
 */
import type Database from 'better-sqlite3'
import { JobsError } from '../../errors.js'
import type { Connection } from '../connection.js'
import { drizzleHandleOf, type SyncDatabase } from '../drizzle.js'
import { sqliteDriverEntry } from '../sqlite/connection.js'
import { betterSqlite3Driver } from './client.js'
import { betterSqlite3Opener } from './open.js'

export type { SyncDatabase }

/** The SQLite dialect's driver, better-sqlite3, as src/dialect/open.ts registers it. @internal */
export const betterSqlite3 = sqliteDriverEntry({
  label: 'better-sqlite3',
  takes: isBetterSqlite3,
  driverOf: (client) => betterSqlite3Driver(client as Database.Database),
  opener: betterSqlite3Opener,
})

/** The connection behind a Drizzle SQLite handle on better-sqlite3, checked and prepared on first use. */
export function connectionOf(db: unknown): Connection<'sync'> {
  const handle = drizzleHandleOf(db)
  if (handle === null || !betterSqlite3.takes(handle)) {
    throw new JobsError('INVALID_OPTION', 'db: expected a Drizzle SQLite database or transaction on better-sqlite3')
  }
  return betterSqlite3.connectionOf(handle) as Connection<'sync'>
}

/** Whether a driver's client is a better-sqlite3 database, the synchronous driver the engine runs on. */
function isBetterSqlite3(client: unknown): client is Database.Database {
  if (typeof client !== 'object' || client === null) return false
  const { prepare, pragma, transaction } = client as Partial<Database.Database>
  return typeof prepare === 'function' && typeof pragma === 'function' && typeof transaction === 'function'
}
