/**
 * better-sqlite3 as a SQLite client (dialect/sqlite/statement.ts): statements
 * prepared once on its connection, whose answers come at once.
 */
import type Database from 'better-sqlite3'
import { runSync } from '../program.js'
import type { PreparedStatements, SqliteClient, StatementTable } from '../sqlite/statement.js'

/** better-sqlite3's connection: it answers at once. @internal */
export function betterSqlite3Client(client: Database.Database): SqliteClient<'sync'> {
  return { prepareAll: (statements) => prepareAll(client, statements), run: runSync }
}

/** Prepares every statement of `statements` on a better-sqlite3 connection, once. */
export function prepareAll<D extends StatementTable>(client: Database.Database, statements: D): PreparedStatements<'sync', D> {
  const prepared: Record<string, Database.Statement> = {}
  for (const [name, { sql, pluck }] of Object.entries(statements)) {
    const made = client.prepare(sql)
    prepared[name] = pluck ? made.pluck() : made
  }
  // The one place a better-sqlite3 statement takes the types declared with its SQL.
  return prepared as unknown as PreparedStatements<'sync', D>
}
