/**
 * The chat's Drizzle schema on PostgreSQL: the queue's tables merged in with
 * `export *`, as any app adopts them, next to the chat's own messages.
 */
import { integer, pgTable, serial, text, timestamp, uniqueIndex, type AnyPgColumn } from 'drizzle-orm/pg-core'

export * from 'drizzle-jobs/pg/schema'

/** One row per message of a chat: the user's, and the assistant's replies (one per user message, at most). */
export const messages = pgTable(
  'messages',
  {
    id: serial('id').primaryKey(),
    chat: text('chat').notNull(),
    role: text('role', { enum: ['user', 'assistant'] }).notNull(),
    text: text('text').notNull(),
    /** For a reply, the user message it answers; unique, so a reply written twice (a rerun after a crash) is kept once. */
    replyTo: integer('reply_to').references((): AnyPgColumn => messages.id),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('messages_reply_to').on(t.replyTo)],
)
