/**
 * The chat's web app (Hono): the page, posting a message (its reply job is
 * added in the same transaction), the chat so far, and each reply's job
 * watched live over server-sent events.
 */
import { desc, eq, inArray } from 'drizzle-orm'
import { Hono } from 'hono'
import { jobEvents } from 'drizzle-jobs/sse'
import { CHAT_PAGE } from './page.js'
import { postMessage, replyJobId, type ChatDb, type ReplyQueue } from './replies.js'
import { messages } from './schema.js'

const MAX_TEXT_LENGTH = 2_000

export function chatApp(db: ChatDb, queue: ReplyQueue): Hono {
  const app = new Hono()

  app.get('/', (c) => c.html(CHAT_PAGE))

  app.get('/api/chats/:chat/messages', (c) => {
    const chat = c.req.param('chat')
    const asked = db.select().from(messages).where(eq(messages.chat, chat)).orderBy(desc(messages.id)).limit(50).all().filter((m) => m.role === 'user').reverse()
    const replies = asked.length === 0 ? [] : db.select().from(messages).where(inArray(messages.replyTo, asked.map((m) => m.id))).all()
    const replyOf = new Map(replies.map((reply) => [reply.replyTo, reply.text]))
    return c.json(asked.map((m) => ({ id: m.id, text: m.text, jobId: replyJobId(m.id), reply: replyOf.get(m.id) ?? null })))
  })

  app.post('/api/chats/:chat/messages', async (c) => {
    const body = (await c.req.json().catch(() => null)) as { text?: unknown } | null
    const text = typeof body?.text === 'string' ? body.text.trim() : ''
    if (text === '' || text.length > MAX_TEXT_LENGTH) return c.json({ error: `text: 1 to ${MAX_TEXT_LENGTH} characters` }, 400)
    return c.json(postMessage(db, queue, c.req.param('chat'), text), 201)
  })

  // One event per change of the reply job: "3 ahead", then "thinking" (with the words so far), then the reply.
  app.get('/api/replies/:jobId/events', (c) =>
    jobEvents(db, queue, c.req.param('jobId'), {
      request: c.req.raw,
      serialize: (job) => ({ state: job.state, ahead: job.ahead, progress: job.progress, attempt: job.attempt, attempts: job.attempts, runAt: job.runAt, error: job.error, result: job.result }),
    }),
  )

  return app
}
