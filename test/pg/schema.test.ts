/**
 * The PostgreSQL tables as the migrations in drizzle-pg/ make them on a real server: the columns and types
 * that producers and workers in other languages rely on, the constraints that keep rows in the protocol, and
 * the defaults that a plain-SQL producer gets, read back through node-postgres and postgres.js.
 */
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { describe, expect, test } from 'vitest'
import { jobsJob } from '../../src/schema/pg.js'
import { eachFreshPgDb, type TestPgDb } from '../helpers/pg.js'

const t = eachFreshPgDb()

/** Runs plain SQL on the pool, as a producer in another language would, and answers its rows. */
async function query<Row = Record<string, unknown>>(text: string, values: unknown[] = []): Promise<Row[]> {
  return (await t.pool.query(text, values)).rows as Row[]
}

/** The error plain SQL fails with, to read its SQLSTATE code. */
async function failure(text: string): Promise<{ code?: string; message: string }> {
  try {
    await t.pool.query(text)
  } catch (error) {
    return error as { code?: string; message: string }
  }
  throw new Error(`expected to fail: ${text}`)
}

/** Each column of a table as `name type [not null] [default …]`, in table order. */
async function columns(table: string): Promise<string[]> {
  const rows = await query<{ column_name: string; data_type: string; is_nullable: string; column_default: string | null }>(
    `select column_name, data_type, is_nullable, column_default from information_schema.columns
     where table_schema = current_schema() and table_name = $1 order by ordinal_position`,
    [table],
  )
  return rows.map((row) =>
    [row.column_name, row.data_type, row.is_nullable === 'NO' ? 'not null' : '', row.column_default ? `default ${row.column_default}` : '']
      .filter(Boolean)
      .join(' '),
  )
}

/** Adds a job with plain SQL and answers its seq. */
async function addJob(queue = 'q', id = 'a'): Promise<number> {
  const [row] = await query<{ seq: string }>(`insert into jobs_job (queue, id) values ($1, $2) returning seq`, [queue, id])
  return Number(row!.seq)
}

test('the migrations create the tables with their documented columns and types', async () => {
  const tables = await query<{ table_name: string }>(
    `select table_name from information_schema.tables where table_schema = current_schema() order by table_name`,
  )
  expect(tables.map((row) => row.table_name)).toEqual([
    'jobs_count',
    'jobs_event',
    'jobs_job',
    'jobs_lease',
    'jobs_queue',
    'jobs_schedule',
    'jobs_step',
  ])

  expect(await columns('jobs_queue')).toEqual([
    'name text not null',
    'paused boolean not null default false',
    'concurrency integer',
    'concurrency_per_group integer',
    'limits_set_at timestamp with time zone',
    'waiting bigint not null default 0',
    'scheduled bigint not null default 0',
    'running bigint not null default 0',
    'done bigint not null default 0',
    'failed bigint not null default 0',
    'canceled bigint not null default 0',
    'rate_limit integer',
    'rate_per bigint',
    'rate_per_group integer',
    'rate_starts jsonb',
    'claim_waiters jsonb',
  ])
  expect(await columns('jobs_count')).toEqual([
    'queue text not null',
    'waiting bigint not null default 0',
    'scheduled bigint not null default 0',
    'running bigint not null default 0',
    'done bigint not null default 0',
    'failed bigint not null default 0',
    'canceled bigint not null default 0',
  ])
  expect(await columns('jobs_job')).toEqual([
    'seq bigint not null',
    'queue text not null',
    'id text not null default (gen_random_uuid())::text',
    'grp text',
    "value jsonb not null default 'null'::jsonb",
    "state text not null default 'waiting'::text",
    'priority bigint not null default 0',
    'attempts integer not null default 0',
    'max_attempts integer not null default 10',
    'run_at timestamp with time zone not null default now()',
    'created_at timestamp with time zone not null default now()',
    'finished_at timestamp with time zone',
    'error text',
    'result jsonb',
    'error_stack text',
    'abandoned boolean not null default false',
    // Added by later migrations: last in the table's order.
    'owner text',
    'trace_context text',
    'waits_for text',
    'signals integer not null default 0',
    'unique_key text',
    'unique_states text',
    'debounce_key text',
  ])
  expect(await columns('jobs_event')).toEqual([
    'job bigint not null',
    'name text not null',
    "state text not null default 'sent'::text",
    'payload jsonb',
    'deadline timestamp with time zone',
    'at timestamp with time zone not null default now()',
  ])
  expect(await columns('jobs_step')).toEqual(['job bigint not null', 'name text not null', 'answer jsonb', 'seq bigint not null'])
  expect(await columns('jobs_lease')).toEqual([
    'owner text not null',
    'expires_at timestamp with time zone not null',
    'channel text',
    // Added by the migration that renamed jobs_worker: last in the table's order.
    'host text',
    'pid integer',
  ])

  const keys = await query<{ table_name: string; columns: string }>(
    `select tc.table_name, string_agg(kcu.column_name, ', ' order by kcu.ordinal_position) as columns
     from information_schema.table_constraints tc
     join information_schema.key_column_usage kcu using (constraint_schema, constraint_name, table_name)
     where tc.table_schema = current_schema() and tc.constraint_type = 'PRIMARY KEY'
     group by tc.table_name order by tc.table_name`,
  )
  expect(keys).toEqual([
    { table_name: 'jobs_event', columns: 'job, name' },
    { table_name: 'jobs_job', columns: 'seq' },
    { table_name: 'jobs_lease', columns: 'owner' },
    { table_name: 'jobs_queue', columns: 'name' },
    { table_name: 'jobs_schedule', columns: 'queue, name' },
    { table_name: 'jobs_step', columns: 'job, name' },
  ])
})

