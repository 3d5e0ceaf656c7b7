/** Opening a SQLite file by its path, for the commands that name one. */
import Database from 'better-sqlite3'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import type { SyncDatabase } from './connection.js'

/** Opens the SQLite file at `path`, which must exist, as a Drizzle database; throws the driver's error when it cannot. @internal */
export function openSqliteFile(path: string): { db: SyncDatabase; close(): void } {
  const client = new Database(path, { fileMustExist: true, timeout: 5_000 })
  return { db: drizzle(client), close: () => client.close() }
}
