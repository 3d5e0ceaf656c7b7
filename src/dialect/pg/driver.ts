/**
 * The two PostgreSQL drivers behind Drizzle, node-postgres (`pg`) and
 * postgres.js (`postgres`), seen through one small interface, so that the
 * statements, the executor and the connection never know which one runs
 * them. Neither package is imported: each client is recognised by its shape,
 * and either may be absent.
 *
 * Values go to the server as text, numbers, booleans or null only, each cast
 * in the statement's SQL; rows come back as plain objects.
 */

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

/** What the engine needs of a postgres.js Sql, or of the TransactionSql behind a transaction. */
interface PostgresJsSql {
  unsafe(text: string, values: unknown[], options: { prepare: boolean }): PromiseLike<Record<string, unknown>[]>
}

interface PostgresJsPool extends PostgresJsSql {
  begin<T>(options: string, fn: (tx: PostgresJsSql) => Promise<T>): Promise<T>
  listen(channel: string, onNotify: (payload: string) => void, onListen?: () => void): Promise<{ unlisten(): Promise<void> }>
  readonly options?: { host?: unknown; port?: unknown; database?: unknown; user?: unknown }
}

interface PostgresJsTransaction extends PostgresJsSql {
  savepoint<T>(fn: (tx: PostgresJsSql) => Promise<T>): Promise<T>
}

const WRITE_BEGIN = 'begin isolation level read committed'
const READ_BEGIN = 'begin isolation level repeatable read read only'

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
const WRITE_IDLE_LIMIT = `set local idle_in_transaction_session_timeout = ${WRITE_IDLE_LIMIT_MS}`

/** WRITE_IDLE_LIMIT as postgres.js sends it: a statement with no parameter, which it sends in one piece. */
const POSTGRES_JS_WRITE_LIMIT = `select set_config('idle_in_transaction_session_timeout', '${WRITE_IDLE_LIMIT_MS}', true)`

/**
 * The driver for a client behind a Drizzle handle: its database's `$client` (a pg Pool or Client, a
 * postgres.js Sql), or its transaction's client (a pg PoolClient or Client, a postgres.js TransactionSql).
 * Answers null for a client of any other driver.
 */
export function pgDriverOf(client: unknown, inTransaction: boolean): PgDriver | null {
  if (inTransaction) {
    if (isNodePgClient(client)) return nodePgTransaction(client)
    if (isPostgresJsTransaction(client)) return postgresJsTransaction(client)
    return null
  }
  if (isNodePgPool(client)) return nodePgPool(client)
  if (isNodePgClient(client)) return nodePgClient(client)
  if (isPostgresJsPool(client)) return postgresJsPool(client)
  return null
}

function hasFunctions(value: unknown, ...names: string[]): value is object {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false
  return names.every((name) => typeof Reflect.get(value, name) === 'function')
}

function isNodePgPool(client: unknown): client is NodePgPool {
  return hasFunctions(client, 'query', 'connect', 'on') && typeof Reflect.get(client, 'totalCount') === 'number'
}

function isNodePgClient(client: unknown): client is NodePgClient {
  return hasFunctions(client, 'query', 'connect', 'on', 'removeListener') && typeof Reflect.get(client, 'connectionParameters') === 'object'
}

/** A postgres.js Sql of its own: it listens, and holds no savepoint (a 4.x TransactionSql also has `begin`). */
function isPostgresJsPool(client: unknown): client is PostgresJsPool {
  return typeof client === 'function' && hasFunctions(client, 'unsafe', 'begin', 'listen') && !hasFunctions(client, 'savepoint')
}

function isPostgresJsTransaction(client: unknown): client is PostgresJsTransaction {
  return typeof client === 'function' && hasFunctions(client, 'unsafe', 'savepoint')
}

/** Runs work one piece after another: for a client that one transaction holds, where interleaved savepoints would cross. */
export class Lane {
  private tail: Promise<unknown> = Promise.resolve()

