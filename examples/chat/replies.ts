/**
 * The chat's one queue: a reply job per user message, added in the same
 * transaction as the message (store.ts's postMessage), run by a worker that
 * asks the model. Written once for both databases: the worker's calls are the
 * same on SQLite and PostgreSQL.
 */
import { defineQueue, work, type Duration, type Worker } from 'drizzle-jobs'
import { SlowDown, type Model } from './model.js'
import type { ChatStore } from './store.js'

export interface Reply {
  messageId: number
}

/** The model's rate limit the chat keeps by default: 60 replies started per minute, across every process. */
export const DEFAULT_REPLY_RATE: ReplyRate = { limit: 60, per: '1m' }

/** Replies started per window, across every process of the chat. */
export interface ReplyRate {
  limit: number
  per: Duration
}

/** The reply queue, as the README defines it; `backoff` can be shortened (the tests do), and `rate` changed. */
export function replyQueue(backoff: Duration = '5s', rate: ReplyRate = DEFAULT_REPLY_RATE) {
  return defineQueue<Reply>('replies', {
    attempts: 5,
    backoff: { initial: backoff, max: '10m' },
    // Four replies at once across every process of the chat, however many run.
    concurrency: 4,
    // The model's own rate limit: replies beyond it wait (and the page says so) rather than fail with "slow down".
    rate,
    timeout: '1m',
  })
}

/** A rate written as on the command line, `LIMIT/DURATION` (`60/1m`, `5/10s`). */
export function parseReplyRate(text: string): ReplyRate {
  const match = /^\s*(\d+)\s*\/\s*(\S+)\s*$/.exec(text)
  if (!match) throw new Error(`--rate: expected LIMIT/DURATION such as 60/1m, got '${text}'`)
  const per = /^\d+$/.test(match[2]!) ? Number(match[2]) : (match[2] as Duration)
  return { limit: Number(match[1]), per }
}

export type ReplyQueue = ReturnType<typeof replyQueue>

/** The id of the reply job of a message: one reply job per message, whoever adds it. */
export function replyJobId(messageId: number): string {
  return `reply:${messageId}`
}

/** What a finished reply job keeps as its result, and the page shows. */
export interface ReplyResult {
  replyId: number
  text: string
}

/** Starts this process's worker for replies. */
export function startReplies(store: ChatStore, queue: ReplyQueue, model: Model): Worker {
  return work(
    store.db,
    queue,
    async ({ messageId }, run): Promise<ReplyResult | ReturnType<typeof run.fail>> => {
      const message = await store.message(messageId)
      if (!message) return run.fail('the message was deleted')
      const history = await run.step('history', () => store.history(message))
      run.setProgress({ step: 'thinking' })
      let answer: string
      try {
        answer = await run.step('answer', () =>
          model.answer(
            { text: message.text, history, attempt: run.attempt },
            { signal: run.signal, onText: (soFar) => run.setProgress({ step: 'thinking', text: soFar }) },
          ),
        )
      } catch (error) {
        // "Slow down" is not a failure: wait and ask again, without spending an attempt.
        if (error instanceof SlowDown) return run.snooze(error.retryAfterMs)
        throw error
      }
      // A rerun after a crash between this insert and the job's end finds the reply there already: it is kept once.
      return store.saveReply(message, answer)
    },
    { slots: 4 },
  )
}
