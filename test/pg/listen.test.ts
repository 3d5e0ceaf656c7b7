/**
 * Wake-ups on PostgreSQL: a worker learns of jobs that another process adds by LISTEN/NOTIFY, on a
 * connection of its pool kept for it, not by its poll; `listen: false` polls instead; and a listening
 * connection that is killed is made anew, and what was added meanwhile is found.
 */
import { afterEach, expect, test } from 'vitest'
import { defineQueue, enqueue, watch, work, type Worker } from '../../src/index.js'
import { crashes } from '../fixtures/contract-queues.js'
import { eachFreshPgDb } from '../helpers/pg.js'
import { killChildren, startFixture } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

const t = eachFreshPgDb()
const workers: Worker[] = []
afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
  killChildren()
})

/** Adds a job to `crashes` from a child process of its own; answers when its add has committed. */
async function addFromAnotherProcess(id: string): Promise<number> {
  const producer = startFixture('contract-child.ts', ['enqueue', t.url, id])
  await waitFor(() => producer.output().includes('added'), `the child to add ${id}`)
  return performance.now()
}

test("JOB-20 [postgres] a worker that polls once an hour picks up jobs another process adds within moments: the add's NOTIFY wakes it", async () => {
  const started = new Map<string, number>()
  workers.push(work(t.db, crashes, (_value, run) => void started.set(run.id, performance.now()), { pollInterval: '1h' }))
  // The worker's maintenance pass looks for work every second too, at a moment unrelated to each add: it would
  // pick an add up after 0–1,000 ms, so eight adds all picked up within 600 ms (1 chance in 60 by the passes
  // alone) are the notices' doing, with room for a busy machine's delays.
  for (let i = 0; i < 8; i++) {
    const added = await addFromAnotherProcess(`n${i}`)
    const at = await waitFor(() => started.get(`n${i}`), `job n${i} to start`, 5_000)
    expect(at - added).toBeLessThan(600)
  }
})

test("JOB-20 [postgres] with listen: false a worker finds other processes' jobs by its poll, and holds no listening connection", async () => {
  const started = new Set<string>()
  workers.push(work(t.db, crashes, (_value, run) => void started.add(run.id), { pollInterval: '20ms', listen: false }))
  await addFromAnotherProcess('polled')
  await waitFor(() => started.has('polled'), 'the polled job to start', 5_000)
  const listeners = await t.pool.query(
    `select count(*)::int as n from pg_stat_activity where datname = current_database() and query ilike 'listen%'`,
  )
  expect(listeners.rows[0].n).toBe(0)
})

test('JOB-20 [postgres] a listening connection killed by the server is made anew; jobs added meanwhile are found', async () => {
  const started = new Set<string>()
  workers.push(work(t.db, crashes, (_value, run) => void started.add(run.id), { pollInterval: '1h' }))
  const listening = async () =>
    (
      await t.pool.query(
        `select pid from pg_stat_activity where datname = current_database() and query ilike 'listen%' and pid <> pg_backend_pid()`,
      )
    ).rows as { pid: number }[]
  const [first] = await waitFor(async () => {
    const rows = await listening()
    return rows.length > 0 && rows
  }, 'the worker to listen')
  await t.pool.query('select pg_terminate_backend($1)', [first!.pid])
  await addFromAnotherProcess('while-lost')
  await waitFor(() => started.has('while-lost'), 'the job added while the listener was lost to run', 10_000)
  const again = await waitFor(async () => {
    const rows = await listening()
    return rows.length > 0 && rows.every((row) => row.pid !== first!.pid) && rows
  }, 'a new listening connection')
  expect(again).toHaveLength(1)
  const added = await addFromAnotherProcess('after')
  const at = await waitFor(() => (started.has('after') ? performance.now() : undefined), 'the job added after to run', 5_000)
  expect(at - added).toBeLessThan(1_000)
  expect(t.poolErrors).toEqual([])
})

test('JOB-18 [postgres] a watch sees a change that another program wrote with plain SQL and no notice, within about a second', async () => {
  await enqueue(t.db, crashes, { n: 1 }, { id: 'quiet' })
  const states: string[] = []
  const following = (async () => {
    for await (const job of watch(t.db, crashes, 'quiet')) states.push(job.state)
  })()
  // A worker elsewhere on this database listens, as in an app: the notices alone would never tell of this write. It
  // works another queue: a worker of this one could run the job to its end before the write, and the watch would end.
  workers.push(work(t.db, defineQueue('listening-elsewhere'), () => {}, { pollInterval: '1h' }))
  await waitFor(() => states.length > 0, 'the first snapshot')
  await t.pool.query(`update jobs_job set state = 'canceled', finished_at = now() where id = 'quiet'`)
  const written = performance.now()
  await waitFor(() => states.includes('canceled'), 'the watch to see the plain SQL write', 5_000)
  expect(performance.now() - written).toBeLessThan(2_500)
  await following
})
