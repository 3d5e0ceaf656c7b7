/**
 * The protocol's rows (src/dialect/rows.ts) held to each dialect's Drizzle schema, so that neither drifts from the
 * other unseen. The compiler (`npm run typecheck` runs over test/) checks that every column of a protocol row is a
 * column of both schemas, of the type the protocol gives it: SQLite's as the schema types it, PostgreSQL's as its
 * statements read it (pg/terms.ts); and that the columns a schema has beyond the protocol's are the few its dialect
 * keeps to itself. The test checks that both schemas give each of those columns the same SQL name.
 */
import { getTableColumns, getTableName, type Column, type Table } from 'drizzle-orm'
import { describe, expect, expectTypeOf, test } from 'vitest'
import type { EpochMs, EventRow, Flag, JobRow, JsonText, QueueRow, StepRow, LeaseRow } from '../../src/dialect/index.js'
import * as sqlite from '../../src/schema/index.js'
import * as pg from '../../src/schema/pg.js'

/** A PostgreSQL value as the statements read it: jsonb as its text, a timestamptz in ms, a boolean as 0 or 1; a number or a text as it is. */
type ReadOnPg<T> = unknown extends T ? JsonText : T extends Date ? EpochMs : T extends boolean ? Flag : T

/** A PostgreSQL column as the statements read it, null where the column may hold null. */
type PgColumnRead<C extends Column> = ReadOnPg<C['_']['data']> | (C['_']['notNull'] extends true ? never : null)

/** The columns `K` of a PostgreSQL table, as the statements read them: a key that is no column of the table does not compile. */
type PgRead<T extends Table, K extends keyof T['_']['columns']> = { [P in K]: PgColumnRead<T['_']['columns'][P]> }

/** The columns `K` of a SQLite table, as the schema types them: a key that is no column of the table does not compile. */
type SqliteRead<T extends Table, K extends keyof T['$inferSelect']> = Pick<T['$inferSelect'], K>

/** A protocol row's keys at run time: the compiler refuses a record that misses one of them or has another. */
function keysOf<R>(keys: Record<keyof R, true>): string[] {
  return Object.keys(keys)
}

const TABLES = [
  {
    sqlite: sqlite.jobsJob,
    pg: pg.jobsJob,
    keys: keysOf<JobRow>({
      seq: true,
      queue: true,
      id: true,
      grp: true,
      value: true,
      state: true,
      priority: true,
      attempts: true,
      maxAttempts: true,
      runAt: true,
      createdAt: true,
      finishedAt: true,
      error: true,
      result: true,
      errorStack: true,
      owner: true,
      abandoned: true,
      traceContext: true,
      waitsFor: true,
      signals: true,
      uniqueKey: true,
      uniqueStates: true,
      debounceKey: true,
    }),
  },
  {
    sqlite: sqlite.jobsQueue,
    pg: pg.jobsQueue,
    keys: keysOf<QueueRow>({
      name: true,
      paused: true,
      concurrency: true,
      concurrencyPerGroup: true,
      limitsSetAt: true,
      rateLimit: true,
      ratePer: true,
      ratePerGroup: true,
      rateStarts: true,
      claimWaiters: true,
      waiting: true,
      scheduled: true,
      running: true,
      done: true,
      failed: true,
      canceled: true,
    }),
  },
  { sqlite: sqlite.jobsStep, pg: pg.jobsStep, keys: keysOf<StepRow>({ job: true, name: true, answer: true }) },
  {
    sqlite: sqlite.jobsEvent,
    pg: pg.jobsEvent,
    keys: keysOf<EventRow>({ job: true, name: true, state: true, payload: true, deadline: true, at: true }),
  },
  {
    sqlite: sqlite.jobsLease,
    pg: pg.jobsLease,
    keys: keysOf<LeaseRow>({ owner: true, host: true, pid: true, expiresAt: true, channel: true }),
  },
]

describe('the protocol rows and the schemas', () => {
  test('SQLite schema: each protocol column, of the protocol type; beyond them only engine_writes', () => {
    expectTypeOf<SqliteRead<typeof sqlite.jobsJob, keyof JobRow>>().toEqualTypeOf<JobRow>()
    expectTypeOf<SqliteRead<typeof sqlite.jobsQueue, keyof QueueRow>>().toEqualTypeOf<QueueRow>()
    expectTypeOf<SqliteRead<typeof sqlite.jobsStep, keyof StepRow>>().toEqualTypeOf<StepRow>()
    expectTypeOf<SqliteRead<typeof sqlite.jobsEvent, keyof EventRow>>().toEqualTypeOf<EventRow>()
    expectTypeOf<Exclude<keyof typeof sqlite.jobsEvent.$inferSelect, keyof EventRow>>().toBeNever()
    expectTypeOf<SqliteRead<typeof sqlite.jobsLease, keyof LeaseRow>>().toEqualTypeOf<LeaseRow>()
    expectTypeOf<Exclude<keyof typeof sqlite.jobsJob.$inferSelect, keyof JobRow>>().toEqualTypeOf<'engineWrites'>()
    expectTypeOf<Exclude<keyof typeof sqlite.jobsQueue.$inferSelect, keyof QueueRow>>().toBeNever()
    expectTypeOf<Exclude<keyof typeof sqlite.jobsStep.$inferSelect, keyof StepRow>>().toBeNever()
    expectTypeOf<Exclude<keyof typeof sqlite.jobsLease.$inferSelect, keyof LeaseRow>>().toBeNever()
  })

  test("PostgreSQL schema: each protocol column, read as the protocol's type; beyond them only jobs_step.seq", () => {
    expectTypeOf<PgRead<typeof pg.jobsJob, keyof JobRow>>().toEqualTypeOf<JobRow>()
    expectTypeOf<PgRead<typeof pg.jobsQueue, keyof QueueRow>>().toEqualTypeOf<QueueRow>()
    expectTypeOf<PgRead<typeof pg.jobsStep, keyof StepRow>>().toEqualTypeOf<StepRow>()
    expectTypeOf<PgRead<typeof pg.jobsEvent, keyof EventRow>>().toEqualTypeOf<EventRow>()
    expectTypeOf<Exclude<keyof typeof pg.jobsEvent.$inferSelect, keyof EventRow>>().toBeNever()
    expectTypeOf<PgRead<typeof pg.jobsLease, keyof LeaseRow>>().toEqualTypeOf<LeaseRow>()
    expectTypeOf<Exclude<keyof typeof pg.jobsJob.$inferSelect, keyof JobRow>>().toBeNever()
    expectTypeOf<Exclude<keyof typeof pg.jobsQueue.$inferSelect, keyof QueueRow>>().toBeNever()
    expectTypeOf<Exclude<keyof typeof pg.jobsStep.$inferSelect, keyof StepRow>>().toEqualTypeOf<'seq'>()
    expectTypeOf<Exclude<keyof typeof pg.jobsLease.$inferSelect, keyof LeaseRow>>().toBeNever()
  })

  test.each(TABLES.map((table) => [getTableName(table.sqlite), table] as const))(
    'both schemas name each protocol column of %s alike, as the statements write it',
    (name, table) => {
      expect(getTableName(table.pg)).toBe(name)
      const names = (of: Table) => table.keys.map((key) => [key, getTableColumns(of)[key]?.name])
      expect(names(table.pg)).toEqual(names(table.sqlite))
      expect(names(table.sqlite).every(([, column]) => typeof column === 'string')).toBe(true)
    },
  )
})
