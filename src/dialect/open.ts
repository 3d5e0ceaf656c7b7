/**
 * The connection behind a Drizzle handle, whatever its dialect: the one door
 * through which the API's functions reach a database. Each connection is
 * checked and prepared on its first use, and kept for the handle's client.
 */
import type { Connection } from './connection.js'
import { connectionOf as sqliteConnectionOf, type SyncDatabase } from './sqlite/connection.js'

export type { SyncDatabase } from './sqlite/connection.js'

/**
 * The connection behind `db`, a Drizzle database or transaction. Throws INVALID_OPTION for anything else,
 * SCHEMA_MISSING when the tables were not migrated. @internal
 */
export function connectionOf(db: SyncDatabase): Connection<'sync'> {
  return sqliteConnectionOf(db)
}
