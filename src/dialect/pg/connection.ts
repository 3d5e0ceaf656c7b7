/**
 * The engine's view of one PostgreSQL connection: the driver's client behind
 * a Drizzle database or transaction (each driver a folder of its own:
 * node-postgres/, postgres-js/, pglite/), the transactions its programs run
 * in, and the schema check done once for it.
 */
import { JobsError } from '../../errors.js'
import { BUSY_BACKOFF_FIRST_MS, BUSY_BACKOFF_MAX_MS } from '../../limits.js'
import type { DrizzleHandle, PgDatabase } from '../drizzle.js'
import type { DriverEntry } from '../connection.js'
import { Lane, runAsync, type ChangeKind, type Connection, type ProgressNotices, type Work } from '../index.js'
import type { PgClientDriver, PgDatabaseName, PgDriver, PgPoolDriver, Queryable } from './driver.js'
import { pgExecutor, type PgConnectionState } from './executor.js'
import { COUNT_TRIGGERS, COUNT_TRIGGERS_PRESENT, INSTALL_COUNTERS, INSTALL_LOOK, LOCK_FOR_INSTALL, TRY_LOCK_FOR_INSTALL } from './counts.js'
import { all, one } from './statement.js'
import { MAX_NOTICE_PAYLOAD_BYTES, NOTICE_CHANNEL, PROGRESS_CHANNEL, SQL } from './statements.js'

export type { PgDatabase as AsyncPgDatabase }

/** A PostgreSQL connection: the engine's Connection, with the driver behind it. */
export interface PgConnection extends Connection<'async'> {
  readonly driver: PgDriver
}

const MIGRATE_HINT =
  "add `export * from 'drizzle-jobs/pg/schema'` to your Drizzle schema, then run `drizzle-kit generate` and `drizzle-kit migrate`"

/** One connection per driver client; a client seen behind a transaction is another connection than the same client behind a database. */
const databases = new WeakMap<object, PgConnection>()
const transactions = new WeakMap<object, PgConnection>()

/**
 * The entry that registers a driver of the PostgreSQL dialect (src/dialect/open.ts): the handles whose client it
 * recognises, their connections, and its opener of a URL. @internal
 */
export function pgDriverEntry(clients: PgClientDriver): DriverEntry {
  return {
    dialect: 'pg',
    label: clients.label,
    takes: (handle: DrizzleHandle) => pgConnectionOn(clients, handle) !== null,
    connectionOf(handle: DrizzleHandle) {
      const connection = pgConnectionOn(clients, handle)
      if (!connection) throw new JobsError('INVALID_OPTION', `db: this Drizzle PostgreSQL handle's client is not one of ${clients.label}`)
      return connection
    },
    opener: clients.opener,
  }
}

function isObject(value: unknown): value is object {
  return (typeof value === 'object' || typeof value === 'function') && value !== null
}

/**
 * The connection behind a Drizzle PostgreSQL handle whose client `clients` recognises, made on the first call and
 * kept for that client, so that the driver is made once; null for a client it does not recognise. It does no I/O:
 * the first write or read checks the schema.
 */
function pgConnectionOn(clients: PgClientDriver, handle: DrizzleHandle): PgConnection | null {
  const { inTransaction, client } = handle
  if (handle.dialect !== 'pg' || !isObject(client)) return null
  const connections = inTransaction ? transactions : databases
  const kept = connections.get(client)
  if (kept) return kept
  const driver = clients.driverOf(client, inTransaction)
  if (driver === null) return null
  const connection = open(driver)
  connections.set(client, connection)
  return connection
}

function keyOf(database: PgDatabaseName): string {
  return `postgres://${database.host}:${database.port}/${database.database}`
}

let unnamedTransactions = 0

