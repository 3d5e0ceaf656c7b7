/**
 * The connection behind a Drizzle handle, whatever its dialect: the one door
 * through which the API's functions reach a database. Each connection is
 * checked and prepared on its first use, and kept for the handle's client.
 */
import type { Connection } from './connection.js'
import { drizzleHandleOf, type DrizzleHandle } from './drizzle.js'
import type { Kind } from './executor.js'
import { runAsync, runSync, type Program } from './program.js'
import { pgDriver, type AsyncPgDatabase } from './pg/connection.js'
import { sqliteDriver, type SyncDatabase } from './sqlite/connection.js'

export type { SyncDatabase } from './sqlite/connection.js'
/** A Drizzle PostgreSQL database or transaction, on node-postgres or postgres.js. */
export type PgDatabase = AsyncPgDatabase

/** A Drizzle database or transaction the API takes: SQLite on a synchronous driver, or PostgreSQL. */
export type Database = SyncDatabase | PgDatabase

/** What a call on `D` answers for `T`: at once on SQLite's synchronous drivers, a promise on PostgreSQL. */
export type AnswerOf<D, T> = D extends SyncDatabase ? T : Promise<T>

/** A driver the engine runs on: a folder of src/dialect/, which says which Drizzle handles it takes. */
export interface DriverEntry {
  /** The dialect of the handles it takes. */
  readonly dialect: DrizzleHandle['dialect']
  /** Whether it runs on the handle's driver client. */
  takes(handle: DrizzleHandle): boolean
  /** The connection behind a handle it takes (or, for a handle of its dialect that no driver takes, the error that says why). */
  connectionOf(db: unknown): Connection
}

/**
 * The drivers, each registered here by one line: everything else of a driver is in its folder. A handle goes to
 * the first that takes it; one that none takes gets the error of the first driver of its dialect, which says what
 * that dialect runs on.
 */
const DRIVERS: readonly DriverEntry[] = [sqliteDriver, pgDriver]

/**
 * The connection behind `db`, a Drizzle database or transaction. Throws INVALID_OPTION for anything else,
 * SCHEMA_MISSING when the tables were not migrated (SQLite at once; PostgreSQL at its first use). @internal
 */
export function connectionOf(db: SyncDatabase): Connection<'sync'>
export function connectionOf(db: PgDatabase): Connection<'async'>
export function connectionOf(db: Database): Connection
export function connectionOf(db: Database): Connection {
  const handle = drizzleHandleOf(db)
  const driver =
    (handle && DRIVERS.find((entry) => entry.takes(handle))) ??
    DRIVERS.find((entry) => entry.dialect === (handle?.dialect ?? 'sqlite')) ??
    DRIVERS[0]!
  return driver.connectionOf(db)
}

/**
 * Runs a program of several steps on `connection` (each its own transaction, say), answering as the
 * connection does: at once on a synchronous one, a promise on an asynchronous one. @internal
 */
export function runOn<T>(connection: Connection, program: Program<T>): T | Promise<T> {
  return connection.kind === 'sync' ? runSync(program) : runAsync(program)
}

/**
 * Runs `call` and answers as `connection` does: a synchronous connection's result or throw as is; on an
 * asynchronous one, a promise, which rejects where `call` threw (bad input, say). @internal
 */
export function answer<K extends Kind, T>(connection: Connection<K>, call: () => T | Promise<T>): T | Promise<T> {
  if (connection.kind === 'sync') return call()
  try {
    return Promise.resolve(call())
  } catch (error) {
    return Promise.reject(error)
  }
}
