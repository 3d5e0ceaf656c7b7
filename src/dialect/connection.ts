/**
 * A database connection as the engine sees it, whatever its dialect. Every write goes through `write`,
 * `join` or `tryWrite`, which first make the database ready for writes once (whatever the dialect keeps
 * right for other writers: SQLite's counting triggers); `read` never writes, so a read-only connection
 * serves readers.
 */
import type { Executor, Kind, Result } from './executor.js'
import type { DrizzleHandle } from './drizzle.js'
import type { Database } from './open.js'
import type { ChangeKind } from './rows.js'
import type { Program } from './program.js'

/** The work of one transaction: a program, given the executor of that transaction. */
export type Work<K extends Kind, T> = (db: Executor<K>) => Program<T>

/**
 * What a connection's database and driver can do: the protocol asks these, never which database it is, so that a
 * driver added in a folder of its own says what it can do here and nothing outside its folder changes.
 */
export interface Capabilities {
  /**
   * A request may wait for a round trip (to a server: PostgreSQL's, a remote libsql database's) and answers as a
   * promise: a worker claims more jobs ahead in a flush, to spread that wait (MAX_CLAIM_AHEAD). False where requests
   * are answered in-process, at once (better-sqlite3), and a flush takes well under a millisecond.
   */
  readonly roundTrips: boolean
  /**
   * One writer at a time for the whole database (SQLite's write lock): a worker that finds other writers leaves a
   * gap between its flushes, for them to take the lock.
   */
  readonly oneWriter: boolean
  /**
   * JSON is kept as the text written (SQLite's text columns; PostgreSQL's jsonb keeps its own form): a row a worker
   * wrote may be handed to this process's watchers as a read would answer it, its result included.
   */
  readonly jsonAsText: boolean
}

/**
 * The engine's view of one database connection, whatever its dialect. Work that must see or leave one
 * state is a program (program.ts), which the connection runs in a transaction: at once on a synchronous
 * driver, awaiting each answer on an asynchronous one.
 */
export interface Connection<K extends Kind = Kind> {
  /** Whether the executor answers values or promises: the type of its answers. What the database can do is `capabilities`. */
  readonly kind: K
  readonly capabilities: Capabilities
  readonly executor: Executor<K>
  /** Names the database, so that every connection of this process to it shares wake-ups. */
  readonly key: string
  /** The database as a person knows it: a file's name, say. */
  readonly label: string
  /** Whether a transaction is under way on this connection (the app's own, say). */
  inTransaction(): boolean
  /** Runs `work` in a write transaction, or in a savepoint of the one under way. */
  write<T>(work: Work<K, T>): Result<K, T>
  /** Runs `work` in the transaction under way, with no savepoint: for work whose only write that may fail comes first. */
  join<T>(work: Work<K, T>): Result<K, T>
  /**
   * Runs `work` in a write transaction of its own (the connection must not be in one), now or not at all: where the
   * database has one writer at a time and another connection holds its lock, throws the busy error (`isBusy`) at
   * once instead of waiting for the lock, so that the caller tries again on a timer of its own and its process runs
   * meanwhile. The connection's own wait for the lock (the app's) is left as it was.
   */
  tryWrite<T>(work: Work<K, T>): Result<K, T>
  /** Runs `work`'s reads in one read transaction, so that they all see one state; in the one under way, if any. */
  read<T>(work: Work<K, T>): Result<K, T>
  /** Whether an error is the database saying another connection holds a lock: the work is retried later, never surfaced. */
  isBusy(error: unknown): boolean
  /**
   * Calls `onChange` with the changes that other processes tell of (Executor.queueNotify) as they commit,
   * until the answered function is called. Where a dialect has no such channel (SQLite) it never calls:
   * other processes' writes are found by polling the data version.
   */
  listen(onChange: (queue: string, kind: ChangeKind) => void): () => void
  /** Makes the database ready for writes now, as the first write would: a writer that starts (a worker) calls it at once. */
  prepareWrites(): Result<K, void>
  /**
   * Progress carried between processes by the database itself (PostgreSQL's NOTIFY), on every host; null where
   * processes pass it through a local channel instead (SQLite), and on a connection that cannot listen.
   */
  readonly progressNotices: ProgressNotices | null
}

