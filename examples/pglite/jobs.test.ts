/**
 * An app's own tests of its jobs on PGlite: PostgreSQL inside the test's process, no server to start. Each test
 * gets a database in memory, migrated with the app's drizzle-kit migrations; drizzle-jobs/testing runs the queue's
 * jobs inline, as a worker would.
 */
import { fileURLToPath } from 'node:url'
import { PGlite } from '@electric-sql/pglite'
import { drizzle, type PgliteDatabase } from 'drizzle-orm/pglite'
import { migrate } from 'drizzle-orm/pglite/migrator'
import { defineQueue, enqueue, getJob } from 'drizzle-jobs'
import { assertEnqueued, drain, refuteEnqueued } from 'drizzle-jobs/testing'
import { afterEach, beforeEach, expect, test } from 'vitest'
import * as schema from './schema.js'

type Db = PgliteDatabase<typeof schema>

// The app's queue and code: a message saved with the job that answers it, in one transaction.
const replies = defineQueue<{ messageId: number }, { reply: string }>('replies', { backoff: { initial: 0 } })

async function postMessage(db: Db, text: string) {
  return db.transaction(async (tx) => {
    const [message] = await tx.insert(schema.messages).values({ text }).returning()
    await enqueue(tx, replies, { messageId: message!.id }, { id: `reply:${message!.id}` })
    if (text === '') tx.rollback() // the app changes its mind: the message and its job go together
    return message!
  })
}

let client: PGlite
let db: Db
beforeEach(async () => {
  client = new PGlite() // in memory: a fresh database per test
  db = drizzle({ client, schema })
  await migrate(db, { migrationsFolder: fileURLToPath(new URL('./drizzle', import.meta.url)) })
})
afterEach(() => client.close())

test('a message gets its reply job, and the job answers it', async () => {
  const message = await postMessage(db, 'hi')
  await assertEnqueued(db, replies, { id: `reply:${message.id}`, value: { messageId: message.id } })

  const result = await drain(db, replies, ({ messageId }) => ({ reply: `answer to ${messageId}` }))
  expect(result).toMatchObject({ ran: 1, done: 1, failed: 0 })
  expect((await getJob(db, replies, `reply:${message.id}`))?.result).toEqual({ reply: `answer to ${message.id}` })
})

test('a failed attempt is retried until the job succeeds', async () => {
  await postMessage(db, 'flaky')
  let calls = 0
  const result = await drain(db, replies, () => {
    if (++calls < 3) throw new Error('the model is busy')
    return { reply: 'at last' }
  })
  expect(result.runs.map((run) => run.state)).toEqual(['scheduled', 'scheduled', 'done'])
})

test('a message rolled back leaves no job behind', async () => {
  await expect(postMessage(db, '')).rejects.toThrow()
  await refuteEnqueued(db, replies)
  expect(await db.select().from(schema.messages)).toEqual([])
})
