/**
 * postgres.js (`postgres`, 3.4 and 4) as a driver of the PostgreSQL dialect:
 * its Sql and the TransactionSql behind a transaction, recognised by their
 * shape (the package is never imported here).
 */
import { postgresJsOpener } from './open.js'
import { hasFunctions } from '../drizzle.js'
import {
  READ_BEGIN,
  WRITE_BEGIN,
  WRITE_IDLE_LIMIT_MS,
  type PgClientDriver,
  type PgPoolDriver,
  type PgTransactionDriver,
  type PgValue,
  type Queryable,
} from '../pg/driver.js'

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

/** WRITE_IDLE_LIMIT as postgres.js sends it: a statement with no parameter, which it sends in one piece. */
const POSTGRES_JS_WRITE_LIMIT = `select set_config('idle_in_transaction_session_timeout', '${WRITE_IDLE_LIMIT_MS}', true)`

/** The postgres.js clients. @internal */
export const postgresJs: PgClientDriver = {
  label: 'postgres.js (postgres)',
  opener: postgresJsOpener,
  driverOf(client, inTransaction) {
    if (inTransaction) return isPostgresJsTransaction(client) ? postgresJsTransaction(client) : null
    return isPostgresJsPool(client) ? postgresJsPool(client) : null
  },
}

/** A postgres.js Sql of its own: it listens, and holds no savepoint (a 4.x TransactionSql also has `begin`). */
function isPostgresJsPool(client: unknown): client is PostgresJsPool {
  return typeof client === 'function' && hasFunctions(client, 'unsafe', 'begin', 'listen') && !hasFunctions(client, 'savepoint')
}

function isPostgresJsTransaction(client: unknown): client is PostgresJsTransaction {
  return typeof client === 'function' && hasFunctions(client, 'unsafe', 'savepoint')
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
