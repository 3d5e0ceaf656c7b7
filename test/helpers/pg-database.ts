/**
 * What the test helpers (test/helpers/pg.ts) and the PostgreSQL benchmark (bench/pg/) share, free of
 * vitest so that a plain process can import it: the project's migrations folder, a database's URL on a
 * server, and a connection of its own to a server's maintenance database.
 */
import { resolve } from 'node:path'
import pg from 'pg'

export const PG_MIGRATIONS = resolve(import.meta.dirname, '../../drizzle-pg')

/** The URL of `database` on the server at `serverUrl`, with the same user, host and options. */
export function databaseUrl(serverUrl: string, database: string): string {
  const url = new URL(serverUrl)
  url.pathname = `/${database}`
  return url.href
}

/** Runs `work` on a connection of its own to the maintenance database of the server at `server` (the database its URL names). */
export async function onServer<T>(server: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: server })
  client.on('error', () => {})
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}
