/**
 * The one way a statement is declared and prepared. Each statement is its
 * SQL with its parameter types and row type beside it, and whether it reads
 * one column (`pluck`); a connection prepares each once, and its `get`,
 * `all` and `run` take and answer those types, so no caller casts what a
 * statement answers.
 */
import type Database from 'better-sqlite3'

export type { JobRow, QueueRow, StepRow, WorkerRow } from '../index.js'

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

/** A statement prepared on one connection. */
export interface Prepared<P extends unknown[], R, G = R | undefined> {
  get(...params: P): G
  all(...params: P): R[]
  iterate(...params: P): IterableIterator<R>
  run(...params: P): Database.RunResult
}

// biome-ignore lint/suspicious/noExplicitAny: a table of statements of every parameter and row shape
type Statements = Record<string, Statement<any, any, any>>

/** The statements of `D` prepared on one connection. */
export type PreparedStatements<D extends Statements> = {
  readonly [K in keyof D]: D[K] extends Statement<infer P, infer R, infer G> ? Prepared<P, R, G> : never
}

/** Prepares every statement of `statements` on `client`, once. */
export function prepareAll<D extends Statements>(client: Database.Database, statements: D): PreparedStatements<D> {
  const prepared: Record<string, Database.Statement> = {}
  for (const [name, { sql, pluck }] of Object.entries(statements)) {
    const made = client.prepare(sql)
    prepared[name] = pluck ? made.pluck() : made
  }
  // The one place a better-sqlite3 statement takes the types declared with its SQL.
  return prepared as unknown as PreparedStatements<D>
}