function open(driver: PgDriver): PgConnection {
  const notices = noticesOf(driver)
  const state: PgConnectionState = { dataVersion: async () => notices.version(), planned: new Set() }
  const executor = pgExecutor(driver, state)
  const named = driver.database
  // A postgres.js transaction does not say which database it is on: until its first use asks the server, its key is its own.
  let key = named ? keyOf(named) : `postgres://transaction/${++unnamedTransactions}`
  let label = named ? named.database : 'PostgreSQL'
  let checked: Promise<void> | undefined
  /** Checks the schema on the first use, and again after a check that failed (the tables may have been migrated since). */
  const ready = (): Promise<void> =>
    (checked ??= checkSchema(driver).then(
      (server) => {
        if (!named) {
          key = keyOf(server)
          label = server.database
        }
      },
      (error: unknown) => {
        checked = undefined
        throw error
      },
    ))
  const run = <T>(q: Queryable, work: Work<'async', T>): Promise<T> => runAsync(work(pgExecutor(q, state)))
  const counters = new CounterInstall(driver)

  let write: <T>(work: Work<'async', T>) => Promise<T>
  let join: <T>(work: Work<'async', T>) => Promise<T>
  let read: <T>(work: Work<'async', T>) => Promise<T>
  if (driver.inTransaction) {
    // One client, one transaction: this connection's work takes turns on it, or their savepoints would cross.
    const lane = new Lane()
    const direct = <T>(work: Work<'async', T>) =>
      lane.run(() =>
        notAborted(async () => {
          await ready()
          return run(driver, work)
        }),
      )
    write = (work) =>
      lane.run(() =>
        notAborted(async () => {
          await ready()
          await counters.ensure()
          return driver.savepoint((q) => run(q, work))
        }),
      )
    join = (work) =>
      lane.run(() =>
        notAborted(async () => {
          await ready()
          await counters.ensure()
          return run(driver, work)
        }),
      )
    read = direct
  } else {
    write = async (work) => {
      await ready()
      await counters.ensure()
      return driver.transaction((q) => run(q, work), { bounded: true })
    }
    join = write
    read = async (work) => {
      await ready()
      return driver.transaction((q) => run(q, work), { readOnly: true })
    }
  }

  return {
    kind: 'async',
    capabilities: { roundTrips: true, oneWriter: false, jsonAsText: false },
    driver,
    executor,
    get key() {
      return key
    },
    get label() {
      return label
    },
    inTransaction: () => driver.inTransaction,
    write,
    join,
    /**
     * A write of its own: PostgreSQL has no one write lock that writers queue for, as SQLite's, so there is nothing to
     * refuse at once; a claim of a limited queue waits on its queue's row, for as long as another claim holds it.
     */
    tryWrite: write,
    read,
    isBusy: isPgBusy,
    listen: (onChange) => notices.listen(onChange),
    prepareWrites: async () => {
      await ready()
      await counters.ensure()
    },
    // A transaction's client cannot listen, and its notices would wait for the app's commit.
    progressNotices: driver.inTransaction ? null : progressNoticesOf(driver, notices),
  }
}

/**
 * The triggers that count every write to jobs_job (counts.ts), installed before a connection's first write
 * (write, join, prepareWrites); readers never install them. Where they were missing the install recounts
 * every queue, so counts are right even if jobs were written before. The triggers' names carry their
 * version, so a later version installs its own.
 *
 * An install looks for the triggers first, with no lock. Where they are missing it asks for jobs_job's lock and
 * looks again, as another may have installed them meanwhile: if so, it rolls back, which lets the lock go at once,
 * where a savepoint released inside the app's transaction would keep it until that transaction ends, holding up
 * every write of jobs. Once it holds the lock it waits for nothing (INSTALL_COUNTERS), so that no transaction that
 * waits for the lock is ever waited for by the install.
 *
 * A connection of its own (a pool) installs in a transaction of its own, waiting for the lock (LOCK_FOR_INSTALL)
 * while it holds nothing else; an install refused a further lock (lock_not_available) is tried again after a
 * backoff. Once one committed, or the triggers were found, it looks no more.
 *
 * A connection inside the app's transaction installs in a savepoint of it, and takes the lock only where it is free
 * at once (TRY_LOCK_FOR_INSTALL): waiting for it there, the app's transaction would wait, holding its own rows, for
 * every transaction that writes jobs, and one of those may wait for those rows in turn (a deadlock that fails the
 * app's transaction). Refused, the write goes on without installing: an installer under way (a worker's start, say)
 * holds the lock until it commits, and the write waits for that, holding nothing the installer waits for; where
 * none is under way, the next install's recount counts what the write added. An install made in the savepoint keeps
 * the lock until the app's transaction ends, and may yet roll back with it: until the connection finds the triggers
 * that it did not install itself (so committed by another), each of its writes looks again, and a rolled-back
 * install is made again.
 */
