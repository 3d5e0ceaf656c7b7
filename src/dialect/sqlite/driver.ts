/**
 * What the SQLite connection (connection.ts) asks of a driver, whichever package it is: the connection's
 * transactions, its first use and the triggers' install are written once over these interfaces. Each driver is a
 * folder of src/dialect/ (better-sqlite3/, libsql/) that recognises its client by its shape, without importing its
 * package, answers these for it, and registers through sqliteDriverEntry. A synchronous driver answers at once, an
 * asynchronous one with promises: the connection's steps are programs (program.ts), which its client runs either way.
 */
import type { Opener } from '../connection.js'
import type { Kind, Result } from '../executor.js'
import { ask, type Answer, type Program } from '../program.js'
import type { SqliteClient } from './statement.js'

/**
 * How a transaction of the engine's begins: `write` takes the write lock, waiting while another connection holds it;
 * `now` takes it at once or throws SQLite's busy error (Connection.tryWrite); `read` takes none.
 */
export type TransactionMode = 'write' | 'now' | 'read'

/** One connection's client as the SQLite connection uses it: the executor's statements, SQL text, and the data version. */
export interface SqliteConnectionClient<K extends Kind> extends SqliteClient<K> {
  /** Runs SQL text of one statement or several, without parameters (a savepoint, the triggers' install). */
  exec(sql: string): Result<K, void>
  /** The data version the executor answers, where the connection's own (`pragma data_version`) would not move as other connections commit. */
  readonly dataVersion?: () => Result<K, number>
}

/** A SQLite driver's view of one Drizzle handle's client: the app's database, or its transaction. */
export interface SqliteDriver<K extends Kind> {
  /** Whether its answers come at once or as promises (Connection.kind). A synchronous connection is checked as it is made. */
  readonly kind: K
  /** Whether a statement may wait for a round trip (Capabilities.roundTrips). */
  readonly roundTrips: boolean
  /** The database as the connection is named until its first use has read which file it is. */
  readonly label: string
  /** Whether the database is on this machine, where a main database with no file is one in memory (the schema check says so). */
  readonly local: boolean
  /** A connection that may not write: it drops and installs no trigger, and serves readers only. */
  readonly readOnly: boolean
  /** The app's connection or transaction: the first use's schema check reads on it, and the engine's work joins the app's transaction through it. */
  readonly client: SqliteConnectionClient<K>
  /** Whether the app's transaction is under way on `client` (Connection.inTransaction). */
  inTransaction(): boolean
  /**
   * Runs a call of the connection once its earlier calls are done, where pieces of the engine's work may not
   * interleave on `client` (an asynchronous driver's app transaction, whose savepoints would cross); else at once.
   */
  turn<T>(call: () => Answer<T>): Answer<T>
  /**
   * Where the engine's transactions run, made on the first use, given the main database's file ('' for none): on
   * `client`, or on a connection of the driver's own. Null where `client` is the app's transaction, which begins none.
   */
  readonly session: ((file: string) => Answer<SqliteSession<K>>) | null
}

/** Where the engine's own transactions run, outside any of the app's. */
export interface SqliteSession<K extends Kind> {
  /** Runs statements outside any transaction, each on its own. */
  readonly client: SqliteConnectionClient<K>
  /** Runs `body` in a transaction that begins as `mode` says, given the client of that transaction; commits, or rolls back where it throws. */
  transaction<T>(mode: TransactionMode, body: (client: SqliteConnectionClient<K>) => Program<T>): Result<K, T>
}

/** A SQLite driver's package: the clients it recognises, as src/dialect/open.ts registers it (sqliteDriverEntry). */
export interface SqliteClientDriver {
  /** The driver as a user knows it, with its package where the name differs: `libsql (@libsql/client)`. */
  readonly label: string
  /** Whether a Drizzle handle's client is one of its package's: a database's, or a transaction's (`inTransaction`). */
  takes(client: unknown, inTransaction: boolean): boolean
  /** The driver for a client it takes. */
  driverOf(client: object): SqliteDriver<Kind>
  /** How it opens a SQLite file by its path, for the command-line tool: its folder's open.ts. */
  readonly opener: Opener
}

/** The statements that begin and end a transaction on a driver's one connection. */
export interface TransactionStatements {
  begin(mode: TransactionMode): Answer<unknown>
  commit(): Answer<unknown>
  rollback(): Answer<unknown>
  /** Whether the transaction is still open: SQLite rolls some back itself when a statement fails. */
  inTransaction(): boolean
}

/**
 * A transaction on a driver's one connection (better-sqlite3's): it begins, runs `body`, and commits; where the body or
 * the commit throws, it rolls back what is still open. For a driver whose transactions take a connection of their own
 * (libsql's `transaction()`), the driver writes its SqliteSession.transaction itself. @internal
 */
export function* oneConnectionTransaction<T>(statements: TransactionStatements, mode: TransactionMode, body: Program<T>): Program<T> {
  yield* ask(statements.begin(mode))
  try {
    const value = yield* body
    yield* ask(statements.commit())
    return value
  } catch (error) {
    if (statements.inTransaction()) yield* ask(statements.rollback())
    throw error
  }
}
