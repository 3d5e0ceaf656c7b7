/**
 * Type contracts, checked by the compiler (`npm run typecheck` runs over test/) and by vitest's expectTypeOf.
 * A `@ts-expect-error` line that compiled would fail the type check.
 */
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3'
import type { LibSQLDatabase } from 'drizzle-orm/libsql'
import { drizzle as drizzleNodePg, type NodePgDatabase } from 'drizzle-orm/node-postgres'
import type { PgliteDatabase } from 'drizzle-orm/pglite'
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js'
import Database from 'better-sqlite3'
import { describe, expect, expectTypeOf, test } from 'vitest'
import {
  cancel,
  defineQueue,
  enqueue,
  enqueueMany,
  getJob,
  inspectJob,
  queueCounts,
  watch,
  work,
  type Enqueued,
  type Handler,
  type JobSnapshot,
  type JobWait,
  type JobWatch,
  type Json,
  type JsonShape,
  type Outcome,
  type Queue,
  type QueueRef,
  type Run,
  type AnswerOf,
  type Database as AnyDatabase,
  type SyncDatabase,
  type PgDatabase,
  type QueueCounts,
  type JobPage,
  type JobDetail,
  listJobs,
  pauseQueue,
  prune,
  retryJob,
} from '../src/index.js'
import { jobEvents } from '../src/sse/index.js'
import { dashboard, type Dashboard } from '../src/dashboard/index.js'
import { drain, runSchedule } from '../src/testing/index.js'
import { listSchedules, schedule, unschedule, type ScheduleInfo } from '../src/index.js'

interface Reply {
  messageId: number
}
interface ReplyResult {
  text: string
  /** Optional properties are JSON: JSON drops an undefined one. */
  model?: string
}
const replies = defineQueue<Reply>('replies')
const answered = defineQueue<Reply, ReplyResult>('answered')
const untyped = defineQueue('untyped')

/** Type-checked, never called. */
function compileOnly(check: (db: SyncDatabase, run: Run) => void): void {
  expectTypeOf(check).toBeFunction()
}