class CounterInstall {
  private committed = false
  private installedHere = false
  private pending: Promise<void> | undefined

  constructor(private readonly driver: PgDriver) {}

  ensure(): Promise<void> | undefined {
    if (this.committed) return undefined
    const driver = this.driver
    if (driver.inTransaction) {
      return driver
        .savepoint((q) => this.install(q, TRY_LOCK_FOR_INSTALL))
        .then(
          (installed) => {
            if (!installed) this.found()
          },
          (error: unknown) => {
            if (error instanceof FoundInstalled) return this.found()
            // Refused: the write goes on, and the next one looks again.
            if (!(error instanceof LockRefused) && sqlStateOf(error) !== LOCK_NOT_AVAILABLE) throw error
          },
        )
    }
    return (this.pending ??= this.installOnItsOwn(driver).then(
      () => void (this.committed = true),
      (error: unknown) => {
        this.pending = undefined
        throw error
      },
    ))
  }

  /** Installs in a transaction of its own, again after a backoff while a lock the install needs is held by another transaction. */
  private async installOnItsOwn(driver: PgPoolDriver): Promise<void> {
    for (let waitMs = BUSY_BACKOFF_FIRST_MS; ; waitMs = Math.min(waitMs * 2, BUSY_BACKOFF_MAX_MS)) {
      try {
        await driver.transaction((q) => this.install(q, LOCK_FOR_INSTALL))
        return
      } catch (error) {
        if (error instanceof FoundInstalled) return
        if (sqlStateOf(error) !== LOCK_NOT_AVAILABLE) throw error
      }
      await new Promise((resolve) => setTimeout(resolve, waitMs))
    }
  }

  /**
   * Installs the triggers where they are missing, asking for jobs_job's lock with `lock`; answers whether it did.
   * Throws, so that its savepoint or transaction rolls back and the lock goes: FoundInstalled when another
   * installed them meanwhile, LockRefused when `lock` did not get the lock.
   */
  private async install(q: Queryable, lock: typeof LOCK_FOR_INSTALL): Promise<boolean> {
    if ((await one(q, COUNT_TRIGGERS_PRESENT, {})).present === COUNT_TRIGGERS.length) return false
    await all(q, lock, {})
    const look = await one(q, INSTALL_LOOK, {})
    if (look.present === COUNT_TRIGGERS.length) throw new FoundInstalled()
    if (!look.locked) throw new LockRefused()
    await all(q, INSTALL_COUNTERS, {})
    this.installedHere = true
    return true
  }

  /** The triggers were found in place: committed by another, unless this connection's savepoint installed them. */
  private found(): void {
    this.committed = !this.installedHere
  }
}

/** Rolls back an install that found, once it asked for jobs_job's lock, the triggers installed by another meanwhile. */
class FoundInstalled extends Error {}

/** Rolls back an install inside the app's transaction that did not get jobs_job's lock at once: it installs nothing. */
class LockRefused extends Error {}

/** lock_not_available: a lock asked for with NOWAIT is held by another transaction. */
const LOCK_NOT_AVAILABLE = '55P03'

/**
 * Progress by NOTIFY (src/progress/notices.ts): values on a channel of their own, which only processes that
 * watch others' runs listen to; asks on the channel of changes, which workers listen to already.
 */
