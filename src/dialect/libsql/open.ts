/** Opening a SQLite file by its path through libsql, for the command-line tool: a libsql client behind Drizzle. */
import type { Opener, PathAddress } from '../connection.js'
import { isFile, SQLITE_FILE } from '../sqlite/open.js'

/**
 * Opens the SQLite file at the path as a Drizzle database on libsql (`@libsql/client`), loaded on first use: throws
 * the import's error when the package is missing. @internal
 */
export const libsqlOpener: Opener<PathAddress> = {
  what: SQLITE_FILE,
  package: '@libsql/client',
  opens: isFile,
  async open({ path }) {
    const [{ createClient }, { drizzle }] = await Promise.all([import('@libsql/client'), import('drizzle-orm/libsql')])
    const client = createClient({ url: `file:${path}` })
    return { db: drizzle({ client }), close: async () => client.close() }
  },
}
