/**
 * libsql (`@libsql/client`, `drizzle-orm/libsql`) as a SQLite driver: the engine's view of one connection, on a
 * local `file:` database or a remote one. Its calls answer promises, as on PostgreSQL; its statements are the
 * SQLite dialect's (client.ts).
 *
 * libsql's Client runs its statements one at a time on a connection of its own; `transaction()` hands that
 * connection to the transaction and opens another for what follows, with no busy timeout (a write lock another
 * connection holds refuses a `BEGIN IMMEDIATE` at once). So each of the engine's transactions is one `transaction()`:
 * a worker's flush is refused at once when another writer holds the lock (tryWrite) and tried again on its own
 * timer; any other write tries its begin again, shortly, for up to WRITE_WAIT_MS. Other processes' commits are
 * found by looking (a connection's data version means nothing once its connection is another), and progress crosses
 * processes through the same local channel as better-sqlite3's, keyed by the file.
 */
import { hasFunctions } from '../drizzle.js'
import { JobsError } from '../../errors.js'
import type { DriverEntry } from '../connection.js'
import type { DrizzleHandle } from '../drizzle.js'
import { runAsync, type Connection, type Work } from '../index.js'
import { sqliteExecutor } from '../sqlite/executor.js'
import { checkSchema, isBusy, SCHEMA_CHECK } from '../sqlite/schema.js'
import { COUNTER_TRIGGERS, OBSOLETE_TRIGGERS, RECOUNT_QUEUES, SQL, TRIGGER_COUNT, TRIGGER_PRESENT } from '../sqlite/statements.js'
import { libsqlClient, type LibsqlExecutor } from './client.js'

/** A libsql Transaction: statements, then commit or rollback; `close` lets its connection go. */
interface LibsqlTransaction extends LibsqlExecutor {
  executeMultiple(sql: string): Promise<void>
  commit(): Promise<void>
  rollback(): Promise<void>
  close(): void
  readonly closed: boolean
}

/** A libsql Client. */
interface LibsqlClient extends LibsqlExecutor {
  executeMultiple(sql: string): Promise<void>
  transaction(mode: 'write' | 'deferred'): Promise<LibsqlTransaction>
  readonly protocol: string
  readonly closed: boolean
}

function isLibsqlClient(client: unknown): client is LibsqlClient {
  return hasFunctions(client, 'execute', 'batch', 'transaction', 'executeMultiple') && typeof Reflect.get(client, 'protocol') === 'string'
}

function isLibsqlTransaction(client: unknown): client is LibsqlTransaction {
  return hasFunctions(client, 'execute', 'batch', 'commit', 'rollback', 'close') && !hasFunctions(client, 'transaction')
}

/** How long a write other than a flush tries to begin while another connection holds the write lock. */
const WRITE_WAIT_MS = 5_000
/** How long it waits between two tries: doubling from the first, up to the last. */
const BEGIN_RETRY_FIRST_MS = 1
const BEGIN_RETRY_MAX_MS = 20

const connections = new WeakMap<object, Connection<'async'>>()

/** The libsql driver of the SQLite dialect, as src/dialect/open.ts registers it. @internal */
export const libsql: DriverEntry = {
  dialect: 'sqlite',
  label: 'libsql (@libsql/client)',
  takes: (handle: DrizzleHandle) =>
    handle.dialect === 'sqlite' && (handle.inTransaction ? isLibsqlTransaction(handle.client) : isLibsqlClient(handle.client)),
  connectionOf(handle: DrizzleHandle) {
    const client = handle.client
    if (typeof client !== 'object' || client === null) throw new JobsError('INVALID_OPTION', 'db: this Drizzle handle has no libsql client')
    let connection = connections.get(client)
    if (!connection) {
      connection = isLibsqlClient(client) ? openClient(client) : openTransaction(client as LibsqlTransaction)
      connections.set(client, connection)
    }
    return connection
  },
}

let unnamed = 0

/** What a connection of either kind shares: its name, found on its first use, and the check and install made once. */
function firstUse(on: LibsqlClient | LibsqlTransaction) {
  const client = libsqlClient(on)
  let key = `libsql://unnamed/${++unnamed}`
  let label = 'libsql'
  let checked: Promise<void> | undefined
  let installed = false
  let installedHere = false
  return {
    key: () => key,
    label: () => label,
    /** Checks the schema and names the database on the first use, and again after a check that failed. */
    ready: (): Promise<void> =>
      (checked ??= (async () => {
        await runAsync(checkSchema(client.prepareAll(SCHEMA_CHECK)))
        const { file } = client.prepareAll({ file: SQL.mainFile })
        const path = await file.get()
        if (path) {
          key = path
          label = path.slice(path.lastIndexOf('/') + 1)
        } else label = 'in memory'
      })().catch((error: unknown) => {
        checked = undefined
        throw error
      })),
    /**
     * Installs the counting and protocol triggers (as better-sqlite3's connection does) where they are missing, on
     * `target`: a transaction of its own, or the app's. Answers whether it installed them.
     */
    async install(target: LibsqlExecutor & { executeMultiple(sql: string): Promise<void> }): Promise<boolean> {
      if (installed) return false
      const statements = libsqlClient(target).prepareAll({ present: TRIGGER_PRESENT, triggersPresent: SQL.triggersPresent })
      for (const name of OBSOLETE_TRIGGERS)
        if ((await statements.present.get(name)) !== undefined) await target.executeMultiple(`drop trigger if exists ${name}`)
      if ((await statements.triggersPresent.get()) === TRIGGER_COUNT) {
        // Present and not of this connection's making: committed, so no write looks again.
        if (!installedHere) installed = true
        return false
      }
      await target.executeMultiple(`${COUNTER_TRIGGERS}\n${RECOUNT_QUEUES}`)
      installedHere = true
      return true
    },
    markInstalled: () => void (installed = true),
  }
}