function progressNoticesOf(driver: PgPoolDriver, notices: ReturnType<typeof noticesOf>): ProgressNotices {
  return {
    maxPayloadBytes: MAX_NOTICE_PAYLOAD_BYTES,
    async send(values, asks) {
      const list = [
        ...values.map((payload) => ({ channel: PROGRESS_CHANNEL, payload })),
        ...asks.map((ask) => ({ channel: NOTICE_CHANNEL, payload: `${ASK_KIND}:${ask}` })),
      ]
      if (list.length > 0) await all(driver, SQL.notifyMany, { notices: JSON.stringify(list) })
    },
    listen: (onValue, onListening, onLost) => driver.listen(PROGRESS_CHANNEL, onValue, onListening, onLost),
    onAsk: (onAsk) => notices.onAsk(onAsk),
  }
}

/** The kind of a notice on the channel of changes that asks the owner of a run for its progress. */
const ASK_KIND = 'progress'

/**
 * A connection's notices: while anyone listens, one LISTEN on the channel (on a client of its own, kept for
 * it), whose notices are handed to every listener; and the data version pollers read, which moves with each
 * notice while the LISTEN is in place, and at every look otherwise (no listener, a pooler in transaction
 * mode, or a listening connection lost and being made anew), so that pollers then look for work themselves;
 * and once a second even while listening, for rows written with no notice. A LISTEN made anew after a loss
 * moves it once more: what was told meanwhile is found by that look.
 */
function noticesOf(driver: PgDriver) {
  const listeners = new Set<(queue: string, kind: ChangeKind) => void>()
  const askListeners = new Set<(payload: string) => void>()
  let stop: (() => void) | null = null
  let listeningNow = false
  let version = 0
  const onNotice = (payload: string) => {
    const at = payload.indexOf(':')
    const kind = payload.slice(0, at)
    // An ask for a run's progress changes no row: pollers need not look.
    if (kind === ASK_KIND) {
      for (const onAsk of askListeners) onAsk(payload.slice(at + 1))
      return
    }
    version++
    if (at < 0 || !CHANGE_KINDS.has(kind)) return
    for (const listener of listeners) listener(payload.slice(at + 1), kind as ChangeKind)
  }
  // While listening, the version also moves once a second: rows that a program writes without a notice are found then.
  let slowLookAt = 0
  return {
    version: () => {
      const now = Date.now()
      if (!listeningNow || now - slowLookAt >= UNNOTIFIED_LOOK_MS) {
        slowLookAt = now
        return ++version
      }
      return version
    },
    listen(onChange: (queue: string, kind: ChangeKind) => void): () => void {
      listeners.add(onChange)
      if (!stop && !driver.inTransaction) {
        stop = driver.listen(
          NOTICE_CHANNEL,
          onNotice,
          () => {
            listeningNow = true
            version++
          },
          () => (listeningNow = false),
        )
      }
      return () => {
        if (!listeners.delete(onChange) || listeners.size > 0 || !stop) return
        stop()
        stop = null
        listeningNow = false
      }
    },
    /** Calls `onAsk` with the asks for progress heard while anyone listens. */
    onAsk(onAsk: (payload: string) => void): () => void {
      askListeners.add(onAsk)
      return () => void askListeners.delete(onAsk)
    },
  }
}

/** How often pollers look, while listening, for what was written with no notice (plain SQL of another program, say). */
const UNNOTIFIED_LOOK_MS = 1_000

const CHANGE_KINDS: ReadonlySet<string> = new Set<ChangeKind>(['added', 'claimed', 'ended', 'revoked', 'other'])

/**
 * Checks that the tables exist as the newest migration left them (jobs_count among them, and jobs_lease with its
 * `host`: a database migrated to an earlier version is told to migrate); answers the database the server says the
 * connection is on.
 */
