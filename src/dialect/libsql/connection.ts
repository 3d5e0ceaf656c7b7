/**
 * libsql (`@libsql/client`, `drizzle-orm/libsql`) as a SQLite driver: the engine's view of one connection, on a
 * local `file:` database or a remote one. Its calls answer promises, as on PostgreSQL; its statements are the
 * SQLite dialect's (client.ts).
 *
 * libsql's Client keeps a pool of connections, lends one to each statement and each `transaction()`, and waits for
 * no lock: a `BEGIN IMMEDIATE` while another connection holds the write lock is refused at once. On a local file
 * the engine works on a client of its own (laneSession): one connection, whose transactions take turns, so that its
 * data version moves only when another connection commits, as better-sqlite3's does; a worker's flush is refused at
 * once when another writer holds the lock (tryWrite) and tried again on its own timer, and any other write tries
 * its begin again, shortly, for up to WRITE_WAIT_MS. Progress crosses processes through the same local channel as
 * better-sqlite3's, keyed by the file. On a remote database, in memory, or on an embedded replica, it works through
 * the app's client, one `transaction()` a piece of work, and looks for other processes' commits at every poll.
 */
import { hasFunctions } from '../drizzle.js'
import { inSavepoint } from '../savepoint.js'
import { existsSync } from 'node:fs'
import { JobsError } from '../../errors.js'
import type { DriverEntry } from '../connection.js'
import { libsqlOpener } from './open.js'
import type { DrizzleHandle } from '../drizzle.js'
import { Lane, runAsync, type Connection, type Executor, type Work } from '../index.js'
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
  close(): void
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
  opener: libsqlOpener,
}

let unnamed = 0

