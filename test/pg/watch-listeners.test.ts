/**
 * A watch on PostgreSQL listens for other processes' changes on a client of the pool, and lets it go when it
 * stops: 1,000 watches one after another, each stopped, leave no listener behind on the pool's clients, no
 * connection on the server, and no MaxListenersExceededWarning, on node-postgres and on postgres.js.
 */
import { afterEach, beforeEach, expect, test } from 'vitest'
import { defineQueue, enqueue, watch, type PgDatabase } from '../../src/index.js'
import { eachFreshPgDb } from '../helpers/pg.js'
import { waitFor } from '../helpers/wait.js'

const t = eachFreshPgDb()
const queue = defineQueue<{ n: number }>('watched')
const WATCHES = 1_000

let warnings: Error[] = []
const onWarning = (warning: Error) => void warnings.push(warning)
beforeEach(() => {
  warnings = []
  process.on('warning', onWarning)
})
afterEach(() => void process.off('warning', onWarning))

/** The pool's clients as node-postgres keeps them: idle and checked out alike. */
function poolClients(): Array<{ listenerCount(event: string): number }> {
  return (t.pool as unknown as { _clients: Array<{ listenerCount(event: string): number }> })._clients
}

/** The server's connections to the test's database that listen, or last listened, for changes. */
async function listeningConnections(): Promise<number> {
  const { rows } = await t.pool.query(
    `select count(*)::int as n from pg_stat_activity where datname = current_database() and query like '%listen "drizzle_jobs"%' and pid <> pg_backend_pid()`,
  )
  return rows[0].n
}

/** Watches the job `WATCHES` times, one watch after another, each stopped after its first snapshot. */
async function watchOneAfterAnother(db: PgDatabase): Promise<void> {
  for (let i = 0; i < WATCHES; i++) {
    const watching = watch(db, queue, 'w')
    const first = await watching.next()
    expect(first.value).toMatchObject({ state: 'waiting' })
    await watching.return()
  }
}

test(`JOB-11 [postgres] ${WATCHES} watches one after another on node-postgres, each stopped, leave no 'error' or 'notification' listener on the pool's clients, and no MaxListenersExceededWarning`, async () => {
  await enqueue(t.db, queue, { n: 1 }, { id: 'w' })
  const counts = () =>
    poolClients().map((client) => ({ error: client.listenerCount('error'), notification: client.listenerCount('notification') }))
  const before = counts()
  await watchOneAfterAnother(t.db)
  // The last watch's UNLISTEN settles, and its client goes back to the pool.
  await waitFor(() => poolClients().every((client) => client.listenerCount('notification') === 0), 'the last listening client to be let go')
  const after = counts()
  // A client idle in the pool has the pool's own 'error' listener and none of the engine's.
  expect(Math.max(...after.map((count) => count.error)), JSON.stringify({ before, after })).toBeLessThanOrEqual(1)
  expect(after.length).toBeLessThanOrEqual(10)
  expect(warnings.filter((warning) => warning.name === 'MaxListenersExceededWarning')).toEqual([])
}, 120_000)

test(`JOB-11 [postgres.js] ${WATCHES} watches one after another, each stopped, leave no listening connection behind and no MaxListenersExceededWarning`, async () => {
  const { db } = t.postgresJs()
  await enqueue(db, queue, { n: 1 }, { id: 'w' })
  await watchOneAfterAnother(db)
  await waitFor(async () => (await listeningConnections()) <= 1, 'at most the one listening connection postgres.js keeps')
  expect(warnings.filter((warning) => warning.name === 'MaxListenersExceededWarning')).toEqual([])
}, 120_000)
