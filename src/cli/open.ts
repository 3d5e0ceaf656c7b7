/**
 * Opening the database a command names, with a clear message for each way it
 * can be unusable: a SQLite file that is missing, not SQLite, or not
 * migrated; a directory that is not PGlite's, or that another process uses;
 * a PostgreSQL URL that is not one, a server that refuses the connection, or
 * a database whose tables are not migrated.
 */
import { existsSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { done, type Connection } from '../dialect/index.js'
import type { Address, OpenedDatabase, Opener, PathAddress, UrlAddress } from '../dialect/connection.js'
import { connectionOf, isModuleMissing, openAddress, openersOf, type Database } from '../dialect/open.js'
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

/** A target that names a URL (`scheme://…`), not a file. */
const URL_LIKE = /^[a-z][a-z0-9+.-]*:\/\//i

/** How long the first connection may take before the server counts as unreachable. */
const CONNECT_TIMEOUT_MS = 10_000
/** Connections a command keeps open at most: the dashboard reads a few things at once, a command one at a time. */
const POOL_SIZE = 4

/**
 * Opens the database `target` names, through the driver registry (src/dialect/open.ts) as the app's own handle is
 * opened: a PostgreSQL URL (postgres:// or postgresql://), a SQLite file's path, or a PGlite data directory's.
 * DATABASE_URL must be a PostgreSQL URL. Throws a CliError whose exit code says what is wrong.
 */
export async function openDatabase(target: { target: string; from: string } | undefined): Promise<OpenDatabase> {
  if (target === undefined) {
    throw usageError(
      '--db is required: the SQLite file your app uses, or a postgres:// URL (or set DRIZZLE_JOBS_DB, or DATABASE_URL for PostgreSQL)',
    )
  }
  if (URL_LIKE.test(target.target) || target.from === 'DATABASE_URL') return openUrl(target.target, target.from)
  return openPath(target.target)
}

/**
 * Opens `address` on the first of its drivers whose package the app has installed. A driver missing exits 8, naming
 * the package to install; any other failure to open is `failed`'s to tell.
 */
async function openThrough(address: Address, failed: (error: unknown) => CliError): Promise<OpenedDatabase> {
  try {
    return await openAddress(address, { maxConnections: POOL_SIZE, connectTimeoutMs: CONNECT_TIMEOUT_MS })
  } catch (error) {
    if (isModuleMissing(error)) throw missingDriver(openersOf(address), error)
    throw failed(error)
  }
}

/**
 * Opens a SQLite file or a PGlite data directory. PGlite serves one process: while the app that opened the directory
 * runs, it is refused (exit 3, naming that process), before PGlite opens it.
 */
async function openPath(file: string): Promise<OpenDatabase> {
  const path = resolve(file)
  if (!existsSync(path))
    throw new CliError(EXIT.DATABASE, `no database file at ${path}: pass the SQLite file your app uses with --db`, 'database')
  const address: PathAddress = { path, directory: statSync(path).isDirectory() }
  if (address.directory && openersOf(address).length === 0) {
    throw new CliError(
      EXIT.DATABASE,
      `${path} is a directory, neither a SQLite database file nor a PGlite data directory (it holds no PG_VERSION): pass the SQLite file or the PGlite directory your app opens with --db`,
      'database',
    )
  }
  const opened = await openThrough(address, (error) => {
    if (isJobsError(error, 'INVALID_OPTION')) return new CliError(EXIT.DATABASE, error.message, 'database')
    if (address.directory)
      return new CliError(EXIT.DATABASE, `cannot open the PGlite data directory ${path}: ${oneLine(error)}`, 'database')
    return new CliError(EXIT.DATABASE, `cannot open ${path}: ${(error as Error).message}`, 'database')
  })
  try {
    const connection = connectionOf(opened.db)
    // The tables are checked now, on every driver: an asynchronous one checks on its first read.
    await connection.read(() => done(undefined))
    return { label: path, db: opened.db, connection, close: opened.close }
  } catch (error) {
    await opened.close()
    if (isJobsError(error, 'SCHEMA_MISSING')) throw new CliError(EXIT.DATABASE, `${path}: ${error.message}`, 'database')
    const code = (error as { code?: unknown }).code
    if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT')
      throw new CliError(EXIT.DATABASE, `${path} is not a SQLite database (${(error as Error).message})`, 'database')
    throw error
  }
}

/**
 * Opens a pool on a PostgreSQL URL, and checks that the server answers and that the tables are migrated before any
 * command runs, so that each failure has its exit code: BAD_URL, UNREACHABLE, DATABASE.
 */
async function openUrl(text: string, from: string): Promise<OpenDatabase> {
  const address = urlAddress(text, from)
  const label = shownUrl(address.url)
  const opened = await openThrough(
    address,
    (error) =>
      new CliError(
        EXIT.BAD_URL,
        `${label} is not a PostgreSQL URL that can be read (${oneLine(error)}): expected postgres://USER:PASSWORD@HOST:PORT/DATABASE`,
        'bad_url',
      ),
  )
  const { db, close } = opened
  try {
    await opened.ping?.()
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

/** The URL `text`, which some driver opens. Throws BAD_URL for text that is not a URL, or a URL that no driver opens. */
function urlAddress(text: string, from: string): UrlAddress {
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
  const address: UrlAddress = { url, text }
  if (openersOf(address).length === 0) {
    throw new CliError(
      EXIT.BAD_URL,
      `${from}: ${url.protocol}// URLs are not served: expected postgres:// or postgresql://, or a SQLite file's path with --db`,
      'bad_url',
    )
  }
  return address
}

/** The URL as it can be shown: without its password. */
function shownUrl(url: URL): string {
  const shown = new URL(url.href)
  if (shown.password !== '') shown.password = '***'
  return shown.href
}

/**
 * The error for a driver the app has not installed: what the address is, and the packages that open it, the first
 * to install. Each driver's package is loaded only when a command names such a database, so an app installs only its
 * own.
 */
function missingDriver(openers: readonly Opener[], error: unknown): CliError {
  const [first, ...others] = openers.map((opener) => opener.package)
  const packages = others.length > 0 ? `${first} (or ${others.join(' or ')})` : first
  return new CliError(
    EXIT.DRIVER,
    `${openers[0]!.what} needs the ${packages} package, which is not installed here: npm install ${first} (${oneLine(error)})`,
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
