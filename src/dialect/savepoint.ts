/**
 * A savepoint of the transaction under way, the same on every driver of both dialects: the drivers whose
 * connection may be the app's transaction (node-postgres, PGlite, better-sqlite3, libsql) write the engine's work in one.
 */
import { ask, runAsync, type Program } from './program.js'

/** Numbers the savepoints of this process, so that no two have one name. */
let savepoints = 0

/**
 * Runs `body` inside a savepoint, through `exec` (one statement on the transaction's connection, answered at once or as
 * a promise): RELEASE when it answers, ROLLBACK TO and RELEASE when it throws. A rollback that fails leaves the
 * transaction aborted: the caller's error, thrown as it is, says why it failed first. @internal
 */
export function* savepoint<T>(exec: (sql: string) => unknown, body: Program<T>): Program<T> {
  const name = `drizzle_jobs_${++savepoints}`
  yield* ask(exec(`savepoint ${name}`))
  try {
    const value = yield* body
    yield* ask(exec(`release savepoint ${name}`))
    return value
  } catch (error) {
    try {
      yield* ask(exec(`rollback to savepoint ${name}`))
      yield* ask(exec(`release savepoint ${name}`))
    } catch {
      // The transaction is aborted: the first error says why.
    }
    throw error
  }
}

/** `savepoint` for a driver whose statements answer promises, around work that does. @internal */
export function inSavepoint<T>(exec: (sql: string) => Promise<unknown>, fn: () => Promise<T>): Promise<T> {
  return runAsync(
    savepoint(
      exec,
      (function* () {
        return yield* ask(fn())
      })(),
    ),
  )
}
