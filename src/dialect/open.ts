/**
 * The connection behind a Drizzle handle, whatever its dialect: the one door
 * through which the API's functions reach a database. Each connection is
 * checked and prepared on its first use, and kept for the handle's client.
 * The command-line tool opens the database it is given through the same
 * registry (openAddress).
 */
import { JobsError } from '../errors.js'
import type { Address, Connection, DriverEntry, OpenedDatabase, Opener, OpenOptions } from './connection.js'
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

/** The registered drivers' openers of `address`, in the order openAddress tries them. @internal */
export function openersOf(address: Address): Opener[] {
  return DRIVERS.map((entry) => entry.opener).filter((opener) => opener.opens(address))
}

/**
 * Opens the database at `address` (the command-line tool's `--db`) through the first of its openers whose package is
 * installed, so that the tool opens it on the app's own driver. Throws the first opener's import error where none's
 * package is installed (isModuleMissing), INVALID_OPTION where no driver opens such an address, and the driver's
 * error where it cannot open it. @internal
 */
export async function openAddress(address: Address, options: OpenOptions): Promise<OpenedDatabase> {
  const openers = openersOf(address)
  if (openers.length === 0)
    throw new JobsError('INVALID_OPTION', `no driver opens ${'url' in address ? `${address.url.protocol}// URLs` : address.path}`)
  const missing: unknown[] = []
  for (const opener of openers) {
    try {
      return await opener.open(address, options)
    } catch (error) {
      if (!isModuleMissing(error)) throw error
      missing.push(error)
    }
  }
  throw missing[0]
}

/** Whether an import failed because the package is not installed. @internal */
export function isModuleMissing(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND'
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
