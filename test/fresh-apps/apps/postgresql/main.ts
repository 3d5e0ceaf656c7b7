// The README's PostgreSQL path in a fresh app, on node-postgres or postgres.js (db.ts opens the app's
// driver): a job added in the app's transaction, awaited, then the contracts every app checks (smoke.ts).
import { count } from 'drizzle-orm'
import { enqueue, type Enqueued } from 'drizzle-jobs'
import { close, db } from './db.js'
import { messages } from './schema.js'
import { replies, smoke } from './smoke.js'

async function post(text: string, id: string, fail: boolean): Promise<void> {
  await db.transaction(async (tx) => {
    const [message] = await tx.insert(messages).values({ text }).returning()
    const added: Enqueued = await enqueue(tx, replies, { text: message!.text }, { id })
    if (added.id !== id) throw new Error('the id given is the id kept')
    if (fail) throw new Error('the app changes its mind')
  })
}

function typeChecks(): void {
  // @ts-expect-error on PostgreSQL, enqueue answers a promise
  void enqueue(db, replies, { text: 'x' }).added
  // @ts-expect-error a value that is not the queue's type is refused by the compiler
  void enqueue(db, replies, { text: 1 })
}
void typeChecks

await smoke({
  db,
  post,
  messages: async () => (await db.select({ n: count() }).from(messages))[0]?.n ?? 0,
})
await close()
console.log('done')
