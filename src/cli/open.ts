/**
 * Opening the database a command names, with a clear message for each way it
 * can be unusable: no such file, not SQLite, tables not migrated.
 */
import { existsSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import type { Connection as AnyConnection } from '../dialect/index.js'
import { connectionOf, type SyncDatabase } from '../dialect/open.js'
import { openSqliteFile } from '../dialect/sqlite/open.js'
import { isJobsError } from '../errors.js'
import { CliError, EXIT, usageError } from './exit.js'

export interface OpenDatabase {
  file: string
  db: SyncDatabase
  connection: AnyConnection<'sync'>
  close(): void
}

export function openDatabase(file: string | undefined): OpenDatabase {
  if (file === undefined || file === '') throw usageError('--db FILE is required: the SQLite file your app uses (or set DRIZZLE_JOBS_DB)')
  const path = resolve(file)
  if (!existsSync(path)) throw new CliError(EXIT.DATABASE, `no database file at ${path}: pass the SQLite file your app uses with --db`, 'database')
  if (statSync(path).isDirectory()) throw new CliError(EXIT.DATABASE, `${path} is a directory, not a SQLite database file`, 'database')
  let opened: ReturnType<typeof openSqliteFile>
  try {
    opened = openSqliteFile(path)
  } catch (error) {
    throw new CliError(EXIT.DATABASE, `cannot open ${path}: ${(error as Error).message}`, 'database')
  }
  try {
    const connection = connectionOf(opened.db)
    return { file: path, db: opened.db, connection, close: opened.close }
  } catch (error) {
    opened.close()
    if (isJobsError(error, 'SCHEMA_MISSING')) throw new CliError(EXIT.DATABASE, `${path}: ${error.message}`, 'database')
    const code = (error as { code?: unknown }).code
    if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT') throw new CliError(EXIT.DATABASE, `${path} is not a SQLite database (${(error as Error).message})`, 'database')
    throw error
  }
}
