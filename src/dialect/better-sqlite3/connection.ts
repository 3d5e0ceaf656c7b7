/**
 * The engine's view of one SQLite connection: the better-sqlite3 handle
 * behind a Drizzle database or transaction, its prepared statements, and the
 * schema checks done once for it.
 */
import { basename, resolve } from 'node:path'
import type Database from 'better-sqlite3'
import { JobsError } from '../../errors.js'
import { drizzleHandleOf, type DrizzleHandle, type SyncDatabase } from '../drizzle.js'
import type { DriverEntry } from '../connection.js'
import { betterSqlite3Opener } from './open.js'
import { runSync, type Connection, type Work } from '../index.js'
import { sqliteExecutor } from '../sqlite/executor.js'
import {
  COUNTER_TRIGGERS,
  OBSOLETE_TRIGGERS,
  RECOUNT_QUEUES,
  SQL,
  TRIGGER_COUNT,
  TRIGGER_PRESENT,
  type Statements,
} from '../sqlite/statements.js'
import { checkSchema, isBusy, MIGRATE_HINT, SCHEMA_CHECK } from '../sqlite/schema.js'
import { betterSqlite3Client, prepareAll } from './client.js'

export type { SyncDatabase }

/** A SQLite connection: the engine's Connection, with the better-sqlite3 handle behind it. */
export interface SqliteConnection extends Connection<'sync'> {
  readonly client: Database.Database
}

const connections = new WeakMap<Database.Database, SqliteConnection>()
let anonymousDatabases = 0

/** The SQLite dialect's driver, better-sqlite3, as src/dialect/open.ts registers it. @internal */
export const betterSqlite3: DriverEntry = {
  dialect: 'sqlite',
  label: 'better-sqlite3',
  takes: (handle: DrizzleHandle) => handle.dialect === 'sqlite' && isBetterSqlite3(handle.client),
  connectionOf: (handle: DrizzleHandle) => connectionOfClient(handle.client as Database.Database),
  opener: betterSqlite3Opener,
}

/** The connection behind a Drizzle SQLite handle on better-sqlite3, checked and prepared on first use. */
export function connectionOf(db: unknown): SqliteConnection {
  const handle = drizzleHandleOf(db)
  if (handle === null || !betterSqlite3.takes(handle)) {
    throw new JobsError('INVALID_OPTION', 'db: expected a Drizzle SQLite database or transaction on better-sqlite3')
  }
  return connectionOfClient(handle.client as Database.Database)
}

function connectionOfClient(client: Database.Database): SqliteConnection {
  let connection = connections.get(client)
  if (!connection) {
    runSync(checkSchema(prepareAll(client, SCHEMA_CHECK), { local: true }))
    connection = open(client)
    connections.set(client, connection)
  }
  return connection
}

/** Whether a driver's client is a better-sqlite3 database, the synchronous driver the engine runs on. */
function isBetterSqlite3(client: unknown): client is Database.Database {
  if (typeof client !== 'object' || client === null) return false
  const { prepare, pragma, transaction } = client as Partial<Database.Database>
  return typeof prepare === 'function' && typeof pragma === 'function' && typeof transaction === 'function'
}

