/** Opening a PostgreSQL database by its URL through node-postgres, for the command-line tool: a pool behind Drizzle. */
import type { Opener, UrlAddress } from '../connection.js'
import { isPgUrl, PG_URL } from '../pg/open.js'

/**
 * A pool on the URL, connecting lazily. `pg` is loaded on first use, so that an app without it runs the tool: throws
 * the import's error when it is not installed, the driver's when it cannot read the URL. @internal
 */
export const nodePostgresOpener: Opener<UrlAddress> = {
  what: PG_URL,
  package: 'pg',
  opens: isPgUrl,
  async open(address, options) {
    const [{ default: pg }, { drizzle }] = await Promise.all([import('pg'), import('drizzle-orm/node-postgres')])
    const pool = new pg.Pool({
      connectionString: address.text,
      max: options.maxConnections,
      connectionTimeoutMillis: options.connectTimeoutMs,
    })
    // An idle client whose server went away emits 'error'; the next query reports it.
    pool.on('error', () => {})
    return {
      db: drizzle({ client: pool }),
      ping: async () => void (await pool.query('select 1')),
      close: () => pool.end(),
    }
  },
}
