/**
 * The PostgreSQL connection (src/dialect/pg/connection.ts) on a real server: its transactions on both
 * drivers (a pool's own, a savepoint inside the app's Drizzle transaction), the schema check (and what a
 * worker does when it fails, on every PostgreSQL driver: PGlite too), how it names the database, and which
 * errors it takes for "try again later".
 */
import { cpSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/node-postgres'
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js'
import { migrate } from 'drizzle-orm/node-postgres/migrator'
import type { PgDatabase as DrizzlePgDatabase } from 'drizzle-orm/pg-core'
import pg from 'pg'
import postgres from 'postgres'
import { PGlite } from '@electric-sql/pglite'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator'
import { describe, expect, test } from 'vitest'
import { ask, type Executor, type Program } from '../../src/dialect/index.js'
import { isPgBusy } from '../../src/dialect/pg/connection.js'
import { JobsError } from '../../src/errors.js'
import { defineQueue, enqueue, getJob, work, type Worker } from '../../src/index.js'
import { tempDir } from '../helpers/db.js'
import { eachFreshPgDb, freshPgDb, PG_MIGRATIONS, pgConnectionOf, POSTGRES_JS } from '../helpers/pg.js'
import { STARTUP_MS } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'
import { spawnFixture } from '../reliability/processes.js'
import { addJobs, newJob } from './jobs.js'

const t = eachFreshPgDb()

async function ids(): Promise<string[]> {
  return (await t.pool.query<{ id: string }>(`select id from jobs_job order by seq`)).rows.map((row) => row.id)
}

/** A write's work that adds the job `id`, then throws when told to. */
function adding(id: string, thenThrow = false): (db: Executor) => Program<boolean> {
  return function* (db) {
    const added = yield* ask(db.jobInsert(newJob('replies', id)))
    if (thenThrow) throw new Error(`after adding ${id}`)
    return added
  }
}

/** Both drivers' Drizzle databases on the test's database, postgres.js on each of its majors. */
// biome-ignore lint/suspicious/noExplicitAny: a handle of any schema, from either driver
type AnyPgDatabase = DrizzlePgDatabase<any, any, any>
const drivers: [string, () => AnyPgDatabase][] = [
  ['node-postgres', () => t.db],
  ...POSTGRES_JS.map((major): [string, () => AnyPgDatabase] => [major, () => t.postgresJs(major).db]),
]

describe.each(drivers)('transactions on %s', (_driver, database) => {
  test('JOB-02 [postgres] a write commits its work, or rolls all of it back when it throws, and gives its connection back', async () => {
    const c = pgConnectionOf(database())
    expect(c.inTransaction()).toBe(false)
    // More failed writes than the pool holds connections: each gave its connection back.
    for (let i = 0; i < 25; i++) await expect(c.write(adding(`failed-${i}`, true))).rejects.toThrow(`after adding failed-${i}`)
    expect(await c.write(adding('kept'))).toBe(true)
    expect(await c.tryWrite(adding('timed'))).toBe(true)
    expect(await ids()).toEqual(['kept', 'timed'])
  })

  test('JOB-02 [postgres] inside a Drizzle transaction a write is a savepoint: the transaction goes on after it fails, and the write rolls back with it', async () => {
    const db = database()
    await db.transaction(async (tx) => {
      const c = pgConnectionOf(tx)
      expect(c.inTransaction()).toBe(true)
      await expect(c.write(adding('failed', true))).rejects.toThrow('after adding failed')
      expect(await c.write(adding('kept'))).toBe(true)
      // The app's own statements go on in the same transaction, and see the write.
      await tx.execute(sql`insert into jobs_job (queue, id) values ('replies', 'app')`)
      expect(await c.executor.jobExists('replies', 'kept')).toBe(true)
    })
    expect(await ids()).toEqual(['kept', 'app'])

    await expect(
      db.transaction(async (tx) => {
        await pgConnectionOf(tx).write(adding('rolled-back'))
        throw new Error('the app fails after the job was added')
      }),
    ).rejects.toThrow('the app fails')
    expect(await ids()).toEqual(['kept', 'app'])
  })

  test('writes inside one Drizzle transaction take turns, so that their savepoints never cross', async () => {
    await database().transaction(async (tx) => {
      const c = pgConnectionOf(tx)
      const writes = Array.from({ length: 12 }, (_, i) => c.write(adding(`job-${i}`, i % 3 === 0)))
      const settled = await Promise.allSettled(writes)
      expect(settled.map((result) => result.status)).toEqual(settled.map((_, i) => (i % 3 === 0 ? 'rejected' : 'fulfilled')))
    })
    expect(await ids()).toEqual(Array.from({ length: 12 }, (_, i) => `job-${i}`).filter((_, i) => i % 3 !== 0))
  })

  test('join runs in the transaction under way with no savepoint of its own: a failure there fails the transaction', async () => {
    const db = database()
    await db.transaction(async (tx) => {
      expect(await pgConnectionOf(tx).join(adding('joined'))).toBe(true)
    })
    expect(await ids()).toEqual(['joined'])
    await expect(
      db.transaction(async (tx) => {
        const c = pgConnectionOf(tx)
        await expect(
          c.join(function* (db) {
            yield* ask(db.jobInsert(newJob('replies', 'x', { value: 'not json' })))
          }),
        ).rejects.toThrow(/json/i)
        await tx.execute(sql`select 1`)
      }),
    ).rejects.toMatchObject({ cause: { code: '25P02' } })
    // On a pool, join is a write of its own.
    expect(await pgConnectionOf(db).join(adding('alone'))).toBe(true)
    expect(await ids()).toEqual(['joined', 'alone'])
  })

  test('a read sees one state in all its statements, and writes nothing', async () => {
    const c = pgConnectionOf(database())
    await addJobs(c, [newJob('replies', 'a')])
    const counts = await c.read(function* (db) {
      const before = yield* ask(db.queueCountWaiting('replies'))
      // Another connection adds a job and commits while the read is under way.
      yield* ask(t.pool.query(`insert into jobs_job (queue, id) values ('replies', 'b')`))
      const after = yield* ask(db.queueCountWaiting('replies'))
      return [before, after]
    })
    expect(counts).toEqual([1, 1])
    expect(await c.executor.queueCountWaiting('replies')).toBe(2)
    await expect(c.read(adding('c'))).rejects.toMatchObject({ code: '25006' })
    await database().transaction(async (tx) => {
      expect(await pgConnectionOf(tx).read((db) => ask(db.queueCountWaiting('replies')))).toBe(2)
    })
  })
})

describe('a node-postgres Client of its own', () => {
  test('its writes take turns on its one connection', async () => {
    const client = new pg.Client({ connectionString: t.url })
    client.on('error', () => {})
    await client.connect()
    try {
      const c = pgConnectionOf(drizzle(client))
      const writes = Array.from({ length: 10 }, (_, i) => c.write(adding(`job-${i}`, i === 4)))
      const settled = await Promise.allSettled(writes)
      expect(settled.filter((result) => result.status === 'rejected')).toHaveLength(1)
      expect(await c.executor.queueCountWaiting('replies')).toBe(9)
      expect(await ids()).toHaveLength(9)
    } finally {
      await client.end()
    }
  })
})

describe('which database a connection names', () => {
  test('a pool, its transactions and a postgres.js client on one database share its key; each handle has its one connection', async () => {
    const pool = pgConnectionOf(t.db)
    expect(pgConnectionOf(t.db)).toBe(pool)
    const url = new URL(t.url)
    expect(pool.key).toBe(`postgres://${url.hostname}:${url.port}/${t.name}`)
    expect(pool.label).toBe(t.name)
    await t.db.transaction(async (tx) => {
      const inTransaction = pgConnectionOf(tx)
      expect(inTransaction).not.toBe(pool)
      expect(inTransaction.key).toBe(pool.key)
    })
    const postgresJs = t.postgresJs().db
    expect(pgConnectionOf(postgresJs).key).toBe(pool.key)
    await postgresJs.transaction(async (tx) => {
      const inTransaction = pgConnectionOf(tx)
      // A postgres.js transaction does not say where it is: the server tells, at its first use.
      await inTransaction.prepareWrites()
      expect(inTransaction.key).toBe(pool.key)
      expect(inTransaction.label).toBe(t.name)
    })
    // Another pool on the same database is another connection, with the same key.
    const other = new pg.Pool({ connectionString: t.url, max: 1 })
    try {
      const again = pgConnectionOf(drizzle(other))
      expect(again).not.toBe(pool)
      expect(again.key).toBe(pool.key)
    } finally {
      await other.end()
    }
  })

  test('anything but a Drizzle handle on a driver of drizzle-jobs is refused with INVALID_OPTION, naming the drivers', () => {
    // A Drizzle PostgreSQL handle whose client no driver folder recognises.
    const unknownClient = drizzle({ client: {} as pg.Pool })
    for (const db of [unknownClient, {}, null, 'postgres://localhost/db']) {
      expect(() => pgConnectionOf(db)).toThrow(
        expect.objectContaining({
          code: 'INVALID_OPTION',
          message: expect.stringMatching(/PostgreSQL through node-postgres \(pg\).* postgres\.js \(postgres\)/),
        }),
      )
    }
  })
})

describe('the schema check', () => {
  test('SCHEMA_MISSING on a database without the migration, on the first write, join, read or prepareWrites, until it is migrated', async () => {
    const bare = await freshPgDb({ migrate: false })
    try {
      // Taking the connection does no I/O: it cannot fail here.
      const c = pgConnectionOf(bare.db)
      const missing = expect.objectContaining({
        code: 'SCHEMA_MISSING',
        message: expect.stringMatching(
          /^table jobs_queue, jobs_job, jobs_step, jobs_lease, jobs_schedule, jobs_count are missing: add `export \* from 'drizzle-jobs\/pg\/schema'`.*`drizzle-kit generate`.*`drizzle-kit migrate`/,
        ),
      })
      await expect(c.write(adding('a'))).rejects.toThrow(missing)
      await expect(c.join(adding('a'))).rejects.toThrow(missing)
      await expect(c.read((db) => ask(db.jobExists('replies', 'a')))).rejects.toThrow(missing)
      await expect(c.prepareWrites()).rejects.toThrow(missing)
      await expect(c.write(adding('a'))).rejects.toBeInstanceOf(JobsError)
      await bare.db.transaction(async (tx) => {
        await expect(pgConnectionOf(tx).write(adding('a'))).rejects.toThrow(missing)
      })
      await bare.pool.query(`create table jobs_queue (name text primary key)`)
      await expect(c.prepareWrites()).rejects.toThrow(/^table jobs_job, jobs_step, jobs_lease, jobs_schedule, jobs_count are missing/)
      await bare.pool.query(`drop table jobs_queue`)
      await migrate(bare.db, { migrationsFolder: PG_MIGRATIONS })
      expect(await c.write(adding('a'))).toBe(true)
    } finally {
      await bare.drop()
    }
  })

  test('SCHEMA_MISSING on a database migrated to the version whose workers had rows in jobs_worker: jobs_lease is named, until the last migration runs', async () => {
    const earlier = await freshPgDb({ migrate: false })
    try {
      await migrate(earlier.db, { migrationsFolder: migrationsBefore('0003_jobs_lease') })
      const c = pgConnectionOf(earlier.db)
      await expect(c.write(adding('a'))).rejects.toThrow(
        expect.objectContaining({ code: 'SCHEMA_MISSING', message: expect.stringMatching(/^table jobs_lease is missing: /) }),
      )
      await migrate(earlier.db, { migrationsFolder: PG_MIGRATIONS })
      expect(await c.write(adding('a'))).toBe(true)
    } finally {
      await earlier.drop()
    }
  })

  test('SCHEMA_MISSING on a database migrated to the version of one jobs_lease row per running job: its tables are told apart by the column the latest migration adds, until the last migrations run', async () => {
    const earlier = await freshPgDb({ migrate: false })
    try {
      await migrate(earlier.db, { migrationsFolder: migrationsBefore('0002_lease_per_worker') })
      const c = pgConnectionOf(earlier.db)
      const older = expect.objectContaining({
        code: 'SCHEMA_MISSING',
        message: expect.stringMatching(
          /^the jobs_\* tables are an older version's \(jobs_job has no debounce_key column\): .*`drizzle-kit migrate`/,
        ),
      })
      await expect(c.write(adding('a'))).rejects.toThrow(older)
      await expect(c.read((db) => ask(db.jobExists('replies', 'a')))).rejects.toThrow(older)
      await migrate(earlier.db, { migrationsFolder: PG_MIGRATIONS })
      expect(await c.write(adding('a'))).toBe(true)
    } finally {
      await earlier.drop()
    }
  })
})

/** Every PostgreSQL driver a worker runs on. */
const WORK_DRIVERS = ['node-postgres', ...POSTGRES_JS, 'pglite'] as const

/** A database of its own on `driver`, with no tables or migrated from `migrations`; plain SQL on it, and its end. */
async function databaseOn(
  driver: (typeof WORK_DRIVERS)[number],
  migrations?: string,
): Promise<{ db: AnyPgDatabase; query<T>(sql: string): Promise<T[]>; migrate(folder: string): Promise<void>; close(): Promise<void> }> {
  if (driver === 'pglite') {
    const client = new PGlite()
    const db = drizzlePglite({ client })
    const database = {
      db,
      query: async <T>(text: string) => (await client.query<T>(text)).rows,
      migrate: (folder: string) => migratePglite(db, { migrationsFolder: folder }),
      close: () => client.close(),
    }
    if (migrations) await database.migrate(migrations)
    return database
  }
  const bare = await freshPgDb({ migrate: false })
  const database = {
    db: driver === 'node-postgres' ? bare.db : bare.postgresJs(driver).db,
    query: async <T>(text: string) => (await bare.pool.query(text)).rows as T[],
    migrate: (folder: string) => migrate(bare.db, { migrationsFolder: folder }),
    close: () => bare.drop(),
  }
  if (migrations) await database.migrate(migrations)
  return database
}

/** What a database holds of drizzle-jobs: its tables, the rows of each, and the triggers. */
async function jobsTablesAndRows(query: <T>(sql: string) => Promise<T[]>): Promise<unknown> {
  const tables = (
    await query<{ name: string }>(`select table_name as name from information_schema.tables where table_schema = 'public' order by 1`)
  ).map((row) => row.name)
  const rows: Record<string, number> = {}
  for (const table of tables) rows[table] = Number((await query<{ n: number | string }>(`select count(*) as n from ${table}`))[0]!.n)
  const triggers = await query<{ name: string }>(`select tgname as name from pg_trigger where not tgisinternal order by 1`)
  return { tables, rows, triggers }
}

/**
 * Starts a worker on `db` that tells its errors to the answered list, polling every 10 ms, and answers once it told
 * one and 30 polls went by: a worker that went on would meet the missing tables again at each.
 */
async function workerErrors(db: AnyPgDatabase): Promise<{ errors: unknown[]; worker: Worker }> {
  const errors: unknown[] = []
  const worker = work(db, defineQueue('replies'), () => {}, { pollInterval: '10ms', onError: (error) => errors.push(error) })
  await waitFor(() => errors.length > 0, 'the worker to tell its error')
  await new Promise((resolve) => setTimeout(resolve, 300))
  return { errors, worker }
}

describe.each(WORK_DRIVERS)('JOB-13 work on tables not migrated, on %s', (driver) => {
  test(`JOB-13 [${driver}] on a database with no tables, work tells onError SCHEMA_MISSING once, naming every table and the commands to run, and stops, writing nothing`, async () => {
    const database = await databaseOn(driver)
    try {
      const before = await jobsTablesAndRows(database.query)
      const { errors, worker } = await workerErrors(database.db)
      expect(errors).toEqual([
        expect.objectContaining({
          code: 'SCHEMA_MISSING',
          message: expect.stringMatching(
            /^table jobs_queue, jobs_job, jobs_step, jobs_lease, jobs_schedule, jobs_count are missing: add `export \* from 'drizzle-jobs\/pg\/schema'`.*`drizzle-kit generate`.*`drizzle-kit migrate`/,
          ),
        }),
      ])
      await worker.stop()
      expect(errors).toHaveLength(1)
      expect(await jobsTablesAndRows(database.query)).toEqual(before)
    } finally {
      await database.close()
    }
  })

  test(`JOB-13 [${driver}] on tables of the version whose workers had rows in jobs_worker, work tells onError SCHEMA_MISSING once, naming jobs_lease, and stops, writing nothing; once migrated, a worker runs`, async () => {
    const database = await databaseOn(driver, migrationsBefore('0003_jobs_lease'))
    try {
      const before = await jobsTablesAndRows(database.query)
      const { errors, worker } = await workerErrors(database.db)
      expect(errors).toEqual([
        expect.objectContaining({
          code: 'SCHEMA_MISSING',
          message: expect.stringMatching(/^table jobs_lease is missing: .*`drizzle-kit migrate`/),
        }),
      ])
      await worker.stop()
      expect(errors).toHaveLength(1)
      expect(await jobsTablesAndRows(database.query)).toEqual(before)

      await database.migrate(PG_MIGRATIONS)
      const replies = defineQueue('replies')
      await enqueue(database.db, replies, null, { id: 'after' })
      const after = work(database.db, replies, () => 'ran', { pollInterval: '10ms', onError: (error) => errors.push(error) })
      try {
        await waitFor(async () => (await getJob(database.db, replies, 'after'))?.state === 'done', 'the job to run')
      } finally {
        await after.stop()
      }
      expect(errors).toHaveLength(1)
    } finally {
      await database.close()
    }
  })
})

/** A copy of the project's PostgreSQL migrations that stops before `tag`: a database of an earlier version. */
function migrationsBefore(tag: string): string {
  const folder = tempDir()
  cpSync(PG_MIGRATIONS, folder, { recursive: true })
  const journalFile = join(folder, 'meta', '_journal.json')
  const journal = JSON.parse(readFileSync(journalFile, 'utf8')) as { entries: { idx: number; tag: string }[] }
  const at = journal.entries.findIndex((entry) => entry.tag === tag)
  if (at < 0) throw new Error(`no migration ${tag}`)
  journal.entries = journal.entries.slice(0, at)
  writeFileSync(journalFile, JSON.stringify(journal))
  return folder
}

describe('isBusy', () => {
  /** A promise and the function that resolves it. */
  function signal(): { promise: Promise<void>; resolve: () => void } {
    let resolve = () => {}
    const promise = new Promise<void>((done) => (resolve = done))
    return { promise, resolve }
  }

  test('a real deadlock between two writes is busy: one is retried later, the other commits', async () => {
    const c = pgConnectionOf(t.db)
    const seqs = await addJobs(c, [newJob('replies', 'a'), newJob('replies', 'b')])
    const other = pgConnectionOf(t.postgresJs().db)
    const aLocked = signal()
    const bLocked = signal()
    const lockBoth = (first: number, second: number, locked: { resolve: () => void }, otherLocked: Promise<void>) =>
      function* (db: Executor) {
        yield* ask(db.jobCancel(first, 1))
        locked.resolve()
        yield* ask(otherLocked)
        yield* ask(db.jobCancel(second, 1))
      }
    const results = await Promise.allSettled([
      c.write(lockBoth(seqs.get('a')!, seqs.get('b')!, aLocked, bLocked.promise)),
      other.write(lockBoth(seqs.get('b')!, seqs.get('a')!, bLocked, aLocked.promise)),
    ])
    const failed = results.filter((result) => result.status === 'rejected')
    expect(failed).toHaveLength(1)
    const error = failed[0]!.reason
    expect(error).toMatchObject({ code: '40P01' })
    expect(c.isBusy(error)).toBe(true)
    expect(other.isBusy(error)).toBe(true)
  })

  test('lock_not_available is busy, also wrapped by Drizzle; other errors are not', async () => {
    const c = pgConnectionOf(t.db)
    const seq = (await addJobs(c, [newJob('replies', 'a')])).get('a')!
    const locked = signal()
    const release = signal()
    const holding = c.write(function* (db) {
      yield* ask(db.jobCancel(seq, 1))
      locked.resolve()
      yield* ask(release.promise)
    })
    await locked.promise
    let wrapped: unknown
    try {
      await t.db.execute(sql`select 1 from jobs_job where seq = ${seq} for update nowait`)
    } catch (error) {
      wrapped = error
    }
    release.resolve()
    await holding
    expect(wrapped).toMatchObject({ cause: { code: '55P03' } })
    expect(c.isBusy(wrapped)).toBe(true)

    let duplicate: unknown
    try {
      await t.pool.query(`insert into jobs_queue (name) values ('replies')`)
    } catch (error) {
      duplicate = error
    }
    expect(duplicate).toMatchObject({ code: '23505' })
    for (const notBusy of [duplicate, new JobsError('SCHEMA_MISSING', 'x'), new Error('x'), null, undefined, 'busy', { code: 40001 }]) {
      expect(isPgBusy(notBusy)).toBe(false)
    }
    expect(isPgBusy({ code: '40001' })).toBe(true)
    expect(isPgBusy(new Error('outer', { cause: { code: 'ECONNREFUSED' } }))).toBe(true)
    expect(isPgBusy({ code: '08006' })).toBe(true)
  })

  test('a connection lost in the middle of a write is busy, crashes nothing, and the next write gets a new one', async () => {
    const c = pgConnectionOf(t.db)
    await addJobs(c, [newJob('replies', 'a')])
    const admin = new pg.Client({ connectionString: t.url })
    admin.on('error', () => {})
    await admin.connect()
    // A client of its own: postgres.js's end() waits out its whole timeout after one of its transactions lost its connection.
    const postgresJsClient = postgres(t.url, { max: 2, onnotice: () => {} })
    try {
      const terminate = () =>
        admin.query(`select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`)
      let lost: unknown
      try {
        await c.write(function* (db) {
          yield* ask(db.jobInsert(newJob('replies', 'b')))
          yield* ask(terminate())
          yield* ask(db.jobInsert(newJob('replies', 'c')))
        })
      } catch (error) {
        lost = error
      }
      expect(lost).toBeDefined()
      expect(c.isBusy(lost)).toBe(true)
      const postgresJs = pgConnectionOf(drizzlePostgresJs(postgresJsClient))
      expect(await postgresJs.executor.jobExists('replies', 'a')).toBe(true)
      let lostPostgresJs: unknown
      try {
        await postgresJs.write(function* (db) {
          yield* ask(terminate())
          yield* ask(db.jobInsert(newJob('replies', 'd')))
        })
      } catch (error) {
        lostPostgresJs = error
      }
      expect(lostPostgresJs).toBeDefined()
      expect(postgresJs.isBusy(lostPostgresJs)).toBe(true)
      expect(await c.write(adding('after'))).toBe(true)
      expect(await postgresJs.write(adding('after-postgres-js'))).toBe(true)
      expect(await ids()).toEqual(['a', 'after', 'after-postgres-js'])
    } finally {
      await postgresJsClient.end({ timeout: 0 })
      await admin.end()
    }
  })

  test.each(POSTGRES_JS)(
    'JOB-05 [%s] a write whose connection is ended and seen closed before its next statement fails busy, writes nothing more on that connection (which would crash postgres.js 3.4), and the next write gets a new one',
    async (major) => {
      const child = spawnFixture('pg-lost-child.ts', [t.url, major])
      const exit = await child.exited
      expect({ code: exit.code, signal: exit.signal, lines: child.lines }, child.stderr()).toEqual({
        code: 0,
        signal: null,
        lines: ['lost true', 'after true'],
      })
      expect(await ids()).toEqual(['after'])
    },
    // The child's start, on a loaded machine, then its few statements.
    STARTUP_MS + 30_000,
  )
})
