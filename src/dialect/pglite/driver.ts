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
 */
import {
  hasFunctions,
  type PgClientDriver,
  type PgDatabaseName,
  type PgPoolDriver,
  type PgTransactionDriver,
  type PgValue,
  type Queryable,
} from '../pg/driver.js'

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

function pglitePool(client: Pglite): PgPoolDriver {
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

let savepoints = 0

function pgliteTransaction(tx: PgliteTransaction): PgTransactionDriver {
  const { query } = queryable(tx)
  return {
    inTransaction: true,
    // A transaction object does not say which instance it belongs to: the first use asks the server.
    database: null,
    query,
    async savepoint(fn) {
      const name = `drizzle_jobs_${++savepoints}`
      await tx.query(`savepoint ${name}`)
      try {
        const value = await fn({ query })
        await tx.query(`release savepoint ${name}`)
        return value
      } catch (error) {
        await tx
          .query(`rollback to savepoint ${name}`)
          .then(() => tx.query(`release savepoint ${name}`))
          .catch(() => {})
        throw error
      }
    },
  }
}
