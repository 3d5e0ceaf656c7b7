/**
 * The chat on its embedded SQLite file: opened in WAL mode, migrated with the
 * chat's drizzle-kit migrations (drizzle/), and its messages read and written
 * with better-sqlite3's synchronous Drizzle queries.
 */
import { resolve } from 'node:path'
import Database from 'better-sqlite3'
import { and, asc, desc, eq, inArray, lt } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { enqueue } from 'drizzle-jobs'
import { jobEvents } from 'drizzle-jobs/sse'
import { replyJobId } from './replies.js'
import * as schema from './schema.js'
import { messages } from './schema.js'
import type { ChatStore } from './store.js'

const MIGRATIONS = resolve(import.meta.dirname, 'drizzle')

/** The file, created if needed, in WAL mode: several processes may open it at once. */
function openFile(file: string): Database.Database {
  const client = new Database(file)
  client.pragma('journal_mode = WAL')
  client.pragma('synchronous = NORMAL')
  client.pragma('busy_timeout = 5000')
  client.pragma('foreign_keys = ON')
  return client
}

/** Opens the chat's database file, creating it if needed. */
export function openChatDb(file: string): ChatStore {
  const client = openFile(file)
  const db = drizzle({ client, schema })
  return {
    db,
    async postMessage(queue, chat, text) {
      // better-sqlite3's transactions are synchronous, and so is enqueue inside one.
      return db.transaction((tx) => {
        const message = tx.insert(messages).values({ chat, role: 'user', text, createdAt: Date.now() }).returning({ id: messages.id }).get()
        const { id: jobId } = enqueue(tx, queue, { messageId: message.id }, { id: replyJobId(message.id) })
        return { id: message.id, jobId }
      })
    },
    async recentMessages(chat) {
      const asked = db
        .select()
        .from(messages)
        .where(eq(messages.chat, chat))
        .orderBy(desc(messages.id))
        .limit(50)
        .all()
        .filter((m) => m.role === 'user')
        .reverse()
      const replies =
        asked.length === 0
          ? []
          : db
              .select()
              .from(messages)
              .where(
                inArray(
                  messages.replyTo,
                  asked.map((m) => m.id),
                ),
              )
              .all()
      const replyOf = new Map(replies.map((reply) => [reply.replyTo, reply.text]))
      return asked.map((m) => ({ id: m.id, text: m.text, reply: replyOf.get(m.id) ?? null }))
    },
    async message(id) {
      return db.select().from(messages).where(eq(messages.id, id)).get()
    },
    async history(message) {
      return db
        .select({ role: messages.role, text: messages.text })
        .from(messages)
        .where(and(eq(messages.chat, message.chat), lt(messages.id, message.id)))
        .orderBy(asc(messages.id))
        .all()
        .slice(-20)
    },
    async saveReply(message, text) {
      db.insert(messages)
        .values({ chat: message.chat, role: 'assistant', text, replyTo: message.id, createdAt: Date.now() })
        .onConflictDoNothing()
        .run()
      const reply = db.select().from(messages).where(eq(messages.replyTo, message.id)).get()!
      return { replyId: reply.id, text: reply.text }
    },
    replyEvents: (queue, jobId, request, serialize) => jobEvents(db, queue, jobId, { request, serialize }),
    async close() {
      client.close()
    },
  }
}

/** Creates or brings up to date the chat's tables (the queue's among them): run once, before the web processes start. */
export function migrateChatDb(file: string): void {
  const client = openFile(file)
  try {
    migrate(drizzle({ client, schema }), { migrationsFolder: MIGRATIONS })
  } finally {
    client.close()
  }
}
