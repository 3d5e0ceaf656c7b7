/**
 * What the chat's routes and its reply worker ask of the chat's database,
 * answered once per database: db.ts on the SQLite file, db-pg.ts on
 * PostgreSQL. Each holds that database's Drizzle queries of the messages
 * table; the queue's calls are the same on both, and everything else
 * (replies.ts, app.ts) is written once.
 */
import type { JobSnapshot, PgDatabase, ResultOf, SyncDatabase } from 'drizzle-jobs'
import type { ReplyQueue, ReplyResult } from './replies.js'

/** A user message, as the reply worker reads it. */
export interface ChatMessage {
  id: number
  chat: string
  text: string
}

/** A user message of the chat so far, with its reply if it has one. */
export interface AskedMessage {
  id: number
  text: string
  reply: string | null
}

export interface ChatStore {
  /** The Drizzle database that the queue's calls (`work`, `watch`) take. */
  readonly db: SyncDatabase | PgDatabase
  /** Saves a user message and adds its reply job, in one transaction: both or neither (JOB-02). */
  postMessage(queue: ReplyQueue, chat: string, text: string): Promise<{ id: number; jobId: string }>
  /** The chat's last 50 user messages, oldest first, with their replies. */
  recentMessages(chat: string): Promise<AskedMessage[]>
  /** A user message, or undefined once deleted. */
  message(id: number): Promise<ChatMessage | undefined>
  /** The 20 messages of the chat before `message`, oldest first: what the model is shown. */
  history(message: ChatMessage): Promise<{ role: string; text: string }[]>
  /** Keeps the reply to `message` once, however often it is written (a rerun after a crash), and answers the one kept. */
  saveReply(message: ChatMessage, text: string): Promise<ReplyResult>
  /** The reply job's watch as server-sent events: one event per change, as `serialize` shapes it. */
  replyEvents(
    queue: ReplyQueue,
    jobId: string,
    request: Request,
    serialize: (job: JobSnapshot<ResultOf<ReplyQueue>>) => unknown,
  ): Response | Promise<Response>
  /** Closes the database's connections. */
  close(): Promise<void>
}
