// The README's SQLite path in a fresh app: its database opened as step 3 says (with no relational schema,
// which drizzle-orm 0.45 names `schema` and 1.0 `relations`), a job added in the app's
// synchronous transaction, then the contracts every app checks (smoke.ts).
import Database from 'better-sqlite3'
import { count } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { enqueue, type Enqueued } from 'drizzle-jobs'
import * as schema from './schema.js'
import { replies, smoke } from './smoke.js'

const client = new Database('app.db')
client.pragma('journal_mode = WAL')
client.pragma('synchronous = NORMAL')
const db = drizzle({ client })

function post(text: string, id: string, fail: boolean): void {
  db.transaction((tx) => {
    const message = tx.insert(schema.messages).values({ text }).returning().get()
    // Synchronous on better-sqlite3, as its transactions are.
    const added: Enqueued = enqueue(tx, replies, { text: message.text }, { id })
    if (added.id !== id) throw new Error('the id given is the id kept')
    if (fail) throw new Error('the app changes its mind')
  })
}

function typeChecks(): void {
  // @ts-expect-error a value that is not the queue's type is refused by the compiler
  enqueue(db, replies, { text: 1 })
}
void typeChecks

await smoke({
  db,
  post: async (text, id, fail) => post(text, id, fail),
  messages: async () => db.select({ n: count() }).from(schema.messages).get()?.n ?? 0,
})
client.close()
console.log('done')
