// The SQLite path on libsql in a fresh app: its database a local file opened through @libsql/client, a job added
// in the app's transaction, awaited as on PostgreSQL, then the contracts every app checks (smoke.ts).
import { createClient } from '@libsql/client'
import { count, sql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/libsql'
import { enqueue, type Enqueued } from 'drizzle-jobs'
import * as schema from './schema.js'
import { replies, smoke } from './smoke.js'

const client = createClient({ url: 'file:app.db' })
await client.execute('pragma journal_mode = wal')
const db = drizzle({ client })

async function post(text: string, id: string, fail: boolean): Promise<void> {
  await db.transaction(async (tx) => {
    const [message] = await tx.insert(schema.messages).values({ text }).returning()
    const added: Enqueued = await enqueue(tx, replies, { text: message!.text }, { id })
    if (added.id !== id) throw new Error('the id given is the id kept')
    if (fail) throw new Error('the app changes its mind')
  })
}

function typeChecks(): void {
  // @ts-expect-error on libsql, enqueue answers a promise
  void enqueue(db, replies, { text: 'x' }).added
  // @ts-expect-error a value that is not the queue's type is refused by the compiler
  void enqueue(db, replies, { text: 1 })
}
void typeChecks
void sql

await smoke({
  db,
  post,
  messages: async () => (await db.select({ n: count() }).from(schema.messages))[0]?.n ?? 0,
})
client.close()
console.log('done')
