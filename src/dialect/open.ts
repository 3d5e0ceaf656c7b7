/**
 * The connection behind a Drizzle handle, whatever its dialect: the one door
 * through which the API's functions reach a database. Each connection is
 * checked and prepared on its first use, and kept for the handle's client.
 */
import { JobsError } from '../errors.js'
import type { Connection, DriverEntry } from './connection.js'
import { drizzleHandleOf, type AsyncSqliteDatabase, type DrizzleHandle } from './drizzle.js'
import type { Kind } from './executor.js'
import { runAsync, runSync, type Answer, type Program } from './program.js'
import { libsql } from './libsql/connection.js'
import { nodePostgres } from './node-postgres/driver.js'
import { pgDriverEntry, type AsyncPgDatabase } from './pg/connection.js'
import { pglite } from './pglite/driver.js'
import { postgresJs } from './postgres-js/driver.js'
import { betterSqlite3, type SyncDatabase } from './better-sqlite3/connection.js'

export type { SyncDatabase } from './better-sqlite3/connection.js'
export type { AsyncSqliteDatabase } from './drizzle.js'
/** A Drizzle PostgreSQL database or transaction, on node-postgres, postgres.js or PGlite. */
export type PgDatabase = AsyncPgDatabase

/** A Drizzle database or transaction the API takes: SQLite on better-sqlite3 or libsql, or PostgreSQL. */
export type Database = SyncDatabase | AsyncSqliteDatabase | PgDatabase

/** What a call on `D` answers for `T`: at once on SQLite's synchronous driver (better-sqlite3), a promise on every other. */
export type AnswerOf<D, T> = D extends SyncDatabase ? T : Promise<T>

/**
 * The drivers, each registered here by one line: everything else of a driver is in its folder. A handle goes to
 * the first that takes it.
 */
const DRIVERS: readonly DriverEntry[] = [
  betterSqlite3,
  libsql,
  pgDriverEntry(nodePostgres),
  pgDriverEntry(postgresJs),
  pgDriverEntry(pglite),
]

const DIALECT_NAMES = { sqlite: 'SQLite', pg: 'PostgreSQL' } as const

/** What each dialect runs on, as the errors say it: `SQLite through better-sqlite3`. */
function runsOn(dialect: DrizzleHandle['dialect']): string {
  const labels = DRIVERS.filter((entry) => entry.dialect === dialect).map((entry) => entry.label)
  const list = labels.length > 1 ? `${labels.slice(0, -1).join(', ')} or ${labels.at(-1)}` : labels.join('')
  return `${DIALECT_NAMES[dialect]} through ${list}`
}

/**
 * The connection behind `db`, a Drizzle database or transaction. Throws INVALID_OPTION for anything else, or for
 * a handle on a driver none of DRIVERS takes; SCHEMA_MISSING when the tables were not migrated (SQLite at once;
 * PostgreSQL at its first use). @internal
 */
export function connectionOf(db: SyncDatabase): Connection<'sync'>
export function connectionOf(db: PgDatabase | AsyncSqliteDatabase): Connection<'async'>
export function connectionOf(db: Database): Connection
export function connectionOf(db: Database): Connection {
  const handle = drizzleHandleOf(db)
  if (handle === null) {
    throw new JobsError(
      'INVALID_OPTION',
      `db: expected a Drizzle database or transaction: drizzle-jobs runs on ${runsOn('sqlite')}, and on ${runsOn('pg')}`,
    )
  }
  const driver = DRIVERS.find((entry) => entry.takes(handle))
  if (!driver) {
    throw new JobsError('INVALID_OPTION', `db: drizzle-jobs runs on ${runsOn(handle.dialect)}; this Drizzle handle uses another driver`)
  }
  return driver.connectionOf(handle)
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
 * asynchronous one, a promise, which rejects where `call` threw (bad input, say). `failed`, where given, takes
 * what `call` threw or its promise's rejection, and answers in its place (at once, or as the promise). @internal
 */
export function answer<K extends Kind, T>(connection: Connection<K>, call: () => Answer<T>, failed?: (error: unknown) => T): Answer<T> {
  if (connection.kind === 'sync') {
    if (!failed) return call()
    try {
      return call()
    } catch (error) {
      return failed(error)
    }
  }
  let answered: Promise<T>
  try {
    answered = Promise.resolve(call())
  } catch (error) {
    answered = Promise.reject(error)
  }
  return failed ? answered.catch(failed) : answered
}
