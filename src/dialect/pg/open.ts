/**
 * Opening a PostgreSQL database by its URL, for the commands that name one: a pool behind Drizzle, on the
 * driver the app has installed: node-postgres (`pg`) where it is, else postgres.js (`postgres`).
 */
import type { AsyncPgDatabase } from './connection.js'

/** A pool of at most `max` connections on `url`, as a Drizzle database, with a first connection made (`ping`) and its close. */
export interface OpenedPg {
  db: AsyncPgDatabase
  /** Makes a connection and runs one statement: throws the driver's error when the server refuses it. */
  ping(): Promise<void>
  close(): Promise<void>
}

/**
 * Opens a pool on `url`, connecting lazily, through node-postgres, or postgres.js where node-postgres is not
 * installed: each is loaded here, on first use, so that an app on SQLite runs the commands without either.
 * Throws the import's error (ERR_MODULE_NOT_FOUND) when neither package is installed, the driver's when it
 * cannot read the URL. @internal
 */
export async function openPgUrl(url: string, options: { max: number; connectTimeoutMs: number }): Promise<OpenedPg> {
  try {
    return await openNodePostgres(url, options)
  } catch (error) {
    if (!isModuleMissing(error)) throw error
    try {
      return await openPostgresJs(url, options)
    } catch (other) {
      // Neither driver: the app's message names node-postgres, the one this prefers.
      throw isModuleMissing(other) ? error : other
    }
  }
}

async function openNodePostgres(url: string, options: { max: number; connectTimeoutMs: number }): Promise<OpenedPg> {
  const [{ default: pg }, { drizzle }] = await Promise.all([import('pg'), import('drizzle-orm/node-postgres')])
  const pool = new pg.Pool({ connectionString: url, max: options.max, connectionTimeoutMillis: options.connectTimeoutMs })
  // An idle client whose server went away emits 'error'; the next query reports it.
  pool.on('error', () => {})
  return {
    db: drizzle({ client: pool }),
    ping: async () => void (await pool.query('select 1')),
    close: () => pool.end(),
  }
}

async function openPostgresJs(url: string, options: { max: number; connectTimeoutMs: number }): Promise<OpenedPg> {
  const [{ default: postgres }, { drizzle }] = await Promise.all([import('postgres'), import('drizzle-orm/postgres-js')])
  const sql = postgres(url, { max: options.max, connect_timeout: Math.ceil(options.connectTimeoutMs / 1_000), onnotice: () => {} })
  return {
    db: drizzle({ client: sql }),
    ping: async () => void (await sql.unsafe('select 1')),
    close: () => sql.end({ timeout: 5 }),
  }
}

/** Whether an import failed because the package is not installed. @internal */
export function isModuleMissing(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND'
}
