/**
 * Work that is tried again while the database says busy or the connection
 * was lost (a PostgreSQL backend ended by pg_terminate_backend, a server
 * restarting): a run's step reads and writes, and lease renewals. Such an
 * error is the database's, not the handler's, so it never reaches the
 * handler nor `onError` while a try may yet succeed.
 */
import type { Connection } from '../dialect/index.js'
import { BUSY_BACKOFF_FIRST_MS, BUSY_BACKOFF_MAX_MS } from '../limits.js'

/**
 * Runs `work`, and again after a backoff (doubling from BUSY_BACKOFF_FIRST_MS up to BUSY_BACKOFF_MAX_MS) each
 * time it throws an error `connection.isBusy` accepts, until it answers. Before each new try it calls
 * `giveUp`, which throws (the run's abort reason, say) or answers true to stop: the last busy error is then
 * thrown. Any other error is thrown at once.
 * @internal
 */
export async function retryWhileBusy<T>(connection: Connection, work: () => T | Promise<T>, giveUp: () => boolean): Promise<T> {
  for (let waitMs = BUSY_BACKOFF_FIRST_MS; ; waitMs = Math.min(waitMs * 2, BUSY_BACKOFF_MAX_MS)) {
    try {
      return await work()
    } catch (error) {
      if (!connection.isBusy(error)) throw error
      await new Promise((resolve) => setTimeout(resolve, waitMs))
      if (giveUp()) throw error
    }
  }
}
