import { pgTable, serial, text } from 'drizzle-orm/pg-core'

export * from 'drizzle-jobs/pg/schema'

export const messages = pgTable('messages', { id: serial('id').primaryKey(), text: text('text').notNull() })
