/**
 * The chat on PostgreSQL (`DATABASE_URL=postgres://…`): a node-postgres pool,
 * migrated with the chat's drizzle-kit migrations for PostgreSQL
 * (drizzle-pg/), and its messages read and written with awaited Drizzle
 * queries. Each reply's job is streamed with events.ts, since jobEvents
 * takes a SQLite database only.
 */
import { resolve } from 'node:path'
import { and, desc, eq, inArray, lt } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/node-postgres'
import { migrate } from 'drizzle-orm/node-postgres/migrator'
import pg from 'pg'
import { enqueue } from 'drizzle-jobs'
import { watchEvents } from './events.js'
import { replyJobId } from './replies.js'
import * as schema from './schema-pg.js'
import { messages } from './schema-pg.js'
import type { ChatStore } from './store.js'

const MIGRATIONS = resolve(import.meta.dirname, 'drizzle-pg')

/** A pool on the database; an idle client whose server went away is logged, not a crash of the process. */
function openPool(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url })
  pool.on('error', (error) => console.error('chat database:', error.message))
  return pool
}

/** Opens the chat's database at `url`. Several processes, on several hosts, may open the same database. */
export function openChatPg(url: string): ChatStore {
  const pool = openPool(url)
  const db = drizzle({ client: pool, schema })
  return {
    db,
    async postMessage(queue, chat, text) {
      return db.transaction(async (tx) => {
        const [message] = await tx.insert(messages).values({ chat, role: 'user', text }).returning({ id: messages.id })
        const { id: jobId } = await enqueue(tx, queue, { messageId: message!.id }, { id: replyJobId(message!.id) })
        return { id: message!.id, jobId }
      })
    },
    async recentMessages(chat) {
      const recent = await db.select().from(messages).where(eq(messages.chat, chat)).orderBy(desc(messages.id)).limit(50)
      const asked = recent.filter((m) => m.role === 'user').reverse()
      const replies =
        asked.length === 0
          ? []
          : await db
              .select()
              .from(messages)
              .where(
                inArray(
                  messages.replyTo,
                  asked.map((m) => m.id),
                ),
              )
      const replyOf = new Map(replies.map((reply) => [reply.replyTo, reply.text]))
      return asked.map((m) => ({ id: m.id, text: m.text, reply: replyOf.get(m.id) ?? null }))
    },
    async message(id) {
      const [message] = await db.select().from(messages).where(eq(messages.id, id))
      return message
    },
    async history(message) {
      const earlier = await db
        .select({ role: messages.role, text: messages.text })
        .from(messages)
        .where(and(eq(messages.chat, message.chat), lt(messages.id, message.id)))
        .orderBy(desc(messages.id))
        .limit(20)
      return earlier.reverse()
    },
    async saveReply(message, text) {
      await db.insert(messages).values({ chat: message.chat, role: 'assistant', text, replyTo: message.id }).onConflictDoNothing()
      const [reply] = await db.select().from(messages).where(eq(messages.replyTo, message.id))
      return { replyId: reply!.id, text: reply!.text }
    },
    replyEvents: (queue, jobId, request, serialize) => watchEvents(db, queue, jobId, request, serialize),
    close: () => pool.end(),
  }
}

/** Creates or brings up to date the chat's tables (the queue's among them): run once, before the web processes start. */
export async function migrateChatPg(url: string): Promise<void> {
  const pool = openPool(url)
  try {
    await migrate(drizzle({ client: pool, schema }), { migrationsFolder: MIGRATIONS })
  } finally {
    await pool.end()
  }
}
