/**
 * node-postgres (`pg`) as a driver of the PostgreSQL dialect: a Pool, a Client
 * of the app's own, and the client behind a transaction, recognised by their
 * shape (the package is never imported here).
 */
import { nodePostgresOpener } from './open.js'
import { Lane } from '../program.js'
import { inSavepoint } from '../savepoint.js'
import { hasFunctions } from '../drizzle.js'
import {
  asError,
  quoteIdentifier,
  READ_BEGIN,
  WRITE_BEGIN,
  WRITE_IDLE_LIMIT,
  type PgClientDriver,
  type PgDatabaseName,
  type PgPoolDriver,
  type PgTransactionDriver,
  type Queryable,
  type TransactionOptions,
} from '../pg/driver.js'

/** What the engine needs of node-postgres's Client, PoolClient and Pool. */
interface NodePgQueryable {
  query(config: { name?: string; text: string; values?: unknown[] }): Promise<{ rows: Record<string, unknown>[] }>
}

interface NodePgClient extends NodePgQueryable {
  query(text: string): Promise<unknown>
  query(config: { name?: string; text: string; values?: unknown[] }): Promise<{ rows: Record<string, unknown>[] }>
  on(event: 'error', listener: (error: Error) => void): unknown
  on(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown
  removeListener(event: 'error', listener: (error: Error) => void): unknown
  removeListener(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown
  readonly host?: unknown
  readonly port?: unknown
  readonly database?: unknown
  readonly user?: unknown
}

interface NodePgPoolClient extends NodePgClient {
  release(error?: Error | boolean): void
}

interface NodePgPool extends NodePgQueryable {
  connect(callback: (error: Error | undefined, client: NodePgPoolClient | undefined) => void): void
  on(event: 'error', listener: (error: Error) => void): unknown
  readonly totalCount: number
  readonly options?: Record<string, unknown>
}

/** The node-postgres clients. @internal */
export const nodePostgres: PgClientDriver = {
  label: 'node-postgres (pg)',
  opener: nodePostgresOpener,
  driverOf(client, inTransaction) {
    if (inTransaction) return isNodePgClient(client) ? nodePgTransaction(client) : null
    if (isNodePgPool(client)) return nodePgPool(client)
    if (isNodePgClient(client)) return nodePgClient(client)
    return null
  },
}

function isNodePgPool(client: unknown): client is NodePgPool {
  return hasFunctions(client, 'query', 'connect', 'on') && typeof Reflect.get(client, 'totalCount') === 'number'
}

function isNodePgClient(client: unknown): client is NodePgClient {
  return hasFunctions(client, 'query', 'connect', 'on', 'removeListener') && typeof Reflect.get(client, 'connectionParameters') === 'object'
}

/** Runs statements on a node-postgres client or pool as named prepared statements: each connection prepares each once. */
function nodePgQueryable(client: NodePgQueryable): Queryable {
  return {
    async query(statement, values) {
      const result = await client.query({ name: statement.name, text: statement.text, values: [...values] })
      return result.rows
    },
  }
}

/** The pools whose idle clients' errors the engine listens to. */
const listenedPools = new WeakSet<object>()

/**
 * An idle client of a pool whose backend ended (pg_terminate_backend, a restart) emits 'error', which the pool
 * passes on as its own 'error' once it has let the client go: with no listener on the pool, that would crash
 * the process. The engine hands the clients it used back to the pool, so it listens on the pool, once: the
 * pool has already let the client go, and the next piece of work takes another (the app's own listeners
 * still hear each error).
 */
function listenForIdleErrors(pool: NodePgPool): void {
  if (listenedPools.has(pool)) return
  listenedPools.add(pool)
  pool.on('error', () => {})
}

function nodePgPool(pool: NodePgPool): PgPoolDriver {
  listenForIdleErrors(pool)
  const { query } = nodePgQueryable(pool)
  return {
    inTransaction: false,
    database: nodePgDatabaseName(pool.options ?? {}),
    query,
    async transaction(fn, options) {
      // A backend ended under a checked-out client (pg_terminate_backend, a restart) emits 'error': without a
      // listener the process would crash. The error is passed to release, which destroys the client.
      let broken: Error | undefined
      const onError = (error: Error) => (broken ??= error)
      const client = await checkOut(pool, onError)
      let releaseWith: Error | undefined
      try {
        return await inTransaction(client, fn, options, (error) => (releaseWith = error))
      } finally {
        client.removeListener('error', onError)
        client.release(broken ?? releaseWith)
      }
    },
    listen: (channel, onNotice, onListening, onLost) => listenOnPool(pool, channel, onNotice, onListening, onLost),
  }
}

/**
 * Checks a client out of `pool` with `onError` listening on it from the moment the pool hands it over. The
 * pool hands a client over inside its own event handlers (the release of another, say), and the client may
 * emit 'error' before a promise's continuation could add the listener: a backend ended just after its last
 * answer sends its FATAL in the same packet, read in the same tick.
 */
function checkOut(pool: NodePgPool, onError: (error: Error) => void): Promise<NodePgPoolClient> {
  return new Promise((resolve, reject) => {
    pool.connect((error, client) => {
      if (error || !client) return reject(error ?? new Error('the pool handed over no client'))
      client.on('error', onError)
      resolve(client)
    })
  })
}

/** How long a lost listening connection waits before it is made anew: doubling from the first, up to the last. */
const RELISTEN_FIRST_MS = 100
const RELISTEN_MAX_MS = 5_000

/**
 * LISTEN on a client checked out of the pool and kept: it leaves the pool's count for as long as the
 * listening lasts. A lost client (a restart, pg_terminate_backend) is destroyed, and another one listens
 * after a backoff.
 */
function listenOnPool(
  pool: NodePgPool,
  channel: string,
  onNotice: (payload: string) => void,
  onListening: () => void,
  onLost: () => void,
): () => void {
  let stopped = false
  /** The client that listens, or is being made to, with the 'error' listener that checkOut put on it. */
  let client: NodePgPoolClient | undefined
  let clientLost: ((error: Error) => void) | undefined
  let waitMs = RELISTEN_FIRST_MS
  const onNotification = (message: { channel: string; payload?: string }) => {
    if (message.channel === channel && message.payload !== undefined) onNotice(message.payload)
  }
  /** Listens anew after the backoff: the listening client was lost, or none could be made. */
  const retry = () => {
    onLost()
    if (!stopped) setTimeout(connect, waitMs).unref()
    waitMs = Math.min(waitMs * 2, RELISTEN_MAX_MS)
  }
  const connect = () => {
    if (stopped) return
    // A client lost while its LISTEN is under way says so twice (its 'error' event, and the LISTEN failing):
    // it is let go, and listened for anew, once. Once it is no longer the listening client (stopped), its errors are dropped.
    let made: NodePgPoolClient | undefined
    const lost = (error: Error) => {
      if (!made || client !== made) return
      client = undefined
      made.removeListener('notification', onNotification)
      made.removeListener('error', lost)
      made.release(error)
      retry()
    }
    checkOut(pool, lost).then(async (checkedOut) => {
      made = checkedOut
      client = made
      clientLost = lost
      made.on('notification', onNotification)
      try {
        await made.query(`listen ${quoteIdentifier(channel)}`)
      } catch (error) {
        return lost(asError(error))
      }
      if (stopped) return stop()
      waitMs = RELISTEN_FIRST_MS
      onListening()
    }, retry)
  }
  const stop = () => {
    stopped = true
    const made = client
    const lost = clientLost
    client = undefined
    clientLost = undefined
    if (!made) return
    made.removeListener('notification', onNotification)
    // Its 'error' listener stays until the UNLISTEN settles (an error meanwhile must not crash the process), and
    // goes with the client back to the pool: every listening would otherwise leave one on a pooled client.
    const release = (error?: Error) => {
      if (lost) made.removeListener('error', lost)
      made.release(error)
    }
    made.query(`unlisten ${quoteIdentifier(channel)}`).then(
      () => release(),
      (error: unknown) => release(asError(error)),
    )
  }
  connect()
  return stop
}

/**
 * BEGIN, `fn`, COMMIT on one node-postgres client; ROLLBACK when `fn` or COMMIT throws. `unusable` is told
 * of an error after which the client cannot be trusted: a BEGIN or a ROLLBACK that failed. A `bounded` write
 * transaction's session ends after WRITE_IDLE_LIMIT_MS idle (set in BEGIN's round trip): only on a pool's client,
 * which the pool replaces, never on the app's own Client (nodePgClient passes no options but `readOnly`).
 */
async function inTransaction<T>(
  client: NodePgClient,
  fn: (q: Queryable) => Promise<T>,
  options: TransactionOptions | undefined,
  unusable: (error: Error) => void,
): Promise<T> {
  try {
    await client.query(options?.readOnly ? READ_BEGIN : options?.bounded ? `${WRITE_BEGIN}; ${WRITE_IDLE_LIMIT}` : WRITE_BEGIN)
  } catch (error) {
    unusable(asError(error))
    throw error
  }
  try {
    const value = await fn(nodePgQueryable(client))
    await client.query('commit')
    return value
  } catch (error) {
    try {
      await client.query('rollback')
    } catch (rollbackError) {
      unusable(asError(rollbackError))
    }
    throw error
  }
}

/** One node-postgres Client of its own (not a pool): its transactions, and the statements run outside them, take turns. */
function nodePgClient(client: NodePgClient): PgPoolDriver {
  const lane = new Lane()
  const { query } = nodePgQueryable(client)
  return {
    inTransaction: false,
    database: nodePgDatabaseName({ host: client.host, port: client.port, database: client.database, user: client.user }),
    query: (statement, values) => lane.run(() => query(statement, values)),
    transaction: (fn, options) => lane.run(() => inTransaction(client, fn, { readOnly: options?.readOnly }, () => {})),
    listen(channel, onNotice, onListening) {
      // The app's own client: it listens beside the statements it runs.
      const onNotification = (message: { channel: string; payload?: string }) => {
        if (message.channel === channel && message.payload !== undefined) onNotice(message.payload)
      }
      client.on('notification', onNotification)
      void lane.run(() => client.query(`listen ${quoteIdentifier(channel)}`)).then(onListening, () => {})
      return () => {
        client.removeListener('notification', onNotification)
        void lane.run(() => client.query(`unlisten ${quoteIdentifier(channel)}`)).catch(() => {})
      }
    },
  }
}

function nodePgTransaction(client: NodePgClient): PgTransactionDriver {
  const queryable = nodePgQueryable(client)
  return {
    inTransaction: true,
    database: nodePgDatabaseName({ host: client.host, port: client.port, database: client.database, user: client.user }),
    query: queryable.query,
    savepoint: (fn) =>
      inSavepoint(
        (sql) => client.query(sql),
        () => fn(queryable),
      ),
  }
}

/**
 * The database that node-postgres connects to for these options, resolved as it resolves them: a connection
 * string's parts first, then the options, then the PG* environment variables, then its defaults.
 */
function nodePgDatabaseName(options: Record<string, unknown>): PgDatabaseName {
  const url = typeof options.connectionString === 'string' ? parseConnectionString(options.connectionString) : {}
  const setting = (key: 'host' | 'port' | 'database' | 'user'): string | undefined => {
    const value = url[key] ?? options[key]
    if (value !== undefined && value !== null && value !== '') return String(value)
    return process.env[`PG${key.toUpperCase()}`] || undefined
  }
  const user = setting('user') ?? process.env.USER ?? ''
  return { host: setting('host') ?? 'localhost', port: Number(setting('port') ?? 5432), database: setting('database') ?? user }
}

function parseConnectionString(text: string): Partial<Record<'host' | 'port' | 'database' | 'user', string>> {
  try {
    const url = new URL(text)
    const parts: Partial<Record<'host' | 'port' | 'database' | 'user', string>> = {}
    const host = url.searchParams.get('host') ?? decodeURIComponent(url.hostname)
    if (host) parts.host = host
    if (url.port) parts.port = url.port
    const database = decodeURIComponent(url.pathname.slice(1))
    if (database) parts.database = database
    if (url.username) parts.user = decodeURIComponent(url.username)
    return parts
  } catch {
    return {}
  }
}
