/** Opening a SQLite file by its path through libsql, for the commands that name one, where better-sqlite3 is not installed. */
import type { AsyncSqliteDatabase } from '../drizzle.js'

/**
 * Opens the SQLite file at `path` as a Drizzle database on libsql (`@libsql/client`), loaded here, on first use:
 * throws the import's error when the package is missing. @internal
 */
export async function openLibsqlFile(path: string): Promise<{ db: AsyncSqliteDatabase; close(): void }> {
  const [{ createClient }, { drizzle }] = await Promise.all([import('@libsql/client'), import('drizzle-orm/libsql')])
  const client = createClient({ url: `file:${path}` })
  return { db: drizzle({ client }), close: () => client.close() }
}
