/** What the load check's processes share: the queue, the app's table, the app's summary. */
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core'

export const LOAD_QUEUE = 'load'

/** A load job's value: the app row it follows up, or null for the jobs added up front. */
export interface LoadJob {
  messageId: number | null
}

/** The app's own table: one row per message, each written with its job. */
export const loadMessages = sqliteTable('load_message', {
  id: integer('id').primaryKey(),
  text: text('text').notNull(),
})

export const LOAD_MESSAGES_DDL = `create table load_message (id integer primary key, text text not null)`

/** What the app process reports when it stops. */
export interface LoadSummary {
  /** Each committed transaction: [when it started, ms since the epoch; how long it took, ms]. */
  samples: Array<[number, number]>
  /** Every error a transaction threw (SQLITE_BUSY among them, if any). */
  errors: string[]
}
