/**
 * A database of its own for a PostgreSQL bench script: created on DATABASE_URL's server (default
 * postgres://postgres@127.0.0.1:5432/postgres), migrated with drizzle-kit's migrations as a user would, and
 * dropped at the end, whatever ends the run.
 */
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres'
import { migrate } from 'drizzle-orm/node-postgres/migrator'
import pg from 'pg'
import { createDatabase, databaseUrl, dropDatabase, LOCAL_SERVER } from '../pg/lib.js'
import { PG_MIGRATIONS } from '../../test/helpers/pg-database.js'

export const PG_SERVER = process.env.DATABASE_URL ?? LOCAL_SERVER

/** Runs `run` on a fresh migrated database whose pool holds at most `max` connections; drops it after. */
export async function withPgDatabase<T>(max: number, run: (pool: pg.Pool, db: NodePgDatabase) => Promise<T>): Promise<T> {
  const name = await createDatabase(PG_SERVER, 'script')
  const pool = new pg.Pool({ connectionString: databaseUrl(PG_SERVER, name), max })
  // The drop at the end ends what is still connected.
  pool.on('error', () => {})
  const db = drizzle(pool)
  try {
    await migrate(db, { migrationsFolder: PG_MIGRATIONS })
    return await run(pool, db)
  } finally {
    await pool.end()
    await dropDatabase(PG_SERVER, name)
  }
}
