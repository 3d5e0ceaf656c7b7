// The app's schema, as the README's adoption step 1 writes it: the queue's tables beside the app's own.
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core'

export * from 'drizzle-jobs/schema'

export const messages = sqliteTable('messages', {
  id: integer('id').primaryKey(),
  text: text('text').notNull(),
})
