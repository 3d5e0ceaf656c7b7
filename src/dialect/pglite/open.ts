/** Opening a PGlite data directory by its path, for the commands that name one: a PGlite instance behind Drizzle. */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { JobsError } from '../../errors.js'
import type { AsyncPgDatabase } from '../pg/connection.js'
import { markDataDirectory } from './driver.js'

/** Whether `dir` is a PostgreSQL data directory, as PGlite keeps one: it holds the server's PG_VERSION. @internal */
export function isPgliteDataDir(dir: string): boolean {
  return existsSync(join(dir, 'PG_VERSION'))
}

/**
 * Opens the PGlite data directory `dir` (an absolute path) as a Drizzle database, once it is marked as this
 * process's: PGlite serves one process, so a directory that another live process uses is refused with
 * INVALID_OPTION, naming it, before PGlite opens it. The package is loaded here, on first use, so that an app
 * without it runs the commands: throws the import's error when it is not installed, PGlite's when it cannot open
 * the directory. @internal
 */
export async function openPgliteDataDir(dir: string): Promise<{ db: AsyncPgDatabase; close(): Promise<void> }> {
  const [{ PGlite }, { drizzle }] = await Promise.all([import('@electric-sql/pglite'), import('drizzle-orm/pglite')])
  const holder = markDataDirectory(dir)
  if (holder !== null) {
    throw new JobsError(
      'INVALID_OPTION',
      `the PGlite data directory ${dir} is open in process ${holder}: PGlite serves one process, and another one on the directory would overwrite what that one writes. Stop it first, or look at its queues from inside it (drizzle-jobs/dashboard, the admin API)`,
    )
  }
  const client = await PGlite.create(dir)
  return { db: drizzle({ client }), close: () => client.close() }
}
