/**
 * The app's own table in the "enqueue, one job per app transaction" row:
 * the row a chat app saves before queueing the job that follows it up.
 * Written with Drizzle's query builder, as the app would.
 */
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core'

export const benchMessages = sqliteTable('bench_message', {
  id: integer('id').primaryKey(),
  chatId: integer('chat_id').notNull(),
  body: text('body').notNull(),
  createdAt: integer('created_at').notNull(),
})

export const CREATE_APP_TABLE = `create table if not exists bench_message (
  id integer primary key, chat_id integer not null, body text not null, created_at integer not null)`

/** The app row of transaction `i`. */
export function appRow(i: number): { chatId: number; body: string; createdAt: number } {
  return { chatId: i % 100, body: `message ${i}`, createdAt: Date.now() }
}