  run<T>(fn: () => Promise<T>): Promise<T> {
    const turn = this.tail.then(fn, fn)
    this.tail = turn.then(
      () => undefined,
      () => undefined,
    )
    return turn
  }
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

function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
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

let savepoints = 0

function nodePgTransaction(client: NodePgClient): PgTransactionDriver {
  const queryable = nodePgQueryable(client)
  return {
    inTransaction: true,
    database: nodePgDatabaseName({ host: client.host, port: client.port, database: client.database, user: client.user }),
    query: queryable.query,
    async savepoint(fn) {
      const name = `drizzle_jobs_${++savepoints}`
      await client.query(`savepoint ${name}`)
      try {
        const value = await fn(queryable)
        await client.query(`release savepoint ${name}`)
        return value
      } catch (error) {
        // A rollback that fails leaves the transaction aborted: the caller's error says why it failed first.
        await client
          .query(`rollback to savepoint ${name}`)
          .then(() => client.query(`release savepoint ${name}`))
          .catch(() => {})
        throw error
      }
    },
  }
}

/** Runs statements on postgres.js as prepared statements, which it keeps per connection. */
function postgresJsQueryable(sql: PostgresJsSql): Queryable {
  return {
    async query(statement, values) {
      return await sql.unsafe(statement.text, [...values], { prepare: true })
    },
  }
}

/**
 * Runs statements on postgres.js each sent in one piece, their values written into the text as literals. postgres.js
 * sends a statement with parameters that it has not yet prepared on a connection in two parts: it asks the server to
 * describe it, and sends the rest on a later turn of the event loop, once the answer is read. Between the two the
 * server waits in the middle of a statement, which neither idle_in_transaction_session_timeout nor statement_timeout
 * ends, so a process that stalled there would hold its transaction's locks until it woke. A statement with no
 * parameters goes in one piece. Strings are written as UTF-8 bytes in hex, so no value can change the statement's
 * text; the statements cast every value, as they do their parameters.
 */
function postgresJsWholeQueryable(sql: PostgresJsSql): Queryable {
  return {
    async query(statement, values) {
      const text =
        values.length === 0 ? statement.text : statement.text.replace(/\$(\d+)/g, (_, n: string) => literal(values[Number(n) - 1]!))
      return await sql.unsafe(text, [], { prepare: false })
    },
  }
}

/** A value as a SQL literal that its statement casts: null, a boolean, a finite number, or text given as its UTF-8 bytes. */
function literal(value: PgValue): string {
  if (value === null) return 'null'
  if (typeof value === 'boolean') return value ? 'true' : 'false'
  if (typeof value === 'number' && Number.isFinite(value)) return `(${String(value)})`
  return `convert_from(decode('${Buffer.from(String(value), 'utf8').toString('hex')}', 'hex'), 'UTF8')`
}

function postgresJsPool(sql: PostgresJsPool): PgPoolDriver {
  const options = sql.options ?? {}
  const first = (value: unknown) => (Array.isArray(value) ? value[0] : value)
  return {
    inTransaction: false,
    database: {
      host: String(first(options.host) ?? 'localhost'),
      port: Number(first(options.port) ?? 5432),
      // postgres.js 4 leaves `database` null when the user is a function; either may be one.
      database: [options.database, options.user].find((name): name is string => typeof name === 'string') ?? '',
    },
    query: postgresJsQueryable(sql).query,
    transaction: (fn, options) =>
      postgresJsBegin(sql, (options?.readOnly ? READ_BEGIN : WRITE_BEGIN).slice('begin '.length), fn, options?.bounded === true),
    listen(channel, onNotice, onListening) {
      // postgres.js keeps a connection for its listeners, makes it anew when lost, and calls onListening each time.
      let stopped = false
      let unlisten: (() => Promise<void>) | undefined
      sql.listen(channel, onNotice, onListening).then(
        (listening) => {
          unlisten = () => listening.unlisten()
          if (stopped) void unlisten().catch(() => {})
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

/**
 * A transaction on postgres.js that writes nothing on its connection once the connection is lost.
 *
 * postgres.js 3.4 crashes the process (an uncaught TypeError from a setImmediate: porsager/postgres#1208)
 * when a statement is written on a connection after it closed, which pg_terminate_backend or a server restart
 * does under a running transaction. `begin` answers as soon as its connection closes, but then goes on with
 * its callback: its next statement, then the ROLLBACK after a throw or the COMMIT after a return, each written
 * on the closed connection. So here, once the connection is lost, statements are refused without being
 * written, and the callback never ends, so that `begin` writes nothing more; the transaction, rolled back by
 * the server when the connection went, answers the loss.
 */
function postgresJsBegin<T>(sql: PostgresJsPool, mode: string, fn: (tx: Queryable) => Promise<T>, bounded: boolean): Promise<T> {
  let lost = false
  let markLost = (): void => {}
  const closed = new Promise<void>((resolve) => (markLost = () => ((lost = true), resolve())))
  const begun = sql.begin(mode, async (tx) => {
    // Sent ahead of the first statement, in the same round trip (postgres.js pipelines a connection's statements);
    // should it fail, the transaction is aborted, and its first statement says so.
    if (bounded) tx.unsafe(POSTGRES_JS_WRITE_LIMIT, [], { prepare: false }).then(undefined, () => {})
    const queryable = bounded ? postgresJsWholeQueryable(tx) : postgresJsQueryable(tx)
    const guarded: Queryable = {
      query: (statement, values) => (lost ? Promise.reject(connectionLost()) : queryable.query(statement, values)),
    }
    try {
      const result = await fn(guarded)
      if (lost) return await NEVER
      return result
    } catch (error) {
      // A statement's error may come a moment before `begin` hears that its connection closed.
      if (lost || (isConnectionLoss(error) && (await closedWithin(closed, CLOSE_WAIT_MS)))) return await NEVER
      throw error
    }
  })
  // `begin` settles early only when its connection closes; settled otherwise, it has written all it will.
  begun.then(markLost, markLost)
  return begun
}

/** Never settles: the end of a transaction callback whose connection was lost. */
const NEVER = new Promise<never>(() => {})

/** How long a statement's connection error waits for its connection to be seen closed. */
const CLOSE_WAIT_MS = 2_000

async function closedWithin(closed: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(resolve, ms, false)))
  try {
    return await Promise.race([closed.then(() => true), late])
  } finally {
    clearTimeout(timer)
  }
}

/** The error of a statement refused because its transaction's connection was lost: postgres.js's own code for it. */
function connectionLost(): Error {
  return Object.assign(new Error('the connection of this transaction was lost'), { code: 'CONNECTION_CLOSED' })
}

/** Whether postgres.js or the server said that the connection is gone or going: lost, reset, or its backend ended. */
function isConnectionLoss(error: unknown): boolean {
  const code: unknown = typeof error === 'object' && error !== null ? Reflect.get(error, 'code') : undefined
  return typeof code === 'string' && (LOSS_CODES.has(code) || code.startsWith('08'))
}

const LOSS_CODES = new Set([
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'ECONNRESET',
  'EPIPE',
  '25P03',
  '57P01',
  '57P02',
  '57P03',
])

function postgresJsTransaction(sql: PostgresJsTransaction): PgTransactionDriver {
  return {
    inTransaction: true,
    database: null,
    query: postgresJsQueryable(sql).query,
    savepoint: (fn) => sql.savepoint((tx) => fn(postgresJsQueryable(tx))),
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

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error))
}
