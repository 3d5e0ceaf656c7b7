/**
 * The chat's one queue: a reply job per user message, added in the same
 * transaction as the message, run by a worker that asks the model.
 */
import { and, asc, eq, lt } from 'drizzle-orm'
import type { BetterSQLite3Database } from 'drizzle-orm/better-sqlite3'
import { defineQueue, enqueue, work, type Duration, type Worker } from 'drizzle-jobs'
import { SlowDown, type Model } from './model.js'
import { messages } from './schema.js'
import type * as schema from './schema.js'

export type ChatDb = BetterSQLite3Database<typeof schema>

export interface Reply {
  messageId: number
}

/** The reply queue, as the README defines it; `backoff` can be shortened (the tests do). */
export function replyQueue(backoff: Duration = '5s') {
  return defineQueue<Reply>('replies', {
    attempts: 5,
    backoff: { initial: backoff, max: '10m' },
    // Four replies at once across every process of the chat, however many run.
    concurrency: 4,
    timeout: '1m',
  })
}

export type ReplyQueue = ReturnType<typeof replyQueue>

/** The id of the reply job of a message: one reply job per message, whoever adds it. */
export function replyJobId(messageId: number): string {
  return `reply:${messageId}`
}

/** Saves a user message and adds its reply job, in one transaction: both or neither (JOB-02). */
export function postMessage(db: ChatDb, queue: ReplyQueue, chat: string, text: string): { id: number; jobId: string } {
  return db.transaction((tx) => {
    const message = tx.insert(messages).values({ chat, role: 'user', text, createdAt: Date.now() }).returning({ id: messages.id }).get()
    const { id: jobId } = enqueue(tx, queue, { messageId: message.id }, { id: replyJobId(message.id) })
    return { id: message.id, jobId }
  })
}

/** What a finished reply job keeps as its result, and the page shows. */
export interface ReplyResult {
  replyId: number
  text: string
}

/** Starts this process's worker for replies. */
export function startReplies(db: ChatDb, queue: ReplyQueue, model: Model): Worker {
  return work(
    db,
    queue,
    async ({ messageId }, run): Promise<ReplyResult | ReturnType<typeof run.fail>> => {
      const message = db.select().from(messages).where(eq(messages.id, messageId)).get()
      if (!message) return run.fail('the message was deleted')
      const history = await run.step('history', () =>
        db
          .select({ role: messages.role, text: messages.text })
          .from(messages)
          .where(and(eq(messages.chat, message.chat), lt(messages.id, message.id)))
          .orderBy(asc(messages.id))
          .all()
          .slice(-20),
      )
      run.setProgress({ step: 'thinking' })
      let answer: string
      try {
        answer = await run.step('answer', () =>
          model.answer({ text: message.text, history, attempt: run.attempt }, { signal: run.signal, onText: (soFar) => run.setProgress({ step: 'thinking', text: soFar }) }),
        )
      } catch (error) {
        // "Slow down" is not a failure: wait and ask again, without spending an attempt.
        if (error instanceof SlowDown) return run.snooze(error.retryAfterMs)
        throw error
      }
      // A rerun after a crash between this insert and the job's end finds the reply there already: it is kept once.
      db.insert(messages).values({ chat: message.chat, role: 'assistant', text: answer, replyTo: message.id, createdAt: Date.now() }).onConflictDoNothing().run()
      const reply = db.select().from(messages).where(eq(messages.replyTo, message.id)).get()!
      return { replyId: reply.id, text: reply.text }
    },
    { slots: 4 },
  )
}
