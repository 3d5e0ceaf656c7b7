/**
 * The dialect seam: what the engine asks of a database (executor.ts), the
 * connection that runs its programs in transactions (connection.ts,
 * program.ts), and the rows they exchange (rows.ts). A dialect is a folder
 * beside this file (sqlite/, pg/) that implements them, and a driver a folder
 * that gives a dialect its client (better-sqlite3/, libsql/, node-postgres/,
 * postgres-js/, pglite/).
 */
export type { Executor, Kind, Result } from './executor.js'
export type { Connection, ProgressNotices, Work } from './connection.js'
export type * from './rows.js'
export type * from './schedules.js'
export type { Answer, Program } from './program.js'
export { allOf, andThen, ask, done, Lane, runAsync, runSync, whenAnswered } from './program.js'