describe('types', () => {
  test('a queue carries its value type into enqueue and the handler', () => {
    expectTypeOf(replies).toEqualTypeOf<Queue<Reply, Json>>()
    compileOnly((db) => {
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
    })
  })

  test('JOB-25 JOB-26 unique keys name fields of the value or read it; an add that added nothing says what it met', () => {
    expectTypeOf(defineQueue<Reply>('unique-replies', { unique: { key: ['messageId'], for: '1h' } })).toEqualTypeOf<Queue<Reply, Json>>()
    // A key function's value type is the queue's, given or read from the function.
    expectTypeOf(defineQueue('read', { unique: { key: (value: Reply) => String(value.messageId) } })).toEqualTypeOf<Queue<Reply, Json>>()
    // Field names alone never make the value type: it stays JSON, and any name is taken.
    expectTypeOf(defineQueue('fields', { unique: { key: ['anything'] } })).toEqualTypeOf<Queue<Json, Json>>()
    compileOnly((db) => {
      // @ts-expect-error not a field of Reply
      defineQueue<Reply>('bad-field', { unique: { key: ['text'] } })
      // @ts-expect-error not a state
      defineQueue<Reply>('bad-state', { unique: { key: 'k', states: ['waiting', 'scheduled', 'running', 'gone'] } })
      enqueue(db, replies, { messageId: 1 }, { unique: { key: (value) => `m:${value.messageId}` } })
      enqueue(db, replies, { messageId: 1 }, { unique: false, debounce: { id: 'd', delay: '5s' } })
      // @ts-expect-error not a field of Reply
      enqueue(db, replies, { messageId: 1 }, { unique: { key: ['text'] } })
      const answer = enqueue(db, replies, { messageId: 1 })
      if (!answer.added) expectTypeOf(answer.matched).toEqualTypeOf<'id' | 'unique' | 'debounce'>()
      // @ts-expect-error an added job met nothing
      if (answer.added) void answer.matched
    })
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

  test('a value type must be JSON; interfaces are accepted', () => {
    interface Tree {
      name: string
      children: Tree[]
      tags?: readonly string[]
    }
    expectTypeOf(defineQueue<Tree>('trees')).toEqualTypeOf<Queue<Tree, Json>>()
    expectTypeOf(defineQueue<[number, string | null]>('pairs')).toEqualTypeOf<Queue<[number, string | null], Json>>()
    expectTypeOf(defineQueue<{ id: number; note?: string }>('notes')).toEqualTypeOf<Queue<{ id: number; note?: string }, Json>>()
    // @ts-expect-error a Date is not JSON
    defineQueue<{ when: Date }>('dates')
    // @ts-expect-error a Map is not JSON
    defineQueue<Map<string, number>>('maps')
    // @ts-expect-error nor is a Set, deep inside
    defineQueue<{ a: { b: Set<string> }[] }>('sets')
    // @ts-expect-error a bigint is not JSON
    defineQueue<{ n: bigint }>('bigints')
    // @ts-expect-error a function is not JSON
    defineQueue<{ call: () => void }>('functions')
    // @ts-expect-error JSON turns undefined in an array into null
    defineQueue<(number | undefined)[]>('holes')
    // @ts-expect-error unknown may be anything
    defineQueue<{ data: unknown }>('unknowns')
    // @ts-expect-error a result type is checked the same way
    defineQueue<Reply, { when: Date }>('dated')
    expectTypeOf<{ when: Date }>().not.toExtend<JsonShape<{ when: Date }>>()
    expectTypeOf<Reply>().toExtend<JsonShape<Reply>>()
  })

  test('a queue with no type argument takes JSON values', () => {
    expectTypeOf(untyped).toEqualTypeOf<Queue<Json, Json>>()
    compileOnly((db) => {
      enqueue(db, untyped, { list: [1, 'two', null, { three: true }], skipped: undefined })
      // @ts-expect-error a Map is not JSON
      enqueue(db, untyped, new Map([['a', 1]]))
      // @ts-expect-error a Date is not JSON
      enqueue(db, untyped, { when: new Date() })
      // @ts-expect-error nor in a batch
      enqueueMany(db, untyped, [{ value: { when: new Date() } }])
      work(db, untyped, (value) => {
        expectTypeOf(value).toEqualTypeOf<Json>()
      })
    })
  })

  test("a step's answer and progress must be JSON", () => {
    compileOnly((_db, run) => {
      const reply: Reply = { messageId: 1 }
      expectTypeOf(run.step('reply', async () => reply)).toEqualTypeOf<Promise<Reply>>()
      expectTypeOf(run.step('nothing', () => undefined)).toEqualTypeOf<Promise<undefined>>()
      expectTypeOf(run.step('list', () => ['a', 'b'].map((s) => s.length))).toEqualTypeOf<Promise<number[]>>()
      // @ts-expect-error a Date is not JSON: the step would fail at run time
      void run.step('x', () => ({ when: new Date() }))
      // @ts-expect-error nor is one a promise gives
      void run.step('x', async () => new Date())
      run.setProgress({ step: 'thinking', words: 3 })
      // @ts-expect-error progress is JSON too
      run.setProgress({ at: new Date() })
    })
  })

  test("a handler returns the queue's result type, or an outcome", () => {
    compileOnly((db) => {
      work(db, answered, async ({ messageId }) => ({ text: `reply to ${messageId}` }))
      work(db, answered, ({ messageId }) => ({ text: `reply to ${messageId}`, model: 'small' }))
      work(db, answered, (_value, run) => run.retry('1m'))
      work(db, answered, async (_value, run) => (Math.random() > 0.5 ? run.snooze('1s') : { text: 'now' }))
      // @ts-expect-error a handler of a queue with a result type must return one
      work(db, answered, async () => {})
      // @ts-expect-error text is a string
      work(db, answered, async () => ({ text: 1 }))
      // @ts-expect-error async or not
      work(db, answered, () => ({ txt: 'typo' }))
      // @ts-expect-error drain checks the same
      void drain(db, answered, async () => {})
      void drain(db, answered, async () => ({ text: 'hi' }))
    })
  })

  test('with no result type, a handler returns any JSON or nothing', () => {
    compileOnly((db) => {
      const result: ReplyResult = { text: 'hi' }
      work(db, replies, () => {})
      work(db, replies, async () => result)
      work(db, replies, async (_value, run) => (Math.random() > 0.5 ? run.fail('no') : [1, 2, 3]))
      // @ts-expect-error a Date is not JSON
      work(db, replies, async () => new Date())
      // @ts-expect-error nor deep inside
      work(db, replies, () => ({ at: [{ when: new Date() }] }))
      // @ts-expect-error drain checks the same
      void drain(db, replies, () => ({ n: 1n }))
    })
  })

  test('the Handler type is precise', () => {
    expectTypeOf<ReturnType<Handler<Reply>>>().not.toBeUnknown()
    expectTypeOf<ReturnType<Handler<Reply, ReplyResult>>>().toEqualTypeOf<ReplyResult | Outcome | Promise<ReplyResult | Outcome>>()
    expectTypeOf<ReturnType<Handler<Reply>>>().toEqualTypeOf<Json | void | Outcome | Promise<Json | void | Outcome>>()
    const handler: Handler<Reply, ReplyResult> = async ({ messageId }, run) => (messageId > 0 ? { text: 'hi' } : run.fail('no message'))
    // @ts-expect-error a Date is not JSON
    const dated: Handler<Reply> = () => new Date()
    // @ts-expect-error the value is a Reply
    const wrong: Handler<Reply> = (value: { id: string }) => value.id
    compileOnly((db) => {
      work(db, answered, handler)
      void drain(db, answered, handler)
      void [dated, wrong]
    })
  })

  test('a rate is { limit, per, perGroup? }: a number and a duration', () => {
    defineQueue('typed-rate', { rate: { limit: 60, per: '1m' } })
    defineQueue('typed-rate', { rate: { limit: 60, per: 60_000, perGroup: 2 } })
    // @ts-expect-error per is a duration, not any string
    expect(() => defineQueue('typed-rate', { rate: { limit: 60, per: 'a minute' } })).toThrow()
    // @ts-expect-error a rate needs its window
    expect(() => defineQueue('typed-rate', { rate: { limit: 60 } })).toThrow()
  })

  test("getJob, watch and jobEvents show the queue's result type", () => {
    compileOnly((db) => {
      expectTypeOf(getJob(db, answered, 'a')).toEqualTypeOf<JobSnapshot<ReplyResult> | undefined>()
      expectTypeOf(getJob(db, answered, 'a')!.result).toEqualTypeOf<ReplyResult | null>()
      expectTypeOf(getJob(db, replies, 'a')!.result).toEqualTypeOf<Json | null>()
      expectTypeOf(getJob(db, replies, 'a')!.rateLimitedUntil).toEqualTypeOf<Date | null>()
      const wait = getJob(db, replies, 'a')!.waitsFor
      expectTypeOf(wait).toEqualTypeOf<JobWait | null>()
      // A sleep always ends; a wait for an event may have no timeout.
      if (wait?.kind === 'sleep') expectTypeOf(wait).toEqualTypeOf<{ kind: 'sleep'; step: string; until: Date }>()
      if (wait?.kind === 'event') expectTypeOf(wait).toEqualTypeOf<{ kind: 'event'; name: string; until: Date | null }>()
      expectTypeOf(watch(db, answered, 'a')).toEqualTypeOf<JobWatch<ReplyResult>>()
      void (async () => {
        for await (const job of watch(db, answered, 'a')) expectTypeOf(job.result).toEqualTypeOf<ReplyResult | null>()
      })()
      jobEvents(db, answered, 'a', {
        serialize: (job) => {
          expectTypeOf(job.result).toEqualTypeOf<ReplyResult | null>()
          return { state: job.state, text: job.result?.text }
        },
      })
      // @ts-expect-error the result type comes from the queue, not from a type argument
      getJob<{ totally: 'unrelated' }>(db, replies, 'a')
      // @ts-expect-error nor for watch
      watch<{ totally: 'unrelated' }>(db, replies, 'a')
      // @ts-expect-error nor for jobEvents
      jobEvents<{ totally: 'unrelated' }>(db, replies, 'a')
      // @ts-expect-error a queue is a definition or a name
      getJob(db, 42, 'a')
    })
  })

  test('a queue known by name alone reads and operates as well as its definition', () => {
    compileOnly((db) => {
      expectTypeOf(getJob(db, 'answered', 'a')).toEqualTypeOf<JobSnapshot<Json> | undefined>()
      expectTypeOf(watch(db, 'answered', 'a')).toEqualTypeOf<JobWatch<Json>>()
      jobEvents(db, 'answered', 'a')
      const byName: QueueRef = 'answered'
      const byDefinition: QueueRef = answered
      for (const queue of [byName, byDefinition]) {
        cancel(db, queue, 'a')
        inspectJob(db, queue, 'a')
        queueCounts(db, queue)
      }
    })
  })

  test('on PostgreSQL, the calls that answer at once on SQLite answer promises; the same queue and handler types hold', () => {
    const compileOnly = async (pg: NodePgDatabase) => {
      expectTypeOf(enqueue(pg, replies, { messageId: 1 })).toEqualTypeOf<Promise<Enqueued>>()
      expectTypeOf(enqueueMany(pg, replies, [{ value: { messageId: 1 } }])).toEqualTypeOf<Promise<Enqueued[]>>()
      expectTypeOf(getJob(pg, answered, 'a')).toEqualTypeOf<Promise<JobSnapshot<ReplyResult> | undefined>>()
      expectTypeOf(cancel(pg, replies, 'a')).toEqualTypeOf<Promise<boolean>>()
      expectTypeOf(retryJob(pg, replies, 'a')).toEqualTypeOf<Promise<boolean>>()
      expectTypeOf(pauseQueue(pg, replies)).toEqualTypeOf<Promise<void>>()
      expectTypeOf(queueCounts(pg, replies)).toEqualTypeOf<Promise<QueueCounts>>()
      expectTypeOf(queueCounts(pg)).toEqualTypeOf<Promise<QueueCounts[]>>()
      expectTypeOf(listJobs(pg)).toEqualTypeOf<Promise<JobPage>>()
      expectTypeOf(inspectJob(pg, replies, 'a')).toEqualTypeOf<Promise<JobDetail | undefined>>()
      expectTypeOf(prune(pg, { before: 0 })).toEqualTypeOf<Promise<number>>()
      expectTypeOf(watch(pg, answered, 'a')).toEqualTypeOf<JobWatch<ReplyResult>>()
      expectTypeOf(jobEvents(pg, answered, 'a')).toEqualTypeOf<Promise<Response>>()
      expectTypeOf(dashboard(pg)).toEqualTypeOf<Dashboard>()
      // @ts-expect-error a string is not a messageId, on PostgreSQL as on SQLite
      await enqueue(pg, replies, { messageId: 'x' })
      await pg.transaction(async (tx) => {
        expectTypeOf(enqueue(tx, replies, { messageId: 2 })).toEqualTypeOf<Promise<Enqueued>>()
      })
      work(pg, replies, (value) => {
        expectTypeOf(value).toEqualTypeOf<Reply>()
      })
      await drain(pg, replies, () => {})
      const postgresJs: PgDatabase = drizzlePostgresJs.mock()
      expectTypeOf(enqueue(postgresJs, replies, { messageId: 3 })).toEqualTypeOf<Promise<Enqueued>>()
      expectTypeOf(enqueue(drizzleNodePg.mock(), replies, { messageId: 4 })).toEqualTypeOf<Promise<Enqueued>>()
    }
    expectTypeOf(compileOnly).toBeFunction()
  })

  test('on libsql and PGlite the calls answer promises, a libsql transaction included', () => {
    const compileOnly = async (libsql: LibSQLDatabase, pglite: PgliteDatabase) => {
      expectTypeOf(enqueue(libsql, replies, { messageId: 1 })).toEqualTypeOf<Promise<Enqueued>>()
      expectTypeOf(queueCounts(libsql)).toEqualTypeOf<Promise<QueueCounts[]>>()
      expectTypeOf(jobEvents(libsql, answered, 'a')).toEqualTypeOf<Promise<Response>>()
      await libsql.transaction(async (tx) => {
        expectTypeOf(enqueue(tx, replies, { messageId: 2 })).toEqualTypeOf<Promise<Enqueued>>()
      })
      // @ts-expect-error a string is not a messageId, on libsql as everywhere
      await enqueue(libsql, replies, { messageId: 'x' })
      work(libsql, replies, (value) => {
        expectTypeOf(value).toEqualTypeOf<Reply>()
      })
      expectTypeOf(enqueue(pglite, replies, { messageId: 3 })).toEqualTypeOf<Promise<Enqueued>>()
      await drain(pglite, replies, () => {})
    }
    expectTypeOf(compileOnly).toBeFunction()
  })

  test('on SQLite the same calls answer at once', () => {
    compileOnly((db) => {
      expectTypeOf(cancel(db, replies, 'a')).toEqualTypeOf<boolean>()
      expectTypeOf(pauseQueue(db, replies)).toEqualTypeOf<void>()
      expectTypeOf(queueCounts(db)).toEqualTypeOf<QueueCounts[]>()
      expectTypeOf(listJobs(db)).toEqualTypeOf<JobPage>()
      expectTypeOf(prune(db, { before: 0 })).toEqualTypeOf<number>()
      expectTypeOf(jobEvents(db, replies, 'a')).toEqualTypeOf<Response>()
    })
  })

  test('a handle typed as either database answers either: a value or a promise (AnswerOf)', () => {
    const compileOnly = (db: AnyDatabase) => {
      expectTypeOf(enqueue(db, replies, { messageId: 1 })).toEqualTypeOf<Enqueued | Promise<Enqueued>>()
      expectTypeOf(cancel(db, replies, 'a')).toEqualTypeOf<boolean | Promise<boolean>>()
      expectTypeOf(queueCounts(db)).toEqualTypeOf<QueueCounts[] | Promise<QueueCounts[]>>()
      expectTypeOf<AnswerOf<SyncDatabase, number>>().toEqualTypeOf<number>()
      expectTypeOf<AnswerOf<PgDatabase, number>>().toEqualTypeOf<Promise<number>>()
      expectTypeOf<AnswerOf<BetterSQLite3Database, number>>().toEqualTypeOf<number>()
      expectTypeOf<AnswerOf<NodePgDatabase, number>>().toEqualTypeOf<Promise<number>>()
    }
    expectTypeOf(compileOnly).toBeFunction()
  })
})

describe('schedules (JOB-21)', () => {
  test("schedule takes the queue's value type; the calls answer at once on SQLite and promises on PostgreSQL", () => {
    const compileOnly = async (sqlite: BetterSQLite3Database, pg: NodePgDatabase) => {
      const replies = defineQueue<Reply>('replies')
      expectTypeOf(schedule(sqlite, replies, 'nightly', { cron: '0 3 * * *', value: { messageId: 1 } })).toEqualTypeOf<boolean>()
      expectTypeOf(
        schedule(pg, replies, 'nightly', { cron: '0 3 * * *', tz: 'Europe/Paris', value: { messageId: 1 }, backfill: '6h' }),
      ).toEqualTypeOf<Promise<boolean>>()
      // @ts-expect-error a string is not a messageId
      schedule(sqlite, replies, 'nightly', { cron: '0 3 * * *', value: { messageId: 'x' } })
      expectTypeOf(unschedule(sqlite, 'replies', 'nightly')).toEqualTypeOf<boolean>()
      expectTypeOf(unschedule(pg, replies, 'nightly')).toEqualTypeOf<Promise<boolean>>()
      expectTypeOf(listSchedules(sqlite)).toEqualTypeOf<ScheduleInfo[]>()
      expectTypeOf(listSchedules(pg, replies)).toEqualTypeOf<Promise<ScheduleInfo[]>>()
      expectTypeOf(runSchedule(sqlite, replies, 'nightly')).toEqualTypeOf<Enqueued>()
      expectTypeOf(runSchedule(pg, replies, 'nightly')).toEqualTypeOf<Promise<Enqueued>>()
    }
    expectTypeOf(compileOnly).toBeFunction()
  })
})
