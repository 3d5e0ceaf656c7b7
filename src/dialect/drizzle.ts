/**
 * What drizzle-jobs reads of a Drizzle handle, on drizzle-orm 0.45 and 1.0
 * alike: the one module that knows Drizzle's classes and internals.
 *
 * Drizzle 1.0 renamed the classes behind a handle (`PgDatabase` became
 * `PgAsyncDatabase`, `BaseSQLiteDatabase` gave way to `SQLiteAsyncDatabase`,
 * their transactions likewise), so no class is imported here: a handle is
 * known by the entity kinds of its classes, the names Drizzle's own `is()`
 * compares, which each major keeps for what it has. The handle types are
 * structural for the same reason: they name what both majors' handles share.
 */
import { entityKind, type SQLWrapper } from 'drizzle-orm'

/**
 * A Drizzle SQLite database or transaction on a synchronous driver (better-sqlite3), on drizzle-orm 0.45 or
 * 1.0: its queries answer at once, not as promises. Both work wherever the API takes `db` or `tx`.
 */
export interface SyncDatabase {
  run(query: SQLWrapper | string): unknown
  values(query: SQLWrapper | string): unknown[][]
}

/**
 * A Drizzle SQLite database or transaction on an asynchronous driver (libsql: `drizzle-orm/libsql`), on
 * drizzle-orm 0.45 or 1.0: its queries answer promises, and so do the API's calls given it.
 */
export interface AsyncSqliteDatabase {
  run(query: SQLWrapper | string): unknown
  values(query: SQLWrapper | string): PromiseLike<unknown[][]>
}

/**
 * A Drizzle PostgreSQL database or transaction, on node-postgres (`drizzle-orm/node-postgres`) or postgres.js
 * (`drizzle-orm/postgres-js`), drizzle-orm 0.45 or 1.0. Both work wherever the API takes `db` or `tx`.
 */
export interface PgDatabase {
  execute(query: SQLWrapper | string): PromiseLike<unknown>
  refreshMaterializedView(view: never): unknown
}

/** What a Drizzle handle is: its dialect, whether it is a transaction, and its driver's client. */
export interface DrizzleHandle {
  readonly dialect: 'sqlite' | 'pg'
  readonly inTransaction: boolean
  /** The driver's client: a database's public `$client`, or the client a transaction runs on. */
  readonly client: unknown
}

/** The entity kinds that make a handle of each dialect, and a transaction of it, in either major. */
const KINDS = {
  // 0.45: BaseSQLiteDatabase; 1.0: SQLiteAsyncDatabase, whose kind is still 'BaseSQLiteDatabase'.
  sqlite: { database: ['BaseSQLiteDatabase', 'SQLiteAsyncDatabase'], transaction: ['SQLiteTransaction', 'SQLiteAsyncTransaction'] },
  // 0.45: PgDatabase and PgTransaction; 1.0: PgAsyncDatabase (under BasePgAsyncDatabase) and PgAsyncTransaction.
  pg: { database: ['PgDatabase', 'BasePgAsyncDatabase', 'PgAsyncDatabase'], transaction: ['PgTransaction', 'PgAsyncTransaction'] },
} as const

/**
 * What `db` is, when it is a Drizzle SQLite or PostgreSQL database or transaction; null for anything else.
 * @internal
 */
export function drizzleHandleOf(db: unknown): DrizzleHandle | null {
  if (typeof db !== 'object' || db === null) return null
  const kinds = entityKindsOf(db)
  for (const dialect of ['sqlite', 'pg'] as const) {
    const { database, transaction } = KINDS[dialect]
    if (!database.some((kind) => kinds.has(kind))) continue
    return { dialect, inTransaction: transaction.some((kind) => kinds.has(kind)), client: driverClientOf(db) }
  }
  return null
}

/** The entity kinds of the classes `value` is an instance of, from its own class up. */
function entityKindsOf(value: object): Set<string> {
  const kinds = new Set<string>()
  for (let type: unknown = value.constructor; typeof type === 'function'; type = Object.getPrototypeOf(type)) {
    if (Object.hasOwn(type, entityKind)) {
      const kind: unknown = Reflect.get(type, entityKind)
      if (typeof kind === 'string') kinds.add(kind)
    }
  }
  return kinds
}

/**
 * The driver's client behind a Drizzle database or transaction: a database's public `$client`. A transaction
 * has no public handle on it, so for one this reads Drizzle's own `session.client` (a better-sqlite3
 * Database, a node-postgres PoolClient or Client, a postgres.js TransactionSql, PGlite's transaction), where both
 * majors keep it, or libsql's `session.tx` (its Transaction; its `session.client` is the database's Client).
 * Checked on both by test/drizzle-handle.test.ts, test/pg/drizzle-handle.test.ts and the fresh-app tests.
 * @internal
 */
export function driverClientOf(db: object): unknown {
  if ('$client' in db && db.$client !== undefined) return db.$client
  const session: unknown = Reflect.get(db, 'session')
  if (typeof session !== 'object' || session === null) return undefined
  // libsql's transaction session keeps its database's Client too: its statements run on its `tx`.
  const tx: unknown = Reflect.get(session, 'tx')
  return typeof tx === 'object' && tx !== null ? tx : Reflect.get(session, 'client')
}

/** Whether `value` is an object or function with a function under each of `names`: how a driver's client is known by its shape. @internal */
export function hasFunctions(value: unknown, ...names: string[]): value is object {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false
  return names.every((name) => typeof Reflect.get(value, name) === 'function')
}