test('jobs_job.seq is an identity that the database gives in add order, and a producer cannot write', async () => {
  const [identity] = await query(
    `select is_identity, identity_generation from information_schema.columns
     where table_schema = current_schema() and table_name = 'jobs_job' and column_name = 'seq'`,
  )
  expect(identity).toEqual({ is_identity: 'YES', identity_generation: 'ALWAYS' })
  expect([await addJob('q', 'a'), await addJob('q', 'b'), await addJob('other', 'a')]).toEqual([1, 2, 3])
  // 428C9: cannot insert a non-DEFAULT value into a column GENERATED ALWAYS.
  expect((await failure(`insert into jobs_job (seq, queue) values (10, 'q')`)).code).toBe('428C9')
})

test('the CHECK on jobs_job.state takes the six states and refuses any other', async () => {
  for (const state of ['waiting', 'scheduled', 'running', 'done', 'failed', 'canceled']) {
    await query(`insert into jobs_job (queue, id, state) values ('q', $1, $1)`, [state])
  }
  const refused = await failure(`insert into jobs_job (queue, state) values ('q', 'sleeping')`)
  expect(refused.code).toBe('23514')
  expect(refused.message).toContain('jobs_job_state_check')
  expect((await failure(`update jobs_job set state = 'Done' where id = 'done'`)).code).toBe('23514')
  expect(await query(`select count(*)::int as jobs from jobs_job`)).toEqual([{ jobs: 6 }])
})

test('an id is unique within its queue, and the same id may be used by another queue', async () => {
  await addJob('q', 'reply:1')
  await addJob('other', 'reply:1')
  const refused = await failure(`insert into jobs_job (queue, id) values ('q', 'reply:1')`)
  expect(refused.code).toBe('23505')
  expect(refused.message).toContain('jobs_job_queue_id')
  // What an add that must not duplicate does: the existing job is kept as it was.
  const added = await query(
    `insert into jobs_job (queue, id, value) values ('q', 'reply:1', '2') on conflict (queue, id) do nothing returning seq`,
  )
  expect(added).toEqual([])
  expect(await query(`select queue, value from jobs_job where id = 'reply:1' order by seq`)).toEqual([
    { queue: 'q', value: null },
    { queue: 'other', value: null },
  ])
})

test("deleting a job deletes its steps, and leaves its worker's row; a step of no job is refused", async () => {
  const seq = await addJob('q', 'a')
  const other = await addJob('q', 'b')
  await query(`insert into jobs_lease (owner, expires_at) values ('host:1', now() + interval '30 seconds')`)
  for (const job of [seq, other]) {
    await query(`insert into jobs_step (job, name, answer) values ($1, 'history', '["hi"]'), ($1, 'answer', '"hello"')`, [job])
    await query(`update jobs_job set state = 'running', attempts = 1, owner = 'host:1' where seq = $1`, [job])
  }
  await query(`delete from jobs_job where seq = $1`, [seq])
  expect(await query(`select job, name, answer from jobs_step order by name`)).toEqual([
    { job: String(other), name: 'answer', answer: 'hello' },
    { job: String(other), name: 'history', answer: ['hi'] },
  ])
  // The worker's row is its lease on every job it runs, the other one among them.
  expect(await query(`select owner from jobs_lease`)).toEqual([{ owner: 'host:1' }])
  expect(await query(`select seq from jobs_job where owner = 'host:1'`)).toEqual([{ seq: String(other) }])
  // 23503: foreign key violation.
  expect((await failure(`insert into jobs_step (job, name) values (${seq}, 'history')`)).code).toBe('23503')
  // A step is kept once per name.
  expect((await failure(`insert into jobs_step (job, name) values (${other}, 'history')`)).code).toBe('23505')
})

