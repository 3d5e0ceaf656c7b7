/**
 * The engine's view of one SQLite connection, whatever its driver (driver.ts): the schema check and the name read
 * on its first use, the transactions its programs run in (its own, or the app's under way, in savepoints), and the
 * triggers' install before its first write (triggers.ts). Every step is a program that the driver's client runs, at
 * once or awaiting each answer, so one text serves the synchronous drivers and the asynchronous ones.
 */
import { basename } from 'node:path'
import { JobsError } from '../../errors.js'
import type { DriverEntry } from '../connection.js'
import type { DrizzleHandle } from '../drizzle.js'
import { andThen, ask, type Answer, type Connection, type Executor, type Kind, type Program, type Result, type Work } from '../index.js'
import { savepoint } from '../savepoint.js'
import type { SqliteClientDriver, SqliteConnectionClient, SqliteDriver, SqliteSession, TransactionMode } from './driver.js'
import { sqliteExecutor } from './executor.js'
import { checkSchema, isBusy, MIGRATE_HINT, SCHEMA_CHECK } from './schema.js'
import { SQL } from './statements.js'
import { dropTriggers, obsoleteTriggers, TriggerInstall } from './triggers.js'

/**
 * The entry that registers a SQLite driver (src/dialect/open.ts): the handles whose client it recognises, and their
 * connections, one per client, kept once made. A client seen behind a database and behind its transaction is one
 * connection where it is one object (better-sqlite3's): whether the app's transaction is under way is asked at each call.
 * @internal
 */
export function sqliteDriverEntry(clients: SqliteClientDriver): DriverEntry {
  const connections = new WeakMap<object, Connection>()
  return {
    dialect: 'sqlite',
    label: clients.label,
    takes: (handle: DrizzleHandle) => handle.dialect === 'sqlite' && clients.takes(handle.client, handle.inTransaction),
    connectionOf({ client }: DrizzleHandle) {
      if (typeof client !== 'object' || client === null)
        throw new JobsError('INVALID_OPTION', `db: this Drizzle handle has no ${clients.label} client`)
      let connection = connections.get(client)
      if (!connection) {
        connection = sqliteConnection(clients.driverOf(client))
        connections.set(client, connection)
      }
      return connection
    },
    opener: clients.opener,
  }
}

let unnamed = 0

/** What a connection's first use made: where its own transactions run (none in the app's transaction), and its executor. */
interface Opened<K extends Kind> {
  readonly session: SqliteSession<K> | null
  readonly executor: Executor<K>
}

/**
 * The connection on a driver. A synchronous one is checked and prepared as it is made, so that the API's synchronous
 * calls throw SCHEMA_MISSING where they are called; an asynchronous one on its first call, and again after a first
 * use that failed (the tables may have been migrated since).
 */
