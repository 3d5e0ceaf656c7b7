/** The chat's embedded SQLite file: opened in WAL mode, migrated with the chat's drizzle-kit migrations. */
import { resolve } from 'node:path'
import Database from 'better-sqlite3'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import type { ChatDb } from './replies.js'
import * as schema from './schema.js'

const MIGRATIONS = resolve(import.meta.dirname, 'drizzle')

/** Opens the chat's database file, creating it if needed. Several processes may open the same file. */
export function openChatDb(file: string): { db: ChatDb; close(): void } {
  const client = new Database(file)
  client.pragma('journal_mode = WAL')
  client.pragma('synchronous = NORMAL')
  client.pragma('busy_timeout = 5000')
  client.pragma('foreign_keys = ON')
  return { db: drizzle(client, { schema }), close: () => client.close() }
}

/** Creates or brings up to date the chat's tables (the queue's among them): run once, before the web processes start. */
export function migrateChatDb(file: string): void {
  const { db, close } = openChatDb(file)
  try {
    migrate(db, { migrationsFolder: MIGRATIONS })
  } finally {
    close()
  }
}
