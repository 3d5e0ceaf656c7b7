/** Opening a SQLite file by its path, for the command-line tool: a better-sqlite3 database behind Drizzle. */
import type { Opener, PathAddress } from '../connection.js'
import { isFile, SQLITE_FILE } from '../sqlite/open.js'

/**
 * Opens the SQLite file at the path, which must exist, as a Drizzle database. better-sqlite3 is loaded on first use,
 * so that an app on PostgreSQL runs the tool without it: throws the import's error when the package is missing, the
 * driver's when it cannot open the file. @internal
 */
export const betterSqlite3Opener: Opener<PathAddress> = {
  what: SQLITE_FILE,
  package: 'better-sqlite3',
  opens: isFile,
  async open({ path }) {
    const [{ default: Database }, { drizzle }] = await Promise.all([import('better-sqlite3'), import('drizzle-orm/better-sqlite3')])
    const client = new Database(path, { fileMustExist: true, timeout: 5_000 })
    return { db: drizzle({ client }), close: async () => void client.close() }
  },
}
