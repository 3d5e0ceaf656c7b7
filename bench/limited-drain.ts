/**
 * A drain on PostgreSQL of a queue under a limit, where a worker may claim nothing ahead of its free slots (a
 * claimed job counts against the limit): 20,000 jobs in 64 groups, one worker of 16 slots, a no-op handler, under
 * `concurrency: 16`, or with `group`, under `{ total: 16, perGroup: 4 }`.
 *
 *   npx tsx bench/limited-drain.ts [concurrency|group] [jobs]
 *
 * DATABASE_URL's server (default postgres://postgres@127.0.0.1:5432/postgres), in a database of its own, dropped at
 * the end. Timed from the worker's start to its last handler's call; the queue's counts are printed after its stop,
 * with the statements the worker sent per job meanwhile (each a round trip to the server: BEGIN and COMMIT among
 * them, counted at node-postgres's Client#query).
 */
import { defineQueue, enqueueMany, queueCounts, work, type QueueOptions } from '../src/index.js'
import pg from 'pg'
import { withPgDatabase } from './lib/pg-database.js'

const policy = process.argv[2] === 'group' ? 'group' : 'concurrency'
const JOBS = Number(process.argv[3] ?? 20_000)
const BATCH = 1_000
const OPTIONS: QueueOptions = policy === 'group' ? { concurrency: { total: 16, perGroup: 4 } } : { concurrency: 16 }

await withPgDatabase(20, async (_pool, db) => {
  const queue = defineQueue('limited', OPTIONS)
  for (let first = 0; first < JOBS; first += BATCH)
    await enqueueMany(
      db,
      queue,
      Array.from({ length: Math.min(BATCH, JOBS - first) }, (_, n) => ({ value: { n: first + n }, group: `g${(first + n) % 64}` })),
    )
  let ran = 0
  let resolve = () => {}
  const all = new Promise<void>((done) => {
    resolve = done
  })
  let statements = 0
  const query = pg.Client.prototype.query
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    statements++
    return (query as (...args: unknown[]) => unknown).apply(this, args)
  } as typeof query
  const started = performance.now()
  const worker = work(
    db,
    queue,
    async () => {
      if (++ran === JOBS) resolve()
    },
    { slots: 16 },
  )
  await all
  const ms = performance.now() - started
  const sent = statements
  pg.Client.prototype.query = query
  await worker.stop()
  const counts = await queueCounts(db, 'limited')
  console.log(
    `${policy}: ${Math.round((JOBS / ms) * 1_000).toLocaleString('en')} jobs/s; ${(sent / JOBS).toFixed(2)} statements per job; done ${counts.done} of ${JOBS}`,
  )
})