test('jobs_job has the claim, scheduled, abandoned, ended, running, unique and debounce indexes, each on the rows it serves only', async () => {
  const indexes = await query<{ indexname: string; indexdef: string }>(
    `select indexname, indexdef from pg_indexes where schemaname = current_schema() and tablename = 'jobs_job' order by indexname`,
  )
  const on = (def: string) => def.replace(/^CREATE (UNIQUE )?INDEX \w+ ON \w+\.jobs_job USING btree /, '$1')
  expect(Object.fromEntries(indexes.map((row) => [row.indexname, on(row.indexdef)]))).toEqual({
    jobs_job_abandoned: "(queue, priority, run_at, seq) WHERE (abandoned AND (state = ANY (ARRAY['waiting'::text, 'scheduled'::text])))",
    jobs_job_claim: "(queue, priority, run_at, seq) WHERE (state = ANY (ARRAY['waiting'::text, 'scheduled'::text]))",
    jobs_job_debounce:
      "UNIQUE (queue, debounce_key) WHERE ((debounce_key IS NOT NULL) AND (state = ANY (ARRAY['waiting'::text, 'scheduled'::text])))",
    jobs_job_ended: "(queue, state, finished_at) WHERE (state = ANY (ARRAY['done'::text, 'failed'::text, 'canceled'::text]))",
    jobs_job_pkey: 'UNIQUE (seq)',
    jobs_job_queue_id: 'UNIQUE (queue, id)',
    jobs_job_running: "(queue, owner) WHERE (state = 'running'::text)",
    jobs_job_scheduled: "(queue, run_at) WHERE (state = 'scheduled'::text)",
    jobs_job_unique:
      "UNIQUE (queue, unique_key) WHERE ((unique_key IS NOT NULL) AND (strpos(unique_states, ((','::text || state) || ','::text)) > 0))",
  })
})

type AnyPgDatabase = PgDatabase<PgQueryResultHKT, typeof import('../../src/schema/pg.js')>

const drivers: [string, (t: TestPgDb) => { run(text: string): Promise<unknown[]>; db: AnyPgDatabase }][] = [
  ['node-postgres', (t) => ({ run: async (text) => (await t.pool.query(text)).rows, db: t.db })],
  [
    'postgres.js',
    (t) => {
      const { client, db } = t.postgresJs()
      return { run: async (text) => [...(await client.unsafe(text))], db }
    },
  ],
]

describe.each(drivers)('on %s', (_, open) => {
  test('a plain-SQL producer that gives only the queue and the value gets every other column by default', async () => {
    const { run, db } = open(t)
    await run(`insert into jobs_job (queue, value) values ('q', '{"a":1}')`)
    await run(`insert into jobs_job (queue) values ('q')`)
    const rows = await db.select().from(jobsJob).orderBy(jobsJob.seq)
    expect(rows).toHaveLength(2)
    const [first, second] = rows as [typeof jobsJob.$inferSelect, typeof jobsJob.$inferSelect]
    expect(first).toEqual({
      seq: 1,
      queue: 'q',
      id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      grp: null,
      value: { a: 1 },
      state: 'waiting',
      priority: 0,
      attempts: 0,
      maxAttempts: 10,
      runAt: expect.any(Date),
      createdAt: expect.any(Date),
      finishedAt: null,
      error: null,
      result: null,
      errorStack: null,
      owner: null,
      abandoned: false,
      traceContext: null,
      waitsFor: null,
      signals: 0,
      uniqueKey: null,
      uniqueStates: null,
      debounceKey: null,
    })
    expect(first.runAt.getTime()).toBe(first.createdAt.getTime())
    // The JSON null, not SQL's: the column is never empty.
    expect(second).toMatchObject({ seq: 2, value: null, state: 'waiting' })
    expect(second.id).not.toBe(first.id)
    expect(await run(`select count(*)::int as n from jobs_job where value = 'null'::jsonb`)).toEqual([{ n: 1 }])
    // run_at is the time of the add, by the server's clock: the job may run now.
    expect(await run(`select bool_and(run_at <= now() and run_at > now() - interval '1 minute') as now from jobs_job`)).toEqual([
      { now: true },
    ])
  })
})
