/** Opening a PostgreSQL database by its URL, for the commands that name one: a node-postgres pool behind Drizzle. */
import type { AsyncPgDatabase } from './connection.js'

/** A pool of at most `max` connections on `url`, as a Drizzle database, with a first connection made (`ping`) and its close. */
export interface OpenedPg {
  db: AsyncPgDatabase
  /** Makes a connection and runs one statement: throws the driver's error when the server refuses it. */
  ping(): Promise<void>
  close(): Promise<void>
}

/**
 * Opens a node-postgres pool on `url`, connecting lazily; throws the import's error when the `pg` package is
 * missing, the driver's when it cannot read the URL. @internal
 */
export async function openPgUrl(url: string, options: { max: number; connectTimeoutMs: number }): Promise<OpenedPg> {
  const [{ default: pg }, { drizzle }] = await Promise.all([import('pg'), import('drizzle-orm/node-postgres')])
  const pool = new pg.Pool({ connectionString: url, max: options.max, connectionTimeoutMillis: options.connectTimeoutMs })
  // An idle client whose server went away emits 'error'; the next query reports it.
  pool.on('error', () => {})
  return {
    db: drizzle(pool),
    ping: async () => void (await pool.query('select 1')),
    close: () => pool.end(),
  }
}
