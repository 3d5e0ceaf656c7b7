/**
 * PGlite (`@electric-sql/pglite`) as a driver of the PostgreSQL dialect: a
 * PostgreSQL compiled to WASM that runs inside the app's process, through
 * `drizzle-orm/pglite`. Its instance and the transaction object its
 * `transaction` hands over are recognised by their shape (the package is
 * never imported here).
 *
 * One instance is one database session: PGlite runs one statement at a time
 * and holds every other statement back while a transaction is open (its own
 * mutex), so the engine's transactions, the app's and the readers' take turns
 * on it. A lock that one transaction waits for is never held by another, and
 * nothing is bounded: there is no other process to hold up. LISTEN and NOTIFY
 * work within the instance, which is all the instance has.
 *
 * PGlite keeps no lock on a data directory: a second process that opens the
 * same directory reads and writes it beside the first, and each overwrites
 * what the other wrote. So the first connection of a process to an instance on
 * a directory of the file system marks it as this process's (LOCK_FILE,
 * data-directory.ts), and a connection of another live process of the same
 * host is refused.
 */
import { hasFunctions } from '../drizzle.js'
import { inSavepoint } from '../savepoint.js'
import { join, resolve } from 'node:path'
import { JobsError } from '../../errors.js'
import { LOCK_FILE, markDataDirectory } from './data-directory.js'
import { pgliteOpener } from './open.js'
import type { PgClientDriver, PgDatabaseName, PgPoolDriver, PgTransactionDriver, PgValue, Queryable } from '../pg/driver.js'

/** What the engine needs of PGlite's transaction object, and of the instance, which runs statements alike. */
interface PgliteQueryable {
  query(text: string, params?: PgValue[]): Promise<{ rows: Record<string, unknown>[] }>
}

interface PgliteTransaction extends PgliteQueryable {
  readonly closed: boolean
}

interface Pglite extends PgliteQueryable {
  transaction<T>(fn: (tx: PgliteTransaction) => Promise<T>): Promise<T>
  listen(channel: string, onNotice: (payload: string) => void): Promise<() => Promise<void>>
  readonly dataDir?: string
}

/** The PGlite clients. @internal */
export const pglite: PgClientDriver = {
  label: 'PGlite (@electric-sql/pglite)',
  opener: pgliteOpener,
  driverOf(client, inTransaction) {
    if (inTransaction) return isPgliteTransaction(client) ? pgliteTransaction(client) : null
    return isPglite(client) ? pglitePool(client) : null
  },
}

function isPglite(client: unknown): client is Pglite {
  return hasFunctions(client, 'query', 'exec', 'transaction', 'listen', 'unlisten', 'dumpDataDir')
}

/** PGlite's transaction object: statements, a rollback, and whether it has ended. */
function isPgliteTransaction(client: unknown): client is PgliteTransaction {
  return hasFunctions(client, 'query', 'exec', 'rollback', 'listen') && !hasFunctions(client, 'transaction') && 'closed' in client
}

function queryable(client: PgliteQueryable): Queryable {
  return {
    async query(statement, values) {
      return (await client.query(statement.text, [...values])).rows
    },
  }
}

/**
 * Names each instance for the connections of this process (Connection.key): its data directory, or a number of
 * its own for one in memory. Two instances are two databases, even on one directory (which PGlite does not allow).
 */
const names = new WeakMap<object, PgDatabaseName>()
let instances = 0

function nameOf(client: Pglite): PgDatabaseName {
  let name = names.get(client)
  if (!name) {
    name = { host: 'pglite', port: ++instances, database: client.dataDir || 'memory' }
    names.set(client, name)
  }
  return name
}

const WRITE_SETTINGS = 'set transaction isolation level read committed'
const READ_SETTINGS = 'set transaction isolation level repeatable read, read only'

/**
 * Marks the instance's data directory, when it is one of the file system, as this process's; throws INVALID_OPTION
 * when a live process of this host has marked it (markDataDirectory).
 */
function markDataDir(client: Pglite): void {
  const dir = fileDataDir(client.dataDir)
  if (dir === null) return
  const holder = markDataDirectory(dir)
  if (holder !== null) {
    throw new JobsError(
      'INVALID_OPTION',
      `db: the PGlite database in ${dir} is open in process ${holder} (${join(dir, LOCK_FILE)}): PGlite serves one process, and a second one on the same directory would overwrite what the first writes. Run every worker in the process that opened it, or use a PostgreSQL server for several processes`,
    )
  }
}

/** A data directory of the file system (`./data`, `file://./data`); null for one in memory or in a browser's store. */
function fileDataDir(dataDir: string | undefined): string | null {
  if (!dataDir) return null
  if (dataDir.startsWith('file://')) return resolve(dataDir.slice('file://'.length))
  return /^[a-z]+:\/\//.test(dataDir) ? null : resolve(dataDir)
}

function pglitePool(client: Pglite): PgPoolDriver {
  markDataDir(client)
  return {
    inTransaction: false,
    database: nameOf(client),
    query: queryable(client).query,
    transaction: (fn, options) =>
      client.transaction(async (tx) => {
        await tx.query(options?.readOnly ? READ_SETTINGS : WRITE_SETTINGS)
        return fn(queryable(tx))
      }),
    listen(channel, onNotice, onListening) {
      // PGlite hears its own notices, and has no connection to lose. It quotes no channel: the engine's are plain names.
      let stopped = false
      let unlisten: (() => Promise<void>) | undefined
      client.listen(channel, onNotice).then(
        (stop) => {
          unlisten = stop
          if (stopped) void stop().catch(() => {})
          else onListening()
        },
        () => {},
      )
      return () => {
        stopped = true
        void unlisten?.().catch(() => {})
      }
    },
  }
}

function pgliteTransaction(tx: PgliteTransaction): PgTransactionDriver {
  const { query } = queryable(tx)
  return {
    inTransaction: true,
    // A transaction object does not say which instance it belongs to: the first use asks the server.
    database: null,
    query,
    savepoint: (fn) =>
      inSavepoint(
        (sql) => tx.query(sql),
        () => fn({ query }),
      ),
  }
}
