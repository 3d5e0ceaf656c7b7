/** Opening a PGlite data directory by its path, for the command-line tool: a PGlite instance behind Drizzle. */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { JobsError } from '../../errors.js'
import type { Address, Opener, PathAddress } from '../connection.js'
import { markDataDirectory } from './data-directory.js'

/**
 * Opens a PostgreSQL data directory, as PGlite keeps one (it holds the server's PG_VERSION), once it is marked as
 * this process's: PGlite serves one process, so a directory that another live process uses is refused with
 * INVALID_OPTION, naming it, before PGlite opens it. The package is loaded on first use, so that an app without it
 * runs the tool: throws the import's error when it is not installed, PGlite's when it cannot open the directory.
 * @internal
 */
export const pgliteOpener: Opener<PathAddress> = {
  what: 'a PGlite data directory',
  package: '@electric-sql/pglite',
  opens: (address: Address): address is PathAddress =>
    'path' in address && address.directory && existsSync(join(address.path, 'PG_VERSION')),
  async open({ path }) {
    const [{ PGlite }, { drizzle }] = await Promise.all([import('@electric-sql/pglite'), import('drizzle-orm/pglite')])
    const holder = markDataDirectory(path)
    if (holder !== null) {
      throw new JobsError(
        'INVALID_OPTION',
        `the PGlite data directory ${path} is open in process ${holder}: PGlite serves one process, and another one on the directory would overwrite what that one writes. Stop it first, or look at its queues from inside it (drizzle-jobs/dashboard, the admin API)`,
      )
    }
    const client = await PGlite.create(path)
    return { db: drizzle({ client }), close: () => client.close() }
  },
}
