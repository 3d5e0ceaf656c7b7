/** Opening a SQLite file by its path, for the commands that name one: a better-sqlite3 database behind Drizzle. */
import type { SyncDatabase } from './connection.js'

/**
 * Opens the SQLite file at `path`, which must exist, as a Drizzle database. better-sqlite3 is loaded here, on
 * first use, so that an app on PostgreSQL runs the commands without it: throws the import's error when the
 * package is missing, the driver's when it cannot open the file. @internal
 */
export async function openSqliteFile(path: string): Promise<{ db: SyncDatabase; close(): void }> {
  const [{ default: Database }, { drizzle }] = await Promise.all([import('better-sqlite3'), import('drizzle-orm/better-sqlite3')])
  const client = new Database(path, { fileMustExist: true, timeout: 5_000 })
  return { db: drizzle({ client }), close: () => client.close() }
}
