/**
 * The one way a PostgreSQL statement is declared and run. Each statement is
 * its SQL with its parameter type and row type beside it; its SQL names its
 * parameters (`@queue`), which become `$1`, `$2`… in the order they first
 * appear, and each call passes them as one object. `all`, `get` and `one`
 * answer rows of the declared type, so no caller casts what a statement
 * answers: the one cast is here.
 */
import { createHash } from 'node:crypto'
import type { PgStatementText, PgValue, Queryable } from './driver.js'

export type { JobRow, QueueRow, StepRow } from '../index.js'

/** The parameters a statement takes: an object of values, each cast in the statement's SQL. */
export type PgParams<P> = { [K in keyof P]: PgValue }

/** A statement's SQL, with `P` the parameters its calls take and `R` what one row reads as. */
export interface PgStatement<P extends PgParams<P>, R> extends PgStatementText {
  /** The parameters' names, in the order of their placeholders `$1`, `$2`… */
  readonly params: readonly (keyof P & string)[]
  /** Carries `P` and `R` for the compiler only; never set. */
  readonly types?: (params: P) => R
}

/** A parameter, `@name`, and the cast that follows it where it is cast to JSON. */
const PARAM = /@([A-Za-z_][A-Za-z0-9_]*)(?=(::jsonb?\b)?)/g

/**
 * Declares a statement named `key` (camelCase, unique among the engine's statements): `P` its parameters,
 * `R` one row. Its name on the server carries a hash of its text, so a statement whose text changed (another
 * version of the package in the same process) is prepared under a name of its own.
 *
 * A parameter cast to `jsonb` or `json` is sent as text and cast from it (`$1::text::jsonb`): postgres.js
 * serializes a parameter that the server types as JSON with its own serializer, JSON.stringify, which would
 * encode the engine's JSON text a second time (drizzle-orm 0.45 replaces that serializer on the clients it
 * wraps; 1.0 does not). As text, the value goes as it is on every driver.
 */
export function pgStatement<P extends PgParams<P> = Record<never, never>, R = never>(key: string, sql: string): PgStatement<P, R> {
  const params: string[] = []
  const text = sql.replace(PARAM, (_, name: string, json: string | undefined) => {
    let index = params.indexOf(name)
    if (index === -1) index = params.push(name) - 1
    return json ? `$${index + 1}::text` : `$${index + 1}`
  })
  const hash = createHash('sha1').update(text).digest('hex').slice(0, 8)
  const name = `drizzle_jobs_${key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`)}_${hash}`
  if (name.length > 63) throw new Error(`drizzle-jobs: the statement name ${name} is longer than PostgreSQL keeps`)
  return { name, text, params: params as (keyof P & string)[] }
}

function valuesOf<P extends PgParams<P>>(statement: PgStatement<P, unknown>, params: P): PgValue[] {
  return statement.params.map((name) => {
    const value = params[name]
    if (value === undefined) throw new Error(`drizzle-jobs: statement ${statement.name} was run without its parameter @${name}`)
    return value
  })
}

/** Every row the statement answers. */
export async function all<P extends PgParams<P>, R>(q: Queryable, statement: PgStatement<P, R>, params: P): Promise<R[]> {
  // The one place a row takes the type declared with its SQL: the SQL casts each column to that type.
  return (await q.query(statement, valuesOf(statement, params))) as R[]
}

/** The statement's first row, or undefined when it answers none. */
export async function get<P extends PgParams<P>, R>(q: Queryable, statement: PgStatement<P, R>, params: P): Promise<R | undefined> {
  return (await all(q, statement, params))[0]
}

/** The one row of a statement that always answers one (an aggregate). */
export async function one<P extends PgParams<P>, R>(q: Queryable, statement: PgStatement<P, R>, params: P): Promise<R> {
  const row = await get(q, statement, params)
  if (row === undefined) throw new Error(`drizzle-jobs: statement ${statement.name} answered no row`)
  return row
}

/** Whether the statement answered a row: for writes that answer `returning 1` where they wrote. */
export async function some<P extends PgParams<P>, R>(q: Queryable, statement: PgStatement<P, R>, params: P): Promise<boolean> {
  return (await all(q, statement, params)).length > 0
}

/**
 * Whether `error`, or an error it wraps (Drizzle's DrizzleQueryError, say), is PostgreSQL's unique_violation (23505)
 * on the index `index`, which each driver names in its own field, and the server's message in quotes.
 */
export function violatesUnique(error: unknown, index: string): boolean {
  let cause = error
  for (let depth = 0; depth < 8 && typeof cause === 'object' && cause !== null; depth++) {
    if (Reflect.get(cause, 'code') === '23505') {
      const named: unknown = Reflect.get(cause, 'constraint') ?? Reflect.get(cause, 'constraint_name')
      return named === index || String(Reflect.get(cause, 'message')).includes(`"${index}"`)
    }
    cause = Reflect.get(cause, 'cause')
  }
  return false
}
