/**
 * Taking SQLite's write lock for a transaction of the engine's own, with
 * short waits of our own in place of SQLite's busy handler.
 *
 * better-sqlite3's `timeout` option is sqlite3_busy_timeout: while another
 * connection holds the write lock, SQLite sleeps 1, 2, 5, 10, 15, 20, 25 …
 * ms between tries. A worker's flush holds the lock for a few hundred µs to
 * a few ms, so a writer that met it slept on while the lock was free, and
 * several worker processes on one file drained slower than one. Here the
 * lock is asked for with the busy timeout at 0, and after each refusal the
 * thread waits a short, growing while (WRITE_LOCK_FIRST_WAIT_US, doubling up
 * to WRITE_LOCK_MAX_WAIT_US) and asks again, until the connection's own busy
 * timeout is spent: the caller sees the same SQLITE_BUSY after the same
 * timeout as before. The wait blocks the thread, as SQLite's sleep did.
 */
import type Database from 'better-sqlite3'

/** The first wait after the lock was refused, µs (the kernel's timer makes it about 0.1 ms at least). */
const WRITE_LOCK_FIRST_WAIT_US = 20
/** The longest wait between two tries, µs: about a tenth of a busy flush's hold. */
const WRITE_LOCK_MAX_WAIT_US = 200

/** What `Atomics.wait` waits on: nothing ever notifies it, so each wait lasts its whole timeout. */
const pause = new Int32Array(new SharedArrayBuffer(4))

/**
 * Answers a function that begins an immediate transaction on `client`, waiting for the write lock as
 * this module says for up to the connection's busy timeout, read at each call (the app may change it).
 * A busy timeout of 0 asks once, as SQLite would. Throws SQLite's SQLITE_BUSY once the timeout is spent,
 * and any other error of `begin immediate` at once. The busy timeout is the app's again when it returns.
 * @internal
 */
export function writeLockTaker(client: Database.Database): () => void {
  const begin = client.prepare('begin immediate')
  const readTimeout = client.prepare('pragma busy_timeout').pluck()
  const noWait = client.prepare('pragma busy_timeout = 0')
  // The statement that gives the app's timeout back, made again only when the app changes it.
  let restore = { timeoutMs: -1, statement: noWait }
  const restoreTimeout = (timeoutMs: number) => {
    if (restore.timeoutMs !== timeoutMs) restore = { timeoutMs, statement: client.prepare(`pragma busy_timeout = ${timeoutMs}`) }
    restore.statement.run()
  }
  return function beginImmediate(): void {
    const timeoutMs = readTimeout.get() as number
    if (timeoutMs <= 0) {
      begin.run()
      return
    }
    noWait.run()
    try {
      const deadline = performance.now() + timeoutMs
      for (let waitUs = WRITE_LOCK_FIRST_WAIT_US; ; waitUs = Math.min(2 * waitUs, WRITE_LOCK_MAX_WAIT_US)) {
        try {
          begin.run()
          return
        } catch (error) {
          const leftMs = deadline - performance.now()
          if (!isBusyError(error) || leftMs <= 0) throw error
          Atomics.wait(pause, 0, 0, Math.min(waitUs / 1000, leftMs))
        }
      }
    } finally {
      restoreTimeout(timeoutMs)
    }
  }
}

/** Whether `begin immediate` was refused because another connection holds the lock (or is recovering the WAL). */
function isBusyError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY')
}
