/**
 * What the PostgreSQL dialect asks of a driver's client, whichever package it
 * is: one small interface, so that the statements, the executor and the
 * connection never know which driver runs them. Each driver is a folder of
 * src/dialect/ (node-postgres/, postgres-js/, pglite/) that recognises its
 * client by its shape, without importing its package, and answers this
 * interface for it.
 *
 * Values go to the server as text, numbers, booleans or null only, each cast
 * in the statement's SQL; rows come back as plain objects.
 */
import type { Opener } from '../connection.js'

/** A statement as a driver runs it: its text with `$n` placeholders, and a name unique to that text. */
export interface PgStatementText {
  /** Names the statement on each connection that prepares it (node-postgres): one prepare per pooled connection. */
  readonly name: string
  readonly text: string
}

/** A value as a statement takes it: every other type is converted, then cast in SQL. */
export type PgValue = string | number | boolean | null

/** Runs one statement: on any connection of a pool, or on the one client of a transaction. */
export interface Queryable {
  query(statement: PgStatementText, values: readonly PgValue[]): Promise<Record<string, unknown>[]>
}

/** The database a client connects to, as its own options name it. */
export interface PgDatabaseName {
  host: string
  port: number
  database: string
}

/** How a transaction of the engine's runs. */
export interface TransactionOptions {
  /** A read-only transaction, REPEATABLE READ: its statements see one state. */
  readOnly?: boolean
  /**
   * A write transaction of the engine's protocol (claims, ends, rescues), whose statements follow one another at
   * once: on a pool, the server ends it when its process stalls between them (WRITE_IDLE_LIMIT_MS), so that the
   * locks it holds never wait for that process to wake.
   */
  bounded?: boolean
}

/** A pool (or one client of its own): runs each piece of work in a transaction of its own. */
export interface PgPoolDriver extends Queryable {
  readonly inTransaction: false
  readonly database: PgDatabaseName
  /**
   * Runs `fn` on one client inside BEGIN/COMMIT (ROLLBACK on throw); the Queryable given runs on that client.
   * A write transaction is READ COMMITTED, whatever the server's default, so that each statement sees what
   * committed before it (the claim's lease count after its queue lock); a read-only one is REPEATABLE READ,
   * so that its statements see one state.
   */
  transaction<T>(fn: (q: Queryable) => Promise<T>, options?: TransactionOptions): Promise<T>
  /**
   * Listens on `channel` on a connection kept for it: `onNotice` gets each notification's payload, and
   * `onListening` is called each time the LISTEN is in place (at first, and again after the connection was
   * lost and made anew, when notices may have been missed meanwhile), and `onLost` when the listening
   * connection is lost, where the driver says so. Answers a function that stops it.
   */
  listen(channel: string, onNotice: (payload: string) => void, onListening: () => void, onLost: () => void): () => void
}

/** The client behind a transaction under way (a Drizzle PgTransaction's). */
export interface PgTransactionDriver extends Queryable {
  readonly inTransaction: true
  /** The database, when the client's options say (node-postgres); null for a postgres.js transaction, which holds none. */
  readonly database: PgDatabaseName | null
  /** Runs `fn` inside a savepoint of the transaction: RELEASE when it answers, ROLLBACK TO when it throws. */
  savepoint<T>(fn: (q: Queryable) => Promise<T>): Promise<T>
}

export type PgDriver = PgPoolDriver | PgTransactionDriver

export const WRITE_BEGIN = 'begin isolation level read committed'
export const READ_BEGIN = 'begin isolation level repeatable read read only'

/**
 * How long the server lets one of the engine's write transactions on a pool sit idle between two statements
 * before it ends the session (idle_in_transaction_session_timeout, set for that transaction only). The engine
 * sends each next statement as soon as the last one answered, so a transaction idle this long belongs to a
 * process whose event loop stalled (a handler's synchronous work, a paused VM); the row locks it holds (a
 * limited queue's row, the jobs it claims) would hold up every other worker until it woke, its lease's
 * takeover among them. The server rolls it back instead; the woken process finds its connection lost and
 * tries the work again, behind the fence. A wait for a lock is not idle: a transaction held up by the app's
 * lock waits as long as that lock is held.
 */
export const WRITE_IDLE_LIMIT_MS = 1_000
export const WRITE_IDLE_LIMIT = `set local idle_in_transaction_session_timeout = ${WRITE_IDLE_LIMIT_MS}`

/**
 * A driver of the PostgreSQL dialect: the clients of one package, recognised by their shape. Its folder registers
 * it (src/dialect/open.ts) through pgDriverEntry.
 */
export interface PgClientDriver {
  /** The driver as a user knows it, with its package: `node-postgres (pg)`. */
  readonly label: string
  /**
   * The driver for a client behind a Drizzle handle: a database's `$client`, or the client of its transaction.
   * Answers null for a client of another package.
   */
  driverOf(client: unknown, inTransaction: boolean): PgDriver | null
  /** How it opens a database by its URL, for the command-line tool: its folder's open.ts. */
  readonly opener: Opener
}

/** An identifier quoted for SQL. */
export function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}

export function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error))
}
