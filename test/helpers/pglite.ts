/**
 * PGlite databases for the tests: one instance per test file migrated with the migrations drizzle-kit generated
 * (as an app on PGlite applies them, through drizzle-orm/pglite's migrator), and a clone of it per test, so that
 * each test starts from a fresh migrated database in the same process, with no server.
 */
import { PGlite } from '@electric-sql/pglite'
import { drizzle, type PgliteDatabase } from 'drizzle-orm/pglite'
import { migrate } from 'drizzle-orm/pglite/migrator'
import * as schema from '../../src/schema/pg.js'
import { PG_MIGRATIONS } from './pg-database.js'

export interface TestPglite {
  readonly client: PGlite
  readonly db: PgliteDatabase<typeof schema>
  /** Rows of plain SQL, `$1`, `$2`… for parameters. */
  query<T>(sql: string, ...params: unknown[]): Promise<T[]>
  close(): Promise<void>
}

let migrated: Promise<PGlite> | undefined

/** A fresh migrated PGlite database, in memory: a clone of this file's migrated one. */
export async function freshPglite(): Promise<TestPglite> {
  migrated ??= (async () => {
    const client = new PGlite()
    await migrate(drizzle({ client }), { migrationsFolder: PG_MIGRATIONS })
    return client
  })()
  const client = (await (await migrated).clone()) as PGlite
  return {
    client,
    db: drizzle({ client, schema }),
    query: async <T>(sql: string, ...params: unknown[]) => (await client.query<T>(sql, params)).rows,
    close: () => client.close(),
  }
}
