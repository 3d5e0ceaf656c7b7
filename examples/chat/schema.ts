/**
 * The chat's Drizzle schema: the queue's tables merged in with `export *`,
 * as any app adopts them, next to the chat's own messages.
 */
import { integer, sqliteTable, text, uniqueIndex, type AnySQLiteColumn } from 'drizzle-orm/sqlite-core'

export * from 'drizzle-jobs/schema'

/** One row per message of a chat: the user's, and the assistant's replies (one per user message, at most). */
export const messages = sqliteTable(
  'messages',
  {
    id: integer('id').primaryKey(),
    chat: text('chat').notNull(),
    role: text('role', { enum: ['user', 'assistant'] }).notNull(),
    text: text('text').notNull(),
    /** For a reply, the user message it answers; unique, so a reply written twice (a rerun after a crash) is kept once. */
    replyTo: integer('reply_to').references((): AnySQLiteColumn => messages.id),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [uniqueIndex('messages_reply_to').on(t.replyTo)],
)