/** What a connection of either kind shares: its name, found on its first use, and the check and install made once. */
function firstUse(on: LibsqlClient | LibsqlTransaction) {
  const client = libsqlClient(on)
  let key = `libsql://unnamed/${++unnamed}`
  let label = 'libsql'
  let checked: Promise<string> | undefined
  let installed = false
  let installedHere = false
  return {
    key: () => key,
    label: () => label,
    /**
     * Checks the schema and names the database on the first use, and again after a check that failed; answers the
     * main database's file ('' for one in memory, or a remote one's).
     */
    ready: (): Promise<string> =>
      (checked ??= (async () => {
        // Only a Client says whether its database is on this machine (protocol 'file'): the app's transaction does not.
        await runAsync(checkSchema(client.prepareAll(SCHEMA_CHECK), { local: 'protocol' in on && on.protocol === 'file' }))
        const { file } = client.prepareAll({ file: SQL.mainFile })
        // A remote server may not say (or hold) a file: the database is then named by nothing but this connection.
        const path = (await file.get().catch(() => undefined)) ?? ''
        if (path) {
          key = path
          label = path.slice(path.lastIndexOf('/') + 1)
        } else label = 'in memory'
        return path
      })().catch((error: unknown) => {
        checked = undefined
        throw error
      })),
    /**
     * Installs the counting and protocol triggers (as better-sqlite3's connection does) where they are missing, on
     * `target`: a transaction of its own, or the app's. Answers whether it installed them.
     */
    async install(target: Installable): Promise<boolean> {
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

/**
 * Where the engine's transactions run for a Client of the app's. On a local file, a client of the engine's own on the
 * same file: one connection that no one else uses, whose transactions take turns (BEGIN and COMMIT on it, as on
 * better-sqlite3's one connection), and whose data version moves only when another connection commits. On a remote
 * database or one in memory, where no second client can be made, one `transaction()` of the app's client per
 * piece of work, each on a connection of its own, and a data version that moves at every look.
 */
interface Session {
  /** Runs `work` in a write transaction; `wait`: tries its begin again while another connection holds the lock. */
  write<T>(work: Work<'async', T>, wait: boolean): Promise<T>
  /** Runs `work` in a read transaction. */
  read<T>(work: Work<'async', T>): Promise<T>
  /** The executor outside any transaction: each statement on its own. */
  readonly executor: Executor<'async'>
  /** Runs `install` (the triggers') in a write transaction of its own, given the connection to write on. */
  install(install: (target: Installable) => Promise<boolean>): Promise<void>
}

/** A connection that the triggers' install writes on. */
type Installable = LibsqlExecutor & { executeMultiple(sql: string): Promise<void> }

/** Tries `begin` again, shortly, while the database says busy, for up to WRITE_WAIT_MS; once only when not `wait`. */
async function beginning<T>(begin: () => Promise<T>, wait: boolean): Promise<T> {
  const until = Date.now() + WRITE_WAIT_MS
  for (let waitMs = BEGIN_RETRY_FIRST_MS; ; waitMs = Math.min(waitMs * 2, BEGIN_RETRY_MAX_MS)) {
    try {
      return await begin()
    } catch (error) {
      if (!wait || !isBusy(error) || Date.now() >= until) throw error
      await new Promise((resolve) => setTimeout(resolve, waitMs))
    }
  }
}

/**
 * The engine's work on a libsql Client, taking turns: one transaction at a time, and the statements outside any
 * transaction between them. On the engine's own client (`remade`: it makes another), a statement that libsql's local
 * client refused with SQLITE_BUSY (a `BEGIN IMMEDIATE`, or a write outside a transaction, while another connection
 * held the write lock) stays in progress on its connection until the garbage collector frees it: the connection stays
 * inside a read transaction, so every later read there sees the database as it was at the first read after the
 * refusal, its data version stops, every write is refused, and every COMMIT fails ("cannot commit transaction - SQL
 * statements in progress"). So any refusal closes that client, and the next statement makes another; the data version
 * the session answers moves when its connection's does and when the connection is a new one, whose own is not
 * comparable with the last one's. On the app's client (`remade` null), whose transactions may each take another
 * connection of its pool, the data version moves at every look.
 */
function laneSession(first: LibsqlClient, remade: (() => LibsqlClient) | null): Session {
  const lane = new Lane()
  let client = first
  let direct = executorOn(client)
  /** The data version the session answered last. */
  let version = 0
  /** The connection's data version at the last look; undefined on a connection not looked at yet. */
  let seen: number | undefined
  /** Runs `fn` on the client; on the engine's own client, a refusal closes it and makes another. */
  const onClient = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn()
    } catch (error) {
      if (remade && isBusy(error)) {
        client.close()
        client = remade()
        direct = executorOn(client)
        seen = undefined
      }
      throw error
    }
  }
  const dataVersion = async (on: Executor<'async'>) => {
    const now = await on.dataVersion()
    if (now !== seen) {
      version++
      seen = now
    }
    return version
  }
  const inTransaction = <T>(mode: 'write' | 'deferred', wait: boolean, work: (tx: LibsqlTransaction) => Promise<T>) =>
    lane.run(async () => {
      const tx = await beginning(() => onClient(() => client.transaction(mode)), wait)
      return onClient(async () => {
        try {
          const value = await work(tx)
          await tx.commit()
          return value
        } catch (error) {
          if (!tx.closed) await tx.rollback().catch(() => {})
          throw error
        } finally {
          tx.close()
        }
      })
    })
  const running =
    <T>(work: Work<'async', T>) =>
    (tx: LibsqlTransaction) => {
      const executor = executorOn(tx)
      return runAsync(work(remade ? { ...executor, dataVersion: () => dataVersion(executor) } : executor))
    }
  const executor = Object.fromEntries(
    Object.keys(direct).map((name) => [
      name,
      (...args: unknown[]) =>
        lane.run(() => onClient(async () => (direct as unknown as Record<string, (...args: unknown[]) => unknown>)[name]!(...args))),
    ]),
  ) as unknown as Executor<'async'>
  return {
    write: (work, wait) => inTransaction('write', wait, running(work)),
    read: (work) => inTransaction('deferred', false, running(work)),
    executor: {
      ...executor,
      dataVersion: remade ? () => lane.run(() => onClient(() => dataVersion(direct))) : async () => ++version,
    },
    install: (install) => inTransaction('write', true, install).then(() => undefined),
  }
}

/** The SQLite executor on a libsql Client or Transaction. */
function executorOn(on: LibsqlExecutor): Executor<'async'> {
  const client = libsqlClient(on)
  return sqliteExecutor(client, client.prepareAll(SQL))
}

/**
 * The session for a Client of the app's: a client of the engine's own on the same local file, made with the app's
 * package (loaded on first use), or else the app's client itself: for a remote database, one in memory, and an
 * embedded replica (a local file that the app's client syncs with a remote primary, known by the `-info` file libsql
 * keeps beside it), whose writes only the app's client knows to send to the primary.
 */
async function sessionFor(client: LibsqlClient, path: string): Promise<Session> {
  if (client.protocol !== 'file' || !path || existsSync(`${path}-info`)) return laneSession(client, null)
  const { createClient } = (await import('@libsql/client')) as { createClient(config: { url: string; concurrency: number }): LibsqlClient }
  const make = () => createClient({ url: `file:${path}`, concurrency: 1 })
  return laneSession(make(), make)
}

function openClient(client: LibsqlClient): Connection<'async'> {
  const use = firstUse(client)
  let session: Promise<Session> | undefined
  const ready = async (): Promise<Session> => {
    const path = await use.ready()
    return (session ??= sessionFor(client, path).catch((error: unknown) => {
      session = undefined
      throw error
    }))
  }
  /** Installs the triggers once, in a write transaction of the session's. */
  let installing: Promise<void> | undefined
  const prepared = async (): Promise<Session> => {
    const current = await ready()
    await (installing ??= current.install(use.install).then(use.markInstalled, (error: unknown) => {
      installing = undefined
      throw error
    }))
    return current
  }
  // The executor's methods, each run by the session once it is made: the SQLite executor's own, and no other.
  const methods = Object.keys(executorOn(client))
  const direct = Object.fromEntries(
    methods.map((name) => [
      name,
      async (...args: unknown[]) =>
        ((await ready()).executor as unknown as Record<string, (...args: unknown[]) => unknown>)[name]!(...args),
    ]),
  ) as unknown as Executor<'async'>
  return {
    kind: 'async',
    capabilities: { roundTrips: true, oneWriter: true, jsonAsText: true },
    executor: direct,
    get key() {
      return use.key()
    },
    get label() {
      return use.label()
    },
    inTransaction: () => false,
    write: async (work) => (await prepared()).write(work, true),
    join: async (work) => (await prepared()).write(work, true),
    tryWrite: async (work) => (await prepared()).write(work, false),
    read: async (work) => (await ready()).read(work),
    isBusy,
    // Other processes' writes are found by the data version: there is nothing to listen to.
    listen: () => () => {},
    prepareWrites: async () => void (await prepared()),
  }
}

/** The app's transaction: the engine's work takes turns on it, each write in a savepoint of its own. */
function openTransaction(tx: LibsqlTransaction): Connection<'async'> {
  const use = firstUse(tx)
  const executor = executorOn(tx)
  let version = 0
  const lane = new Lane()
  const prepared = async () => {
    await use.ready()
    // Installed in the app's transaction, it may yet roll back with it: each write looks again.
    await use.install(tx)
  }
  const direct = <T>(work: Work<'async', T>) => runAsync(work(executor))
  const write = <T>(work: Work<'async', T>) =>
    lane.run(async () => {
      await prepared()
      return inSavepoint(
        (sql) => tx.execute({ sql, args: [] }),
        () => direct(work),
      )
    })
  return {
    kind: 'async',
    capabilities: { roundTrips: true, oneWriter: true, jsonAsText: true },
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
      lane.run(async () => {
        await prepared()
        return direct(work)
      }),
    tryWrite: write,
    read: (work) =>
      lane.run(async () => {
        await use.ready()
        return direct(work)
      }),
    isBusy,
    listen: () => () => {},
    prepareWrites: prepared,
  }
}
