/**
 * libsql (`@libsql/client`, `drizzle-orm/libsql`) as a SQLite driver, on a local `file:` database or a remote one: its
 * Client and Transaction known behind a Drizzle handle by their shape, and the SQLite connection
 * (dialect/sqlite/connection.ts) on each. Its calls answer promises, as on PostgreSQL; its statements are the SQLite
 * dialect's (client.ts).
 *
 * On the app's Client the engine's transactions run on a session (session.ts): on a local file a client of the
 * engine's own, whose data version moves only when another connection commits, as better-sqlite3's does; progress
 * crosses processes through the same local channel as better-sqlite3's, keyed by the file. On a remote database, in
 * memory, or on an embedded replica, the app's client, looking for other processes' commits at every poll.
 */
import { hasFunctions } from '../drizzle.js'
import { Lane } from '../program.js'
import { sqliteDriverEntry } from '../sqlite/connection.js'
import type { SqliteDriver, SqliteSession } from '../sqlite/driver.js'
import { libsqlClient, type LibsqlClient, type LibsqlTransaction } from './client.js'
import { libsqlOpener } from './open.js'
import { sessionFor } from './session.js'

/** The libsql driver of the SQLite dialect, as src/dialect/open.ts registers it. @internal */
export const libsql = sqliteDriverEntry({
  label: 'libsql (@libsql/client)',
  takes: (client, inTransaction) => (inTransaction ? isLibsqlTransaction(client) : isLibsqlClient(client)),
  driverOf: (client) => (isLibsqlClient(client) ? onClient(client) : onTransaction(client as LibsqlTransaction)),
  opener: libsqlOpener,
})

function isLibsqlClient(client: unknown): client is LibsqlClient {
  return hasFunctions(client, 'execute', 'batch', 'transaction', 'executeMultiple') && typeof Reflect.get(client, 'protocol') === 'string'
}

function isLibsqlTransaction(client: unknown): client is LibsqlTransaction {
  return hasFunctions(client, 'execute', 'batch', 'commit', 'rollback', 'close') && !hasFunctions(client, 'transaction')
}

/** A Client of the app's: the engine's transactions run on the session made for its file on the first use. */
function onClient(client: LibsqlClient): SqliteDriver<'async'> {
  let session: Promise<SqliteSession<'async'>> | undefined
  return {
    kind: 'async',
    roundTrips: true,
    label: 'libsql',
    // Only a Client says whether its database is on this machine (protocol 'file'): the app's transaction does not.
    local: client.protocol === 'file',
    readOnly: false,
    client: libsqlClient(client),
    inTransaction: () => false,
    // Its session's work takes turns on its own.
    turn: (call) => call(),
    session: (file) =>
      (session ??= sessionFor(client, file).catch((error: unknown) => {
        session = undefined
        throw error
      })),
  }
}

/** The app's transaction: the engine's work takes turns on it, each write in a savepoint of its own. */
function onTransaction(tx: LibsqlTransaction): SqliteDriver<'async'> {
  const lane = new Lane()
  let version = 0
  return {
    kind: 'async',
    roundTrips: true,
    label: 'libsql',
    local: false,
    readOnly: false,
    client: libsqlClient(tx, async () => ++version),
    inTransaction: () => true,
    turn: (call) => lane.run(async () => call()),
    session: null,
  }
}