/** Runs `work` in `tx`, then commits it; rolls back when it throws. Lets the transaction's connection go either way. */
async function inTransaction<T>(tx: LibsqlTransaction, work: Work<'async', T>): Promise<T> {
  try {
    const client = libsqlClient(tx)
    const value = await runAsync(work(sqliteExecutor(client, client.prepareAll(SQL))))
    await tx.commit()
    return value
  } catch (error) {
    if (!tx.closed) await tx.rollback().catch(() => {})
    throw error
  } finally {
    tx.close()
  }
}

function openClient(client: LibsqlClient): Connection<'async'> {
  const use = firstUse(client)
  const statements = libsqlClient(client)
  const direct = sqliteExecutor(statements, statements.prepareAll(SQL))
  let version = 0
  /** Installs the triggers once, in a write transaction of its own. */
  let installing: Promise<void> | undefined
  const prepared = async () => {
    await use.ready()
    await (installing ??= beginWrite(true).then(async (tx) => {
      try {
        await use.install(tx)
        await tx.commit()
        use.markInstalled()
      } catch (error) {
        installing = undefined
        if (!tx.closed) await tx.rollback().catch(() => {})
        throw error
      } finally {
        tx.close()
      }
    }))
  }
  /** Begins a write transaction: at once or not at all, or trying again while the lock is held, up to WRITE_WAIT_MS. */
  async function beginWrite(wait: boolean): Promise<LibsqlTransaction> {
    const until = Date.now() + WRITE_WAIT_MS
    for (let waitMs = BEGIN_RETRY_FIRST_MS; ; waitMs = Math.min(waitMs * 2, BEGIN_RETRY_MAX_MS)) {
      try {
        return await client.transaction('write')
      } catch (error) {
        if (!wait || !isBusy(error) || Date.now() >= until) throw error
        await new Promise((resolve) => setTimeout(resolve, waitMs))
      }
    }
  }
  const write = async <T>(work: Work<'async', T>) => {
    await prepared()
    return inTransaction(await beginWrite(true), work)
  }
  return {
    kind: 'async',
    capabilities: { synchronous: false, oneWriter: true, jsonAsText: true },
    executor: { ...direct, dataVersion: async () => ++version },
    get key() {
      return use.key()
    },
    get label() {
      return use.label()
    },
    inTransaction: () => false,
    write,
    join: write,
    async tryWrite(work) {
      await prepared()
      return inTransaction(await beginWrite(false), work)
    },
    async read(work) {
      await use.ready()
      return inTransaction(await client.transaction('deferred'), work)
    },
    isBusy,
    // Other processes' writes are found by looking: there is nothing to listen to.
    listen: () => () => {},
    prepareWrites: prepared,
  }
}

let savepoints = 0

/** The app's transaction: the engine's work takes turns on it, each write in a savepoint of its own. */
function openTransaction(tx: LibsqlTransaction): Connection<'async'> {
  const use = firstUse(tx)
  const statements = libsqlClient(tx)
  const executor = sqliteExecutor(statements, statements.prepareAll(SQL))
  let version = 0
  let turn: Promise<unknown> = Promise.resolve()
  const inTurn = <T>(fn: () => Promise<T>): Promise<T> => {
    const next = turn.then(fn, fn)
    turn = next.then(
      () => undefined,
      () => undefined,
    )
    return next
  }
  const prepared = async () => {
    await use.ready()
    // Installed in the app's transaction, it may yet roll back with it: each write looks again.
    await use.install(tx)
  }
  const direct = <T>(work: Work<'async', T>) => runAsync(work(executor))
  const write = <T>(work: Work<'async', T>) =>
    inTurn(async () => {
      await prepared()
      const name = `drizzle_jobs_${++savepoints}`
      await tx.execute({ sql: `savepoint ${name}`, args: [] })
      try {
        const value = await direct(work)
        await tx.execute({ sql: `release savepoint ${name}`, args: [] })
        return value
      } catch (error) {
        await tx
          .execute({ sql: `rollback to savepoint ${name}`, args: [] })
          .then(() => tx.execute({ sql: `release savepoint ${name}`, args: [] }))
          .catch(() => {})
        throw error
      }
    })
  return {
    kind: 'async',
    capabilities: { synchronous: false, oneWriter: true, jsonAsText: true },
    executor: { ...executor, dataVersion: async () => ++version },
    get key() {
      return use.key()
    },
    get label() {
      return use.label()
    },
    inTransaction: () => true,
    write,
    join: (work) =>
      inTurn(async () => {
        await prepared()
        return direct(work)
      }),
    tryWrite: write,
    read: (work) =>
      inTurn(async () => {
        await use.ready()
        return direct(work)
      }),
    isBusy,
    listen: () => () => {},
    prepareWrites: prepared,
  }
}
