/**
 * What the SQLite drivers' openers share (the command-line tool's `--db`): which paths are SQLite's. Each driver's
 * folder opens a file through its own package (better-sqlite3/open.ts, libsql/open.ts), and src/dialect/open.ts
 * tries them in the registry's order.
 */
import type { Address, PathAddress } from '../connection.js'

/** What a SQLite driver's opener opens, as the tool's errors say it. @internal */
export const SQLITE_FILE = 'a SQLite file'

/** Whether `address` is a file (one that is not SQLite's is refused by the first read). @internal */
export function isFile(address: Address): address is PathAddress {
  return 'path' in address && !address.directory
}
