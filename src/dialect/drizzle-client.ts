/**
 * The driver's client behind a Drizzle handle, whatever its dialect: the one
 * read of Drizzle's internals.
 */

/**
 * The driver's client behind a Drizzle database or transaction: a database's public `$client`. A transaction
 * has no public handle on it, so for one this reads Drizzle's own `session.client` (drizzle-orm 0.45: a
 * better-sqlite3 Database, a node-postgres PoolClient or Client, a postgres.js TransactionSql). Checked by
 * test/drizzle-handle.test.ts and test/pg/drizzle-handle.test.ts, which fail when Drizzle moves it.
 * @internal
 */
export function driverClientOf(db: object): unknown {
  if ('$client' in db && db.$client !== undefined) return db.$client
  const session: unknown = Reflect.get(db, 'session')
  return typeof session === 'object' && session !== null ? Reflect.get(session, 'client') : undefined
}