async function checkSchema(q: Queryable): Promise<PgDatabaseName> {
  const { missing, latest, ...server } = await one(q, SQL.schemaCheck, {})
  // Jobs need every table but jobs_schedule, which only schedules need (they say so themselves); when the
  // check fails, its message names every table that is missing, jobs_schedule among them.
  if (missing?.split(', ').some((table) => table !== 'jobs_schedule')) {
    throw new JobsError('SCHEMA_MISSING', `table ${missing} ${missing.includes(',') ? 'are' : 'is'} missing: ${MIGRATE_HINT}`)
  }
  if (!latest) {
    throw new JobsError(
      'SCHEMA_MISSING',
      "the jobs_* tables are an older version's (jobs_job has no debounce_key column): run `drizzle-kit generate` and `drizzle-kit migrate`",
    )
  }
  return server
}

/**
 * Runs work on the app's transaction, telling the app when that transaction was aborted before the call: PostgreSQL
 * then refuses every statement (in_failed_sql_transaction, 25P02) until the app rolls back. The call wrote
 * nothing, and the app's transaction is as it was: INVALID_OPTION, since the transaction passed cannot take it.
 */
async function notAborted<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    if (sqlStateOf(error) !== '25P02') throw error
    throw new JobsError(
      'INVALID_OPTION',
      'tx: the transaction is aborted (a statement in it failed before this call, and PostgreSQL ignores every statement until it rolls back): nothing was written; roll the transaction back, then try again',
      { cause: error },
    )
  }
}

/** The SQLSTATE of a driver's error, looking through the causes that wrap it (Drizzle's DrizzleQueryError, say). */
function sqlStateOf(error: unknown): string | undefined {
  let cause = error
  for (let depth = 0; depth < 8 && typeof cause === 'object' && cause !== null; depth++) {
    const code: unknown = Reflect.get(cause, 'code')
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code
    cause = Reflect.get(cause, 'cause')
  }
  return undefined
}

/**
 * SQLSTATEs that mean "try again later": serialization_failure, deadlock_detected, lock_not_available,
 * query_canceled, admin_shutdown, crash_shutdown, cannot_connect_now, and
 * idle_in_transaction_session_timeout (the server ended a write transaction of the engine's whose process
 * stalled: driver.ts). Every connection_exception (class 08) is too.
 *
 * query_canceled is a statement_timeout that passed (or a cancel request): most often a wait for a lock held
 * by another transaction (a limited queue's row, under a claim or the app's own transaction), the same wait
 * that lock_timeout ends with lock_not_available. The engine's transaction rolled back whole, so it is tried
 * again as any busy work is; a statement that is always slower than the timeout is then tried again without
 * end, which the docs say (docs/postgres.md).
 */
const BUSY_SQLSTATES = new Set(['25P03', '40001', '40P01', '55P03', '57014', '57P01', '57P02', '57P03'])
/** Lost or refused connections, as Node and postgres.js name them. */
const BUSY_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'CONNECTION_CLOSED', 'CONNECT_TIMEOUT'])
/** node-postgres's own errors for a lost connection and a pool that found none free in time carry no code. */
const BUSY_MESSAGES =
  /^(Connection terminated unexpectedly|timeout exceeded when trying to connect|Client has encountered a connection error and is not queryable)$/

/**
 * Whether an error means that the work may succeed if tried again later: a conflict with another transaction, or
 * a lost connection. Looks through the causes that wrap it (Drizzle's DrizzleQueryError, say). @internal
 */
export function isPgBusy(error: unknown): boolean {
  let cause = error
  for (let depth = 0; depth < 8 && typeof cause === 'object' && cause !== null; depth++) {
    const code: unknown = Reflect.get(cause, 'code')
    if (typeof code === 'string' && (BUSY_SQLSTATES.has(code) || BUSY_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code))) return true
    const message: unknown = Reflect.get(cause, 'message')
    if (typeof message === 'string' && BUSY_MESSAGES.test(message)) return true
    cause = Reflect.get(cause, 'cause')
  }
  return false
}
