/**
 * The one way a statement is declared and prepared. Each statement is its
 * SQL with its parameter types and row type beside it, and whether it reads
 * one column (`pluck`); a connection prepares each once, and its `get`,
 * `all` and `run` take and answer those types, so no caller casts what a
 * statement answers.
 *
 * A SQLite driver is a client that prepares them (SqliteClient): a
 * synchronous one (better-sqlite3) answers at once, an asynchronous one
 * with promises; the SQLite executor (executor.ts) is written once for both.
 */
import type { Kind, Result } from '../executor.js'
import { andThen, type Program } from '../program.js'

export type { JobRow, LeaseRow, QueueRow, StepRow } from '../index.js'

/**
 * A statement's SQL, with `P` the arguments its calls take, `R` what one row reads as (a plucked
 * statement: its one column), and `G` what `get` answers: `R | undefined`, or `R` for a statement that
 * always answers one row.
 */
export interface Statement<P extends unknown[], R, G = R | undefined> {
  readonly sql: string
  readonly pluck: boolean
  /** Carries `P`, `R` and `G` for the compiler only; never set. */
  readonly types?: (...params: P) => [R, G]
}

/** Declares a statement: `P` its arguments (a tuple for `?`, `[{ … }]` for `@name`), `R` one row; `pluck` when it reads one column. */
export function statement<P extends unknown[] = [], R = never>(sql: string, options: { pluck?: true } = {}): Statement<P, R> {
  return { sql, pluck: options.pluck === true }
}

/** Declares a statement that always answers one row of one column (an aggregate, a pragma): `get` answers `R`. */
export function single<P extends unknown[] = [], R = never>(sql: string): Statement<P, R, R> {
  return { sql, pluck: true }
}

/** What a write answers: how many rows it changed. */
export interface RunResult {
  readonly changes: number
}

/** A statement prepared on one connection of a `K` client: its answers come at once (`sync`) or as promises. */
export interface Prepared<K extends Kind, P extends unknown[], R, G = R | undefined> {
  get(...params: P): Result<K, G>
  all(...params: P): Result<K, R[]>
  /** The rows one by one, for a walk that may stop early (a synchronous client reads no row past it); an asynchronous client's, all of them. */
  iterate(...params: P): Result<K, Iterable<R>>
  run(...params: P): Result<K, RunResult>
}

/** Statements by name, of every parameter and row shape: what a client prepares at once. */
// biome-ignore lint/suspicious/noExplicitAny: a table of statements of every parameter and row shape
export type StatementTable = Record<string, Statement<any, any, any>>

/** The statements of `D` prepared on one connection of a `K` client. */
export type PreparedStatements<K extends Kind, D extends StatementTable> = {
  readonly [N in keyof D]: D[N] extends Statement<infer P, infer R, infer G> ? Prepared<K, P, R, G> : never
}

/** A SQLite driver's connection as the executor uses it: it prepares statements and runs programs of several. */
export interface SqliteClient<K extends Kind> {
  /** Prepares every statement of `statements` on the connection, once. */
  prepareAll<D extends StatementTable>(statements: D): PreparedStatements<K, D>
  /** Runs a program of several statements, as the client answers: at once, or awaiting each. */
  run<T>(program: Program<T>): Result<K, T>
}

/** What a statement's `answer` answers, made into another value as it comes: at once, or as a promise. */
export function mapAnswer<K extends Kind, T, U>(answer: Result<K, T>, into: (value: T) => U): Result<K, U> {
  return andThen(answer as T | Promise<T>, into) as Result<K, U>
}

/** Whether a write changed one row, as it comes. */
export function changedOne<K extends Kind>(answer: Result<K, RunResult>): Result<K, boolean> {
  return mapAnswer(answer, (result) => result.changes === 1)
}