export function sqliteConnection<K extends Kind>(driver: SqliteDriver<K>): Connection<K> {
  const { client } = driver
  const run = <T>(program: Program<T>) => client.run(program) as Answer<T>
  const triggers = new TriggerInstall(driver.readOnly, () => driver.inTransaction())

  const executors = new WeakMap<SqliteConnectionClient<K>, Executor<K>>()
  /** The executor on a client, its statements prepared once: a driver that makes a client per transaction (libsql) prepares them for each. */
  const executorOf = (on: SqliteConnectionClient<K>): Executor<K> => {
    let executor = executors.get(on)
    if (!executor) {
      const made = sqliteExecutor(on, on.prepareAll(SQL))
      executor = on.dataVersion ? { ...made, dataVersion: on.dataVersion } : made
      executors.set(on, executor)
    }
    return executor
  }

  let key = `sqlite://unnamed/${++unnamed}`
  let label = driver.label
  let opened: Opened<K> | undefined
  let opening: Answer<Opened<K>> | undefined
  const ready = (): Answer<Opened<K>> =>
    opened ??
    (opening ??= andThen(
      run(open()),
      (made) => (opened = made),
      (error: unknown) => {
        opening = undefined
        throw error
      },
    ))

  /** Checks the schema, names the database by its file, makes the session, drops the obsolete triggers and prepares. */
  function* open(): Program<Opened<K>> {
    const check = client.prepareAll(SCHEMA_CHECK)
    yield* checkSchema(check, { local: driver.local })
    let file = ''
    try {
      file = (yield* ask(check.mainFile.get())) ?? ''
    } catch {
      // A remote server may not say (or hold) a file: the database is then named by nothing but this connection.
    }
    if (file) key = file
    label = file ? basename(file) : 'in memory'
    const session = driver.session === null ? null : yield* ask(driver.session(file))
    if (!driver.readOnly) {
      const obsolete = yield* obsoleteTriggers(client)
      if (obsolete.length > 0) yield* inTransactionOf(session, 'write', true, dropTriggers(obsolete))
    }
    try {
      return { session, executor: executorOf(session?.client ?? client) }
    } catch (error) {
      throw new JobsError(
        'SCHEMA_MISSING',
        `the jobs_* tables are not those this version of drizzle-jobs expects (${(error as Error).message}): ${MIGRATE_HINT}`,
        { cause: error },
      )
    }
  }

  /** The session that the engine's work begins a transaction of its own on; null where it joins the app's transaction under way. */
  const ownSession = (session: SqliteSession<K> | null) => (session === null || driver.inTransaction() ? null : session)

  /**
   * Runs `body` in a transaction of the engine's own that begins as `mode` says; in the app's transaction under way, in
   * a savepoint of it where `inSavepoint`, else in it as it is.
   */
  function* inTransactionOf<T>(
    session: SqliteSession<K> | null,
    mode: TransactionMode,
    inSavepoint: boolean,
    body: (on: SqliteConnectionClient<K>) => Program<T>,
  ): Program<T> {
    const own = ownSession(session)
    if (own !== null) return yield* ask(own.transaction(mode, body) as Answer<T>)
    return yield* inSavepoint ? savepoint((sql) => client.exec(sql), body(client)) : body(client)
  }

  /** Installs the triggers where they are missing, under the write lock as a write takes it. */
  function* prepared(session: SqliteSession<K> | null): Program<void> {
    yield* triggers.ensure(ownSession(session)?.client ?? client, (install) => inTransactionOf(session, 'write', true, install))
  }

  /** Runs a call's steps, taking its turn where the driver's calls take turns. */
  const call = <T>(steps: () => Program<T>) => driver.turn(() => run(steps())) as Result<K, T>
  const running =
    <T>(work: Work<K, T>) =>
    (on: SqliteConnectionClient<K>) =>
      work(executorOf(on))
  const writing = <T>(work: Work<K, T>, mode: TransactionMode, inSavepoint: boolean) =>
    call(function* () {
      const { session } = yield* ask(ready())
      yield* prepared(session)
      return yield* inTransactionOf(session, mode, inSavepoint, running(work))
    })

  let deferred: Executor<K> | undefined
  /** The executor's methods, each called once the first use is done: for a caller that takes the executor before it. */
  const deferredExecutor = (): Executor<K> =>
    Object.fromEntries(
      Object.entries(executorOf(client)).map(([name, value]) => [
        name,
        // What the executor states of itself (its capabilities) as it is; each request once the first use is done.
        typeof value !== 'function'
          ? value
          : (...args: unknown[]) =>
              andThen(ready(), ({ executor }) => (executor as unknown as Record<string, (...args: unknown[]) => unknown>)[name]!(...args)),
      ]),
    ) as unknown as Executor<K>

  if (driver.kind === 'sync') ready()
  return {
    kind: driver.kind,
    capabilities: { roundTrips: driver.roundTrips, oneWriter: true, jsonAsText: true },
    get executor() {
      return opened?.executor ?? (deferred ??= deferredExecutor())
    },
    get key() {
      return key
    },
    get label() {
      return label
    },
    inTransaction: () => driver.inTransaction(),
    write: (work) => writing(work, 'write', true),
    join: (work) => writing(work, 'write', false),
    tryWrite: (work) => writing(work, 'now', true),
    read: (work) =>
      call(function* () {
        const { session } = yield* ask(ready())
        return yield* inTransactionOf(session, 'read', false, running(work))
      }),
    isBusy,
    // Other connections' writes are found by the data version: there is nothing to listen to.
    listen: () => () => {},
    // Progress goes between processes through a local channel (src/progress/channel.ts).
    progressNotices: null,
    prepareWrites: () =>
      call(function* () {
        yield* prepared((yield* ask(ready())).session)
      }),
  }
}
