/**
 * better-sqlite3 as a SQLite driver (dialect/sqlite/driver.ts): one connection, whose statements are prepared once
 * and answer at once, and whose transactions begin and end on it.
 */
import type Database from 'better-sqlite3'
import { runSync } from '../program.js'
import {
  oneConnectionTransaction,
  type SqliteConnectionClient,
  type SqliteDriver,
  type SqliteSession,
  type TransactionMode,
} from '../sqlite/driver.js'
import type { PreparedStatements, StatementTable } from '../sqlite/statement.js'

/** The SQLite driver on a better-sqlite3 database, whether the app's transaction is under way on it or not. @internal */
export function betterSqlite3Driver(client: Database.Database): SqliteDriver<'sync'> {
  const statements: SqliteConnectionClient<'sync'> = {
    prepareAll: (table) => prepareAll(client, table),
    run: runSync,
    exec: (sql) => void client.exec(sql),
  }
  const begin = { write: client.prepare('begin immediate'), read: client.prepare('begin deferred') }
  const commit = client.prepare('commit')
  const rollback = client.prepare('rollback')
  const ends = {
    begin: (mode: TransactionMode) => (mode === 'now' ? beginAtOnce(client, begin.write) : begin[mode].run()),
    commit: () => commit.run(),
    rollback: () => rollback.run(),
    inTransaction: () => client.inTransaction,
  }
  const session: SqliteSession<'sync'> = {
    client: statements,
    transaction: (mode, body) => runSync(oneConnectionTransaction(ends, mode, body(statements))),
  }
  return {
    kind: 'sync',
    roundTrips: false,
    label: 'SQLite',
    local: true,
    readOnly: client.readonly,
    client: statements,
    inTransaction: () => client.inTransaction,
    // Its calls answer at once: none can begin while another is under way.
    turn: (call) => call(),
    session: () => session,
  }
}

/**
 * Takes the write lock now, or throws SQLITE_BUSY: SQLite's busy handler would sleep 1, 2, 5, 10 … ms between
 * tries, blocking the process, while another worker's flush holds the lock for a ms or so. The busy timeout is the
 * connection's, shared with the app's own transactions: it is set to 0 for the begin alone and set back before
 * anything else runs. `pragma()` prepares its statement anew at each call, which is what makes it act: a
 * prepared busy_timeout pragma takes effect when it is prepared, not when it runs.
 */
function beginAtOnce(client: Database.Database, begin: Database.Statement): void {
  const timeoutMs = client.pragma('busy_timeout', { simple: true }) as number
  if (timeoutMs === 0) return void begin.run()
  client.pragma('busy_timeout = 0')
  try {
    begin.run()
  } finally {
    client.pragma(`busy_timeout = ${timeoutMs}`)
  }
}

/** Prepares every statement of `statements` on a better-sqlite3 connection, once. */
function prepareAll<D extends StatementTable>(client: Database.Database, statements: D): PreparedStatements<'sync', D> {
  const prepared: Record<string, Database.Statement> = {}
  for (const [name, { sql, pluck }] of Object.entries(statements)) {
    const made = client.prepare(sql)
    prepared[name] = pluck ? made.pluck() : made
  }
  // The one place a better-sqlite3 statement takes the types declared with its SQL.
  return prepared as unknown as PreparedStatements<'sync', D>
}
