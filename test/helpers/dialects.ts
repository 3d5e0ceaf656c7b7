/**
 * The contract suite's databases: one fresh, migrated database per test on SQLite (better-sqlite3), on a
 * PostgreSQL server (node-postgres) and on PGlite (PostgreSQL in the test's own process), with what a contract
 * test asks of it in the same words on each (plain SQL to read what the engine stored, a place a child process
 * can open), so that one test body checks a contract on every one. PGlite serves one process: the contracts
 * of several processes run on the others only (DIALECTS).
 */
import type { BetterSQLite3Database } from 'drizzle-orm/better-sqlite3'
import type { PgDatabase as DrizzlePgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { afterEach, beforeEach } from 'vitest'
import { sql } from 'drizzle-orm'
import type { AsyncSqliteDatabase, Database, PgDatabase, Worker } from '../../src/index.js'
import { freshDb, removeTempDirs, type TestDb } from './db.js'
import { freshPgDb, type TestPgDb } from './pg.js'
import { freshLibsql, type TestLibsql } from './libsql.js'
import { freshPglite, type TestPglite } from './pglite.js'
import { killChildren } from './processes.js'

export type DialectName = 'sqlite' | 'libsql' | 'postgres' | 'pglite'

/** A SQLite file and a PostgreSQL server: databases that several processes share. */
export const DIALECTS: readonly ('sqlite' | 'postgres')[] = ['sqlite', 'postgres']

/** The databases that several processes share, on each SQLite driver: the contracts of several processes run on these. */
export const PROCESS_DATABASES: readonly DialectName[] = ['sqlite', 'libsql', 'postgres']

/** Every database the contracts of one process run on: DIALECTS, a SQLite file on libsql, and PGlite. */
export const CONTRACT_DATABASES: readonly DialectName[] = ['sqlite', 'libsql', 'postgres', 'pglite']

/**
 * The timeout of a test of the contracts on CONTRACT_DATABASES, a hang guard: PGlite runs in the test's own
 * process, so a loaded machine slows each of its statements as much as the test. JOB-02 [pglite] took 7 s here on
 * an idle machine and 50 s at a load of 20, against vitest's 60 s.
 */
export const CONTRACT_TEST_MS = 120_000

/** One test's database, on either dialect. */
export interface ContractDb {
  /** The SQL it speaks: PGlite's is PostgreSQL's. */
  readonly dialect: 'sqlite' | 'postgres'
  /** The Drizzle database the API takes. */
  readonly db: Database
  /** What a child process opens (test/fixtures/contract-child.ts): a SQLite file's path, or a PostgreSQL URL. */
  readonly address: string
  /** The SQLite handles, on SQLite only. */
  readonly sqlite: BetterSQLite3Database<Record<string, unknown>> | undefined
  /** The PostgreSQL handle, on PostgreSQL and PGlite. */
  readonly pg: DrizzlePgDatabase<PgQueryResultHKT, Record<string, unknown>> | undefined
  /**
   * On a database whose calls answer promises (libsql, PostgreSQL, PGlite): a Drizzle transaction of the app's, given
   * its handle and a way to run plain SQL in it.
   */
  readonly inTransaction:
    | (<T>(fn: (tx: PgDatabase | AsyncSqliteDatabase, exec: (sql: string) => Promise<unknown>) => Promise<T>) => Promise<T>)
    | undefined
  /** Reads rows with plain SQL, `$1`, `$2`… for parameters on both dialects. */
  query<T>(sql: string, ...params: unknown[]): Promise<T[]>
  /** Runs one statement of plain SQL (an app's table, say). */
  run(sql: string, ...params: unknown[]): Promise<void>
  /** The job of `queue` with `id` as stored: state, attempts and error. */
  job(queue: string, id: string): Promise<{ state: string; attempts: number; error: string | null } | undefined>
  /** How many rows `table` holds. */
  count(table: 'jobs_job' | 'jobs_step' | 'jobs_lease'): Promise<number>
  /** How many jobs name a worker (their `owner`): the runs holding a lease. */
  held(): Promise<number>
}

/** Counts the jobs that name a worker: none once every run has ended. */
const HELD = 'select count(*) as n from jobs_job where owner is not null'

type Query = ContractDb['query']

/** What a test reads and runs with plain SQL, from one way to run it (`$1`, `$2`… for parameters on every database). */
function plainSql(query: Query): Pick<ContractDb, 'query' | 'run' | 'job' | 'count' | 'held'> {
  return {
    query,
    run: async (sql, ...params) => void (await query(sql, ...params)),
    job: async (queue, id) =>
      (
        await query<{ state: string; attempts: number; error: string | null }>(
          'select state, attempts, error from jobs_job where queue = $1 and id = $2',
          queue,
          id,
        )
      )[0],
    count: async (table) => Number((await query<{ n: number | string }>(`select count(*) as n from ${table}`))[0]!.n),
    held: async () => Number((await query<{ n: number | string }>(HELD))[0]!.n),
  }
}

function sqliteDb(t: TestDb): ContractDb {
  const query: Query = async <T>(sql: string, ...params: unknown[]) => {
    const statement = t.client.prepare(sql.replace(/\$\d+/g, '?'))
    if (statement.reader) return statement.all(...params) as T[]
    statement.run(...params)
    return []
  }
  return { dialect: 'sqlite', db: t.db, address: t.file, sqlite: t.db, pg: undefined, inTransaction: undefined, ...plainSql(query) }
}

function postgresDb(t: TestPgDb): ContractDb {
  return {
    dialect: 'postgres',
    db: t.db,
    address: t.url,
    sqlite: undefined,
    pg: t.db,
    inTransaction: (fn) => t.db.transaction((tx) => fn(tx, (text) => tx.execute(text))),
    ...plainSql(async <T>(sql: string, ...params: unknown[]) => (await t.pool.query(sql, params)).rows as T[]),
  }
}

function libsqlDb(t: TestLibsql): ContractDb {
  return {
    dialect: 'sqlite',
    db: t.db,
    address: `file:${t.file}`,
    sqlite: undefined,
    pg: undefined,
    inTransaction: (fn) => t.db.transaction((tx) => fn(tx, (text) => tx.run(sql.raw(text)))),
    ...plainSql(t.query),
  }
}

function pgliteDb(t: TestPglite): ContractDb {
  return {
    dialect: 'postgres',
    db: t.db,
    get address(): string {
      throw new Error('PGlite serves one process: no child process can open its database')
    },
    sqlite: undefined,
    pg: t.db,
    inTransaction: (fn) => t.db.transaction((tx) => fn(tx, (text) => tx.execute(text))),
    ...plainSql(t.query),
  }
}

/**
 * Gives each test of a `describe.each(DIALECTS)` block a fresh migrated database of `dialect`, and after
 * each test stops the workers pushed to `workers`, kills child processes, and drops the database.
 */
export function eachContractDb(dialect: DialectName): { t: ContractDb; workers: Worker[] } {
  let current: { db: ContractDb; close(): Promise<void> } | undefined
  const workers: Worker[] = []
  beforeEach(async () => {
    if (dialect === 'sqlite') {
      const t = freshDb()
      current = { db: sqliteDb(t), close: async () => t.close() }
    } else if (dialect === 'libsql') {
      const t = await freshLibsql()
      current = { db: libsqlDb(t), close: async () => t.close() }
    } else if (dialect === 'pglite') {
      const t = await freshPglite()
      current = { db: pgliteDb(t), close: () => t.close() }
    } else {
      const t = await freshPgDb()
      current = { db: postgresDb(t), close: () => t.drop() }
    }
  })
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
    killChildren()
    await current?.close()
    current = undefined
    removeTempDirs()
  })
  const now = (): ContractDb => {
    if (!current) throw new Error('the fresh database exists only inside a test')
    return current.db
  }
  const t: ContractDb = {
    get dialect() {
      return now().dialect
    },
    get db() {
      return now().db
    },
    get address() {
      return now().address
    },
    get sqlite() {
      return now().sqlite
    },
    get pg() {
      return now().pg
    },
    get inTransaction() {
      return now().inTransaction
    },
    query: (sql, ...params) => now().query(sql, ...params),
    run: (sql, ...params) => now().run(sql, ...params),
    job: (queue, id) => now().job(queue, id),
    count: (table) => now().count(table),
    held: () => now().held(),
  }
  return { t, workers }
}