function open(client: Database.Database): SqliteConnection {
  let sql: Statements<'sync'>
  try {
    dropObsoleteTriggers(client)
    sql = prepareAll(client, SQL)
  } catch (error) {
    throw new JobsError(
      'SCHEMA_MISSING',
      `the jobs_* tables are not those this version of drizzle-jobs expects (${(error as Error).message}): ${MIGRATE_HINT}`,
      { cause: error },
    )
  }
  const transaction = client.transaction((work: () => unknown) => work())
  const file = client.memory || !client.name ? `memory:${++anonymousDatabases}` : resolve(client.name)
  const begin = client.prepare('begin immediate')
  const commit = client.prepare('commit')
  const rollback = client.prepare('rollback')
  const inTransaction = () => client.inTransaction
  const triggers = new TriggerInstall(client)
  const executor = sqliteExecutor(betterSqlite3Client(client), sql)
  /**
   * Takes the write lock now, or throws SQLITE_BUSY: SQLite's busy handler would sleep 1, 2, 5, 10 … ms between
   * tries, blocking the process, while another worker's flush holds the lock for a ms or so. The busy timeout is the
   * connection's, shared with the app's own transactions: it is set to 0 for the begin alone and set back before
   * anything else runs. `pragma()` prepares its statement anew at each call, which is what makes it act: a
   * prepared busy_timeout pragma takes effect when it is prepared, not when it runs.
   */
  function beginAtOnce(): void {
    const timeoutMs = client.pragma('busy_timeout', { simple: true }) as number
    if (timeoutMs === 0) return void begin.run()
    client.pragma('busy_timeout = 0')
    try {
      begin.run()
    } finally {
      client.pragma(`busy_timeout = ${timeoutMs}`)
    }
  }
  return {
    kind: 'sync',
    capabilities: { roundTrips: false, oneWriter: true, jsonAsText: true },
    client,
    executor,
    key: file,
    label: client.memory || !client.name ? 'in memory' : basename(client.name),
    inTransaction,
    write<T>(work: Work<'sync', T>) {
      triggers.ensure()
      return transaction.immediate(() => runSync(work(executor))) as T
    },
    join<T>(work: Work<'sync', T>) {
      triggers.ensure()
      return runSync(work(executor))
    },
    tryWrite<T>(work: Work<'sync', T>) {
      triggers.ensure()
      beginAtOnce()
      try {
        const value = runSync(work(executor))
        commit.run()
        return value
      } catch (error) {
        if (client.inTransaction) rollback.run()
        throw error
      }
    },
    read: <T>(work: Work<'sync', T>) =>
      client.inTransaction ? runSync(work(executor)) : (transaction.deferred(() => runSync(work(executor))) as T),
    isBusy,
    // Other connections' writes are found by data_version: there is nothing to listen to.
    listen: () => () => {},
    prepareWrites: () => triggers.ensure(),
  }
}

/**
 * The triggers that keep the queue counters right for other writers and fail the rows that break the
 * table protocol (statements.ts), installed before a connection's first write (Connection.write, join,
 * tryWrite); readers never install them. Where they were missing the install recounts, so counts are
 * right even if jobs were written before. The install is idempotent and versioned: each trigger's name
 * carries its version, and the install drops the older ones. A read-only connection installs nothing.
 *
 * Once the triggers are known to be committed, a connection looks no more. An install made inside the
 * app's transaction may yet roll back with it, so until one is seen outside such a transaction (a
 * worker's start, say), each writer looks again, and a rolled-back install is made again.
 */
class TriggerInstall {
  private committed = false
  private installedHere = false
  private readonly present

  constructor(private readonly client: Database.Database) {
    this.present = prepareAll(client, { triggersPresent: SQL.triggersPresent }).triggersPresent
  }

  ensure(): void {
    if (this.committed || this.client.readonly) return
    if (this.present.get() !== TRIGGER_COUNT) {
      this.client
        .transaction(() => {
          this.client.exec(COUNTER_TRIGGERS)
          this.client.exec(RECOUNT_QUEUES)
        })
        .immediate()
      this.installedHere = true
    }
    // Present and not of our own making, or seen outside any transaction: committed.
    this.committed = !this.installedHere || !this.client.inTransaction
  }
}

/**
 * Drops the triggers of earlier versions (OBSOLETE_TRIGGERS) where they are present, before the engine's statements
 * are prepared; a read-only connection leaves them.
 */
function dropObsoleteTriggers(client: Database.Database): void {
  if (client.readonly) return
  const { present } = prepareAll(client, { present: TRIGGER_PRESENT })
  for (const name of OBSOLETE_TRIGGERS) if (present.get(name) !== undefined) client.exec(`drop trigger if exists ${name}`)
}
