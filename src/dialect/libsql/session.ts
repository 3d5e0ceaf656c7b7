/**
 * Where the engine's transactions run for a libsql Client of the app's (dialect/sqlite/driver.ts's SqliteSession). On
 * a local file, a client of the engine's own on the same file: one connection that no one else uses, whose
 * transactions take turns (BEGIN and COMMIT on it, as on better-sqlite3's one connection), and whose data version
 * moves only when another connection commits. On a remote database or one in memory, where no second client can be
 * made, one `transaction()` of the app's client per piece of work, each on a connection of its own, and a data version
 * that moves at every look.
 *
 * libsql's Client waits for no lock: a `BEGIN IMMEDIATE` while another connection holds the write lock is refused at
 * once. A worker's flush is then refused (Connection.tryWrite) and tried again on its own timer, and any other write
 * tries its begin again, shortly, for up to WRITE_WAIT_MS.
 */
import { existsSync } from 'node:fs'
import { Lane, runAsync } from '../program.js'
import type { SqliteSession } from '../sqlite/driver.js'
import { isBusy } from '../sqlite/schema.js'
import { SQL } from '../sqlite/statements.js'
import { libsqlClient, type LibsqlClient, type LibsqlExecutor } from './client.js'

/** How long a write other than a flush tries to begin while another connection holds the write lock. */
const WRITE_WAIT_MS = 5_000
/** How long it waits between two tries: doubling from the first, up to the last. */
const BEGIN_RETRY_FIRST_MS = 1
const BEGIN_RETRY_MAX_MS = 20

/**
 * The session for a Client of the app's: a client of the engine's own on the same local file, made with the app's
 * package (loaded on first use), or else the app's client itself: for a remote database, one in memory, and an
 * embedded replica (a local file that the app's client syncs with a remote primary, known by the `-info` file libsql
 * keeps beside it), whose writes only the app's client knows to send to the primary. @internal
 */
export async function sessionFor(client: LibsqlClient, path: string): Promise<SqliteSession<'async'>> {
  if (client.protocol !== 'file' || !path || existsSync(`${path}-info`)) return laneSession(client, null)
  const { createClient } = (await import('@libsql/client')) as { createClient(config: { url: string; concurrency: number }): LibsqlClient }
  const make = () => createClient({ url: `file:${path}`, concurrency: 1 })
  return laneSession(make(), make)
}

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

const VERSION = { dataVersion: SQL.dataVersion }

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
function laneSession(first: LibsqlClient, remade: (() => LibsqlClient) | null): SqliteSession<'async'> {
  const lane = new Lane()
  let client = first
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
        seen = undefined
      }
      throw error
    }
  }
  const counted = async (on: LibsqlExecutor) => {
    const now = await libsqlClient(on).prepareAll(VERSION).dataVersion.get()
    if (now !== seen) {
      version++
      seen = now
    }
    return version
  }
  const outside: LibsqlExecutor = {
    execute: (statement) => lane.run(() => onClient(() => client.execute(statement))),
    executeMultiple: (sql) => lane.run(() => onClient(() => client.executeMultiple(sql))),
  }
  return {
    client: libsqlClient(outside, remade ? () => lane.run(() => onClient(() => counted(client))) : async () => ++version),
    transaction: (mode, body) =>
      lane.run(async () => {
        const tx = await beginning(() => onClient(() => client.transaction(mode === 'read' ? 'deferred' : 'write')), mode === 'write')
        return onClient(async () => {
          try {
            const value = await runAsync(body(libsqlClient(tx, remade ? () => counted(tx) : undefined)))
            await tx.commit()
            return value
          } catch (error) {
            if (!tx.closed) await tx.rollback().catch(() => {})
            throw error
          } finally {
            tx.close()
          }
        })
      }),
  }
}
