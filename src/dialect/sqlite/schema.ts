/**
 * What every SQLite driver's connection shares: the check it makes before its first use (that the tables exist as
 * this version made them), written as a program over the connection's client so that a synchronous and an
 * asynchronous driver run it alike, and how SQLite says that another connection holds the lock.
 */
import { JobsError } from '../../errors.js'
import type { Kind } from '../executor.js'
import { ask, type Program } from '../program.js'
import type { PreparedStatements } from './statement.js'
import { SQL } from './statements.js'

/**
 * Every table the migrations make, each named when the check fails. Jobs need all but jobs_schedule, which
 * only schedules need (they say so themselves): tables of a version before schedules still run jobs.
 */
const TABLES = ['jobs_queue', 'jobs_job', 'jobs_step', 'jobs_lease', 'jobs_schedule'] as const
const FOR_SCHEDULES_ONLY: ReadonlySet<string> = new Set(['jobs_schedule'])

/** What SCHEMA_MISSING tells the app to do. @internal */
export const MIGRATE_HINT =
  "add `export * from 'drizzle-jobs/schema'` to your Drizzle schema, then run `drizzle-kit generate` and `drizzle-kit migrate`"

/**
 * What SCHEMA_MISSING tells the app to do on a database in memory, which no migration of a file reached: most often
 * the app meant to open its file, and drizzle-orm 1.0 opened a database in memory in its place.
 */
const IN_MEMORY_HINT =
  "the database is in memory, so it holds none of the tables that `drizzle-kit migrate` made in your database file: open that file by its path, and give Drizzle its client as `drizzle({ client })` (drizzle-orm 1.0 reads `drizzle(client)` as options and opens a new database in memory); or migrate the database in memory first, with drizzle-orm's `migrate()`"

/** The statements the check reads, to be prepared on the connection. @internal */
export const SCHEMA_CHECK = { tablesPresent: SQL.tablesPresent, latestColumnPresent: SQL.latestColumnPresent, mainFile: SQL.mainFile }

/**
 * Checks that the tables exist, as this version of drizzle-jobs made them: reads only. Throws SCHEMA_MISSING, which
 * says when the database is in memory: `local` when it is on this machine, where a main database with no file is
 * one in memory. @internal
 */
export function* checkSchema<K extends Kind>(
  check: PreparedStatements<K, typeof SCHEMA_CHECK>,
  { local }: { local: boolean },
): Program<void> {
  const present = new Set(yield* ask(check.tablesPresent.all()))
  const missing = TABLES.filter((table) => !present.has(table))
  if (missing.some((table) => !FOR_SCHEDULES_ONLY.has(table))) {
    const inMemory = local && !(yield* ask(check.mainFile.get()))
    throw new JobsError(
      'SCHEMA_MISSING',
      `table ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} missing: ${inMemory ? IN_MEMORY_HINT : MIGRATE_HINT}`,
    )
  }
  if ((yield* ask(check.latestColumnPresent.get())) === 0) {
    throw new JobsError(
      'SCHEMA_MISSING',
      `the jobs_* tables are an older version's (jobs_job has no debounce_key column): run \`drizzle-kit generate\` and \`drizzle-kit migrate\``,
    )
  }
}

/** Whether an error is SQLite saying another connection holds the lock (better-sqlite3's and libsql's code alike). @internal */
export function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'))
}
