/**
 * The chat's web app (Hono): the page, posting a message (its reply job is
 * added in the same transaction), the chat so far, and each reply's job
 * watched live over server-sent events. Written once for both databases.
 */
import { Hono } from 'hono'
import { CHAT_PAGE } from './page.js'
import { replyJobId, type ReplyQueue } from './replies.js'
import type { ChatStore } from './store.js'

const MAX_TEXT_LENGTH = 2_000

export function chatApp(store: ChatStore, queue: ReplyQueue): Hono {
  const app = new Hono()

  app.get('/', (c) => c.html(CHAT_PAGE))

  app.get('/api/chats/:chat/messages', async (c) => {
    const asked = await store.recentMessages(c.req.param('chat'))
    return c.json(asked.map((m) => ({ ...m, jobId: replyJobId(m.id) })))
  })

  app.post('/api/chats/:chat/messages', async (c) => {
    const body = (await c.req.json().catch(() => null)) as { text?: unknown } | null
    const text = typeof body?.text === 'string' ? body.text.trim() : ''
    if (text === '' || text.length > MAX_TEXT_LENGTH) return c.json({ error: `text: 1 to ${MAX_TEXT_LENGTH} characters` }, 400)
    return c.json(await store.postMessage(queue, c.req.param('chat'), text), 201)
  })

  // One event per change of the reply job: "3 ahead" (or "waiting for the model's rate limit"), then "thinking" (with the words so far), then the reply.
  app.get('/api/replies/:jobId/events', (c) =>
    store.replyEvents(queue, c.req.param('jobId'), c.req.raw, (job) => ({
      state: job.state,
      ahead: job.ahead,
      rateLimitedUntil: job.rateLimitedUntil,
      progress: job.progress,
      attempt: job.attempt,
      attempts: job.attempts,
      runAt: job.runAt,
      error: job.error,
      result: job.result,
    })),
  )

  return app
}
