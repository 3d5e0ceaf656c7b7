/**
 * Type contracts, checked by the compiler (`npm run typecheck` runs over test/) and by vitest's expectTypeOf.
 * A `@ts-expect-error` line that compiled would fail the type check.
 */
import { drizzle } from 'drizzle-orm/better-sqlite3'
import Database from 'better-sqlite3'
import { describe, expectTypeOf, test } from 'vitest'
import { defineQueue, enqueue, enqueueMany, work, type Enqueued, type Queue, type Run, type SyncDatabase } from '../src/index.js'

interface Reply {
  messageId: number
}
const replies = defineQueue<Reply>('replies')

describe('types', () => {
  test('a queue carries its value type into enqueue and the handler', () => {
    expectTypeOf(replies).toEqualTypeOf<Queue<Reply>>()
    const compileOnly = (db: SyncDatabase) => {
      expectTypeOf(enqueue(db, replies, { messageId: 1 })).toEqualTypeOf<Enqueued>()
      // @ts-expect-error a string is not a messageId
      enqueue(db, replies, { messageId: 'x' })
      // @ts-expect-error the value must have messageId
      enqueue(db, replies, {})
      // @ts-expect-error no such option
      enqueue(db, replies, { messageId: 1 }, { colour: 'red' })
      // @ts-expect-error items carry the queue's value type too
      enqueueMany(db, replies, [{ value: { messageId: 'x' } }])
      work(db, replies, (value, run) => {
        expectTypeOf(value).toEqualTypeOf<Reply>()
        expectTypeOf(run).toEqualTypeOf<Run>()
        expectTypeOf(run.step('s', () => 42)).toEqualTypeOf<Promise<number>>()
      })
    }
    expectTypeOf(compileOnly).toBeFunction()
  })

  test('a better-sqlite3 Drizzle database and its transactions are both accepted', () => {
    const compileOnly = () => {
      const db = drizzle(new Database(':memory:'))
      enqueue(db, replies, { messageId: 1 })
      db.transaction((tx) => {
        enqueue(tx, replies, { messageId: 2 })
        tx.transaction((nested) => enqueue(nested, replies, { messageId: 3 }))
      })
    }
    expectTypeOf(compileOnly).toBeFunction()
  })
})
