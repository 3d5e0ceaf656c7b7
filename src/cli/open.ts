/**
 * Opening the database a command names, with a clear message for each way it
 * can be unusable: a SQLite file that is missing, not SQLite, or not
 * migrated; a directory that is not PGlite's, or that another process uses;
 * a PostgreSQL URL that is not one, a server that refuses the connection, or
 * a database whose tables are not migrated.
 */
import { existsSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import type { Connection } from '../dialect/index.js'
import { connectionOf, type Database } from '../dialect/open.js'
import { done } from '../dialect/program.js'
import { isModuleMissing, openPgUrl, type OpenedPg } from '../dialect/pg/open.js'
import { openSqliteFile } from '../dialect/better-sqlite3/open.js'
import { openLibsqlFile } from '../dialect/libsql/open.js'
import { isPgliteDataDir, openPgliteDataDir } from '../dialect/pglite/open.js'
import { isJobsError } from '../errors.js'
import { CliError, EXIT, usageError } from './exit.js'

/** An open database: its Drizzle handle, its connection, what a person calls it, and its close. */
export interface OpenDatabase {
  /** The SQLite file's or PGlite directory's path, or the PostgreSQL URL without its password. */
  label: string
  db: Database
  connection: Connection
  close(): Promise<void>
}

/** Where the database is: `--db`, else DRIZZLE_JOBS_DB (a SQLite file or a URL), else DATABASE_URL (a PostgreSQL URL). */
export function databaseTarget(db: string | undefined, env: NodeJS.ProcessEnv): { target: string; from: string } | undefined {
  if (db !== undefined && db !== '') return { target: db, from: '--db' }
  if (env.DRIZZLE_JOBS_DB) return { target: env.DRIZZLE_JOBS_DB, from: 'DRIZZLE_JOBS_DB' }
  if (env.DATABASE_URL) return { target: env.DATABASE_URL, from: 'DATABASE_URL' }
  return undefined
}

/** A target that names a URL (`scheme://…`), not a file: only PostgreSQL's are served. */
const URL_LIKE = /^[a-z][a-z0-9+.-]*:\/\//i

/**
 * Opens the database `target` names: a PostgreSQL URL (postgres:// or postgresql://), a SQLite file's path, or a
 * PGlite data directory's. DATABASE_URL must be a PostgreSQL URL. Throws a CliError whose exit code says what is wrong.
 */
export async function openDatabase(target: { target: string; from: string } | undefined): Promise<OpenDatabase> {
  if (target === undefined) {
    throw usageError(
      '--db is required: the SQLite file your app uses, or a postgres:// URL (or set DRIZZLE_JOBS_DB, or DATABASE_URL for PostgreSQL)',
    )
  }
  if (URL_LIKE.test(target.target) || target.from === 'DATABASE_URL') return openPostgres(target.target, target.from)
  return openSqlite(target.target)
}

async function openSqlite(file: string): Promise<OpenDatabase> {
  const path = resolve(file)
  if (!existsSync(path))
    throw new CliError(EXIT.DATABASE, `no database file at ${path}: pass the SQLite file your app uses with --db`, 'database')
  if (statSync(path).isDirectory()) {
    if (isPgliteDataDir(path)) return openPglite(path)
    throw new CliError(
      EXIT.DATABASE,
      `${path} is a directory, neither a SQLite database file nor a PGlite data directory (it holds no PG_VERSION): pass the SQLite file or the PGlite directory your app opens with --db`,
      'database',
    )
  }
  let opened: { db: Database; close(): void }
  try {
    opened = await openSqliteFile(path).catch(async (error: unknown) => {
      // An app on libsql has no better-sqlite3: its own driver opens the file.
      if (!isModuleMissing(error)) throw error
      return openLibsqlFile(path).catch((other: unknown) => {
        throw isModuleMissing(other) ? error : other
      })
    })
  } catch (error) {
    if (isModuleMissing(error)) throw missingDriver('a SQLite file', 'better-sqlite3 (or @libsql/client)', error)
    throw new CliError(EXIT.DATABASE, `cannot open ${path}: ${(error as Error).message}`, 'database')
  }
  try {
    const connection = connectionOf(opened.db)
    // The tables are checked now, on every driver: an asynchronous one checks on its first read.
    await connection.read(() => done(undefined))
    return { label: path, db: opened.db, connection, close: async () => opened.close() }
  } catch (error) {
    opened.close()
    if (isJobsError(error, 'SCHEMA_MISSING')) throw new CliError(EXIT.DATABASE, `${path}: ${error.message}`, 'database')
    const code = (error as { code?: unknown }).code
    if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT')
      throw new CliError(EXIT.DATABASE, `${path} is not a SQLite database (${(error as Error).message})`, 'database')
    throw error
  }
}

/**
 * Opens a PGlite data directory through the app's @electric-sql/pglite. PGlite serves one process: while the app
 * that opened the directory runs, it is refused (exit 3, naming that process), before PGlite opens it.
 */
async function openPglite(path: string): Promise<OpenDatabase> {
  let opened: { db: Database; close(): Promise<void> }
  try {
    opened = await openPgliteDataDir(path)
  } catch (error) {
    if (isModuleMissing(error)) throw missingDriver('a PGlite data directory', '@electric-sql/pglite', error)
    if (isJobsError(error, 'INVALID_OPTION')) throw new CliError(EXIT.DATABASE, error.message, 'database')
    throw new CliError(EXIT.DATABASE, `cannot open the PGlite data directory ${path}: ${oneLine(error)}`, 'database')
  }
  try {
    const connection = connectionOf(opened.db)
    // The first read checks the schema (every jobs_* table present).
    await connection.read(() => done(undefined))
    return { label: path, db: opened.db, connection, close: opened.close }
  } catch (error) {
    await opened.close()
    if (isJobsError(error, 'SCHEMA_MISSING')) throw new CliError(EXIT.DATABASE, `${path}: ${error.message}`, 'database')
    throw error
  }
}

/** How long the first connection may take before the server counts as unreachable. */
const CONNECT_TIMEOUT_MS = 10_000
/** Connections a command keeps open at most: the dashboard reads a few things at once, a command one at a time. */
const POOL_SIZE = 4

/**
 * Opens a node-postgres pool on `url`, and checks that the server answers and that the tables are migrated
 * before any command runs, so that each failure has its exit code: BAD_URL, UNREACHABLE, DATABASE.
 */
async function openPostgres(url: string, from: string): Promise<OpenDatabase> {
  const label = shownUrl(url, from)
  let opened: OpenedPg
  try {
    opened = await openPgUrl(url, { max: POOL_SIZE, connectTimeoutMs: CONNECT_TIMEOUT_MS })
  } catch (error) {
    if (isModuleMissing(error)) throw missingDriver('a PostgreSQL URL', 'pg (or postgres)', error)
    throw new CliError(
      EXIT.BAD_URL,
      `${label} is not a PostgreSQL URL that can be read (${oneLine(error)}): expected postgres://USER:PASSWORD@HOST:PORT/DATABASE`,
      'bad_url',
    )
  }
  const { db, close } = opened
  try {
    await opened.ping()
  } catch (error) {
    await close()
    throw new CliError(EXIT.UNREACHABLE, `cannot connect to ${label}: ${refusal(error)}`, 'unreachable')
  }
  const connection = connectionOf(db)
  try {
    // The first read checks the schema (every jobs_* table present).
    await connection.read(() => done(undefined))
  } catch (error) {
    await close()
    if (isJobsError(error, 'SCHEMA_MISSING')) throw new CliError(EXIT.DATABASE, `${label}: ${error.message}`, 'database')
    throw new CliError(EXIT.UNREACHABLE, `cannot use ${label}: ${refusal(error)}`, 'unreachable')
  }
  return { label, db, connection, close }
}

/**
 * The URL as it can be shown: without its password. Throws BAD_URL for text that is not a URL, or a URL of
 * another scheme than postgres:// or postgresql://.
 */
function shownUrl(text: string, from: string): string {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw new CliError(
      EXIT.BAD_URL,
      `${from}: not a URL that can be read: expected postgres://USER:PASSWORD@HOST:PORT/DATABASE, or a SQLite file's path with --db`,
      'bad_url',
    )
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new CliError(
      EXIT.BAD_URL,
      `${from}: ${url.protocol}// URLs are not served: expected postgres:// or postgresql://, or a SQLite file's path with --db`,
      'bad_url',
    )
  }
  if (url.password !== '') url.password = '***'
  return url.href
}

/**
 * The error for a driver the app has not installed. Each database's driver is loaded only when a command
 * names such a database, so an app installs only its own.
 */
function missingDriver(what: string, driver: string, error: unknown): CliError {
  return new CliError(
    EXIT.DRIVER,
    `${what} needs the ${driver} package, which is not installed here: npm install ${driver.split(' ')[0]} (${oneLine(error)})`,
    'driver',
  )
}

/** Why the server refused, in one line, with what to check. */
function refusal(error: unknown): string {
  const code = (error as { code?: unknown }).code
  const message = oneLine(error)
  if (code === '3D000') return `${message} (create it, or name another database in the URL)`
  if (code === '28P01' || code === '28000') return `${message} (check the user and password in the URL)`
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'ETIMEDOUT')
    return `${message} (is the server running, at that host and port?)`
  return message
}

function oneLine(error: unknown): string {
  const text = error instanceof Error ? error.message || String((error as { code?: unknown }).code ?? error.name) : String(error)
  return text.replace(/\s+/g, ' ').trim()
}
