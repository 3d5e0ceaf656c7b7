/** Opening a PostgreSQL database by its URL through postgres.js, for the command-line tool: a pool behind Drizzle. */
import type { Opener, UrlAddress } from '../connection.js'
import { isPgUrl, PG_URL } from '../pg/open.js'

/**
 * A pool on the URL, connecting lazily. `postgres` is loaded on first use, so that an app without it runs the tool:
 * throws the import's error when it is not installed, the driver's when it cannot read the URL. @internal
 */
export const postgresJsOpener: Opener<UrlAddress> = {
  what: PG_URL,
  package: 'postgres',
  opens: isPgUrl,
  async open(address, options) {
    const [{ default: postgres }, { drizzle }] = await Promise.all([import('postgres'), import('drizzle-orm/postgres-js')])
    const sql = postgres(address.text, {
      max: options.maxConnections,
      connect_timeout: Math.ceil(options.connectTimeoutMs / 1_000),
      onnotice: () => {},
    })
    return {
      db: drizzle({ client: sql }),
      ping: async () => void (await sql.unsafe('select 1')),
      close: () => sql.end({ timeout: 5 }),
    }
  },
}
