/**
 * libsql databases for the tests: a fresh SQLite file per test, in WAL mode, migrated with the project's
 * drizzle-kit migrations through drizzle-orm/libsql's migrator, as an app on libsql applies them.
 */
import { join } from 'node:path'
import { createClient, type Client } from '@libsql/client'
import { drizzle, type LibSQLDatabase } from 'drizzle-orm/libsql'
import { migrate } from 'drizzle-orm/libsql/migrator'
import * as schema from '../../src/schema/index.js'
import { MIGRATIONS, tempDir } from './db.js'

export interface TestLibsql {
  readonly file: string
  readonly client: Client
  readonly db: LibSQLDatabase<typeof schema>
  /** Rows of plain SQL, `?` or `$1`, `$2`… for parameters, in order. */
  query<T>(sql: string, ...params: unknown[]): Promise<T[]>
  /** Another client on the same file: another connection, as another process holds one. */
  reopen(): { client: Client; db: LibSQLDatabase<typeof schema> }
  close(): void
}

/** A fresh migrated SQLite file on libsql. */
export async function freshLibsql(name = 'test.db'): Promise<TestLibsql> {
  const file = join(tempDir(), name)
  const clients: Client[] = []
  const open = () => {
    const client = createClient({ url: `file:${file}` })
    clients.push(client)
    return { client, db: drizzle({ client, schema }) }
  }
  const first = open()
  await first.client.execute('pragma journal_mode = wal')
  await migrate(first.db, { migrationsFolder: MIGRATIONS })
  return {
    file,
    ...first,
    async query<T>(sql: string, ...params: unknown[]) {
      const { rows } = await first.client.execute({ sql: sql.replace(/\$\d+/g, '?'), args: params as never })
      return rows.map((row) => ({ ...row })) as T[]
    },
    reopen: open,
    close: () => {
      for (const client of clients) client.close()
    },
  }
}
