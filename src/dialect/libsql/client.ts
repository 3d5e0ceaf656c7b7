/**
 * libsql's client (`@libsql/client`) as a SQLite client (dialect/sqlite/driver.ts): each statement sent with
 * `execute`, its answers promises. The package is never imported here: its Client and Transaction are known by
 * their shape (connection.ts).
 *
 * libsql takes a statement's arguments as an array (for `?`) or as an object (for `@name`), never both; the
 * dialect's statements mix them (a multi-row insert's shared `@queue` beside its rows' `?`). So every statement is
 * sent with positional arguments: its `@name` placeholders become `?` once, when it is prepared, and each call
 * lays its arguments out in the order the placeholders come.
 */
import type { Program } from '../program.js'
import { runAsync } from '../program.js'
import type { SqliteConnectionClient } from '../sqlite/driver.js'
import type { Prepared, PreparedStatements, StatementTable } from '../sqlite/statement.js'

/** A value libsql binds. */
export type LibsqlValue = string | number | bigint | boolean | null | ArrayBuffer | Uint8Array

/** A libsql Client or Transaction, as the engine runs statements on it. */
export interface LibsqlExecutor {
  execute(statement: { sql: string; args: LibsqlValue[] }): Promise<{ rows: ArrayLike<unknown>[]; rowsAffected: number }>
  executeMultiple(sql: string): Promise<void>
}

/** A libsql Transaction: statements, then commit or rollback; `close` lets its connection go. */
export interface LibsqlTransaction extends LibsqlExecutor {
  commit(): Promise<void>
  rollback(): Promise<void>
  close(): void
  readonly closed: boolean
}

/** A libsql Client. */
export interface LibsqlClient extends LibsqlExecutor {
  transaction(mode: 'write' | 'deferred'): Promise<LibsqlTransaction>
  readonly protocol: string
  readonly closed: boolean
  close(): void
}

/** Where each argument of a statement comes from: a named parameter of its object, or the nth positional one. */
type Slot = string | number

interface Positional {
  readonly text: string
  readonly slots: readonly Slot[]
}

/** Each statement's SQL converted once per process: a transaction's statements are prepared for each transaction. */
const converted = new Map<string, Positional>()

/**
 * A statement's SQL with every placeholder made `?`, and where each one's argument comes from. Quoted text
 * ('…', "…") is left as it is.
 */
function positional(sql: string): Positional {
  const known = converted.get(sql)
  if (known) return known
  const slots: Slot[] = []
  let positions = 0
  const text = sql.replace(/'(?:[^']|'')*'|"(?:[^"]|"")*"|@([A-Za-z_][A-Za-z0-9_]*)|\?/g, (match, name: string | undefined) => {
    if (match.startsWith("'") || match.startsWith('"')) return match
    slots.push(name ?? positions++)
    return '?'
  })
  const made = { text, slots }
  converted.set(sql, made)
  return made
}

/** The arguments of one call, in the order of the statement's placeholders. */
function argumentsOf(slots: readonly Slot[], params: unknown[]): LibsqlValue[] {
  const first = params[0]
  const byName = typeof first === 'object' && first !== null && !(first instanceof Uint8Array)
  const named = (byName ? first : {}) as Record<string, unknown>
  const offset = byName ? 1 : 0
  return slots.map((slot) => bindable(typeof slot === 'string' ? named[slot] : params[offset + slot]))
}

/**
 * A value as libsql binds it. libsql refuses infinite numbers, which a keyset's first page is cut at (better-sqlite3
 * binds them as SQLite's infinite REAL): the largest finite one compares alike with every value a column holds.
 */
function bindable(value: unknown): LibsqlValue {
  if (value === undefined) return null
  if (value === Number.POSITIVE_INFINITY) return Number.MAX_VALUE
  if (value === Number.NEGATIVE_INFINITY) return -Number.MAX_VALUE
  return value as LibsqlValue
}

/**
 * The statements of `statements` on a libsql Client or Transaction; `dataVersion`, where given, is the data version the
 * executor answers in place of the connection's own. @internal
 */
export function libsqlClient(executor: LibsqlExecutor, dataVersion?: () => Promise<number>): SqliteConnectionClient<'async'> {
  return {
    prepareAll<D extends StatementTable>(statements: D): PreparedStatements<'async', D> {
      const prepared: Record<string, Prepared<'async', unknown[], unknown, unknown>> = {}
      for (const [name, { sql, pluck }] of Object.entries(statements)) {
        const { text, slots } = positional(sql)
        const rows = async (params: unknown[]) => {
          const { rows } = await executor.execute({ sql: text, args: argumentsOf(slots, params) })
          // A row is an array that also names its columns: a plucked statement reads its one column.
          return pluck ? rows.map((row) => row[0]) : rows.map((row) => ({ ...row }))
        }
        prepared[name] = {
          get: async (...params) => (await rows(params))[0],
          all: (...params) => rows(params),
          iterate: (...params) => rows(params),
          run: async (...params) => ({ changes: (await executor.execute({ sql: text, args: argumentsOf(slots, params) })).rowsAffected }),
        }
      }
      // The one place a libsql statement takes the types declared with its SQL.
      return prepared as unknown as PreparedStatements<'async', D>
    },
    run: <T>(program: Program<T>) => runAsync(program),
    exec: (sql) => executor.executeMultiple(sql),
    dataVersion,
  }
}
