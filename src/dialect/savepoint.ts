/**
 * A savepoint of the transaction under way, the same on every driver of both dialects: the drivers whose
 * connection may be the app's transaction (node-postgres, PGlite, libsql) write the engine's work in one.
 */

/** Numbers the savepoints of this process, so that no two have one name. */
let savepoints = 0

/**
 * Runs `fn` inside a savepoint, through `exec` (one statement on the transaction's connection): RELEASE when it
 * answers, ROLLBACK TO and RELEASE when it throws. A rollback that fails leaves the transaction aborted: the caller's
 * error, thrown as it is, says why it failed first. @internal
 */
export async function inSavepoint<T>(exec: (sql: string) => Promise<unknown>, fn: () => Promise<T>): Promise<T> {
  const name = `drizzle_jobs_${++savepoints}`
  await exec(`savepoint ${name}`)
  try {
    const value = await fn()
    await exec(`release savepoint ${name}`)
    return value
  } catch (error) {
    await exec(`rollback to savepoint ${name}`)
      .then(() => exec(`release savepoint ${name}`))
      .catch(() => {})
    throw error
  }
}