/**
 * Notices that carry runs' progress between processes (src/progress/notices.ts says what they hold). A value
 * goes to the processes that listen for values; an ask goes to the processes that listen to others
 * (`Connection.listen`), among them the workers, so that the owner of a run answers it.
 */
export interface ProgressNotices {
  /** The longest payload one notice may carry, in bytes of UTF-8. */
  readonly maxPayloadBytes: number
  /** Sends values and asks, in one transaction of their own. */
  send(values: readonly string[], asks: readonly string[]): Promise<void>
  /**
   * Calls `onValue` with each value's payload, `onListening` each time the listening is in place (at first,
   * and again after a lost connection was made anew: values may have been missed meanwhile), `onLost` when it
   * is lost. Answers the stop.
   */
  listen(onValue: (payload: string) => void, onListening: () => void, onLost: () => void): () => void
  /** Calls `onAsk` with each ask's payload, while this connection listens to others (`Connection.listen`). Answers the stop. */
  onAsk(onAsk: (payload: string) => void): () => void
}

/**
 * A driver the engine runs on: a folder of src/dialect/ of its own, registered by one line in src/dialect/open.ts,
 * which says which Drizzle handles it takes and makes their connections.
 */
export interface DriverEntry {
  /** The dialect of the handles it takes. */
  readonly dialect: DrizzleHandle['dialect']
  /** The driver as a user knows it, with its package where the name differs: `postgres.js (postgres)`. */
  readonly label: string
  /** Whether it runs on the handle's driver client. */
  takes(handle: DrizzleHandle): boolean
  /** The connection behind a handle it takes, made on the first call and kept for the handle's client. */
  connectionOf(handle: DrizzleHandle): Connection
  /** How it opens a database by its address, for the command-line tool (`--db`). */
  readonly opener: Opener
}

/** A database as the command-line tool names it: a URL, or a path of the file system that exists. */
export type Address = UrlAddress | PathAddress

export interface UrlAddress {
  readonly url: URL
  /** The URL as it was given, which the driver reads itself. */
  readonly text: string
}

export interface PathAddress {
  /** An absolute path. */
  readonly path: string
  readonly directory: boolean
}

/** What every opener is given. */
export interface OpenOptions {
  /** The most connections a driver that keeps a pool keeps open. */
  readonly maxConnections: number
  /** How long a first connection to a server may take. */
  readonly connectTimeoutMs: number
}

/** A database an opener opened: its Drizzle handle, and its close. */
export interface OpenedDatabase {
  readonly db: Database
  /** Where the database is a server's: makes a connection and runs one statement, throwing the driver's error when the server refuses it. */
  ping?(): Promise<void>
  close(): Promise<void>
}

/**
 * How a driver opens a database by its address, for the command-line tool, through its own package, which only `open`
 * loads: an app that has not installed a driver runs the tool on its own. src/dialect/open.ts asks each registered
 * driver's opener in turn (openAddress).
 */
export interface Opener<A extends Address = Address> {
  /** What it opens, as the tool's errors say it: `a PostgreSQL URL`. */
  readonly what: string
  /** The package `open` loads, as `npm install` names it. */
  readonly package: string
  /** Whether it opens `address`: a URL by its scheme, a path by what is there. Reads no more than a file's name or a directory's entry. */
  opens(address: Address): address is A
  /**
   * Opens `address`, which it opens, as a Drizzle database. Throws the import's error (ERR_MODULE_NOT_FOUND) where
   * its package is not installed, the driver's where it cannot open the address.
   */
  open(address: A, options: OpenOptions): Promise<OpenedDatabase>
}
