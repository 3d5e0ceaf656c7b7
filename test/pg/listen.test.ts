/**
 * Wake-ups on PostgreSQL: a worker learns of jobs that another process adds by LISTEN/NOTIFY, on a
 * connection of its pool kept for it, not by its poll; `listen: false` polls instead; and a listening
 * connection that is killed is made anew, and what was added meanwhile is found.
 */
import { afterEach, expect, test } from 'vitest'
import { defineQueue, enqueue, watch, work, type Worker } from '../../src/index.js'
import { crashes } from '../fixtures/contract-queues.js'
import { cpuWait, serverPids } from '../helpers/load.js'
import { eachFreshPgDb } from '../helpers/pg.js'
import { killChildren, STARTUP_MS, started, startFixture } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

const t = eachFreshPgDb()
const workers: Worker[] = []
afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
  killChildren()
})

/** How long an add from the other process, or a run of it, may take before a wait for it fails: a loaded machine's hang guard. */
const STEP_MS = 20_000

/**
 * Starts a process of its own that adds a job to `crashes` for each of `ids`, in turn, each when `add` is called;
 * `add` answers when the add has committed (performance.now()). Started once, before any add is timed: a process's
 * start takes many seconds on a loaded machine.
 */
async function startProducer(ids: readonly string[]): Promise<{ add(): Promise<number> }> {
  const producer = startFixture('contract-child.ts', ['enqueue-on-signal', t.url, ...ids])
  await started(producer, 'ready', 'the producer process to start')
  let next = 0
  return {
    async add() {
      const id = ids[next++]!
      producer.process.kill('SIGUSR2')
      await waitFor(() => producer.output().includes(`added ${id}\n`), `the child to add ${id}`, STEP_MS)
      return performance.now()
    },
  }
}

/** The server's processes of this test's database, for a count of how long they wait for a CPU (helpers/load.ts). */
const server = () => serverPids(async (sql) => (await t.pool.query(sql)).rows)

test(
  "JOB-20 [postgres] a worker that polls once an hour picks up jobs another process adds within moments: the add's NOTIFY wakes it",
  async () => {
    const started = new Map<string, number>()
    const ids = Array.from({ length: 8 }, (_, i) => `n${i}`)
    const producer = await startProducer(ids)
    workers.push(work(t.db, crashes, (_value, run) => void started.set(run.id, performance.now()), { pollInterval: '1h' }))
    // The worker's maintenance pass looks for work every second too, at a moment unrelated to each add: it would
    // pick an add up after 0–1,000 ms, so eight adds all picked up within 600 ms (1 chance in 60 by the passes
    // alone) are the notices' doing, with room for a busy machine's delays. The time this process and the server's
    // processes waited for a CPU meanwhile is the machine's load, not the worker's: it is not counted in the 600 ms.
    for (const id of ids) {
      const pids = [process.pid, ...(await server())]
      const added = await producer.add()
      const load = cpuWait(pids)
      const at = await waitFor(() => started.get(id), `job ${id} to start`, STEP_MS)
      const waited = load.ms()
      expect(
        at - added - waited,
        `${id} started ${Math.round(at - added)} ms after its add; ${Math.round(waited)} ms waiting for a CPU`,
      ).toBeLessThan(600)
    }
  },
  STARTUP_MS + 8 * 2 * STEP_MS,
)

test(
  "JOB-20 [postgres] with listen: false a worker finds other processes' jobs by its poll, and holds no listening connection",
  async () => {
    const started = new Set<string>()
    const producer = await startProducer(['polled'])
    workers.push(work(t.db, crashes, (_value, run) => void started.add(run.id), { pollInterval: '20ms', listen: false }))
    await producer.add()
    await waitFor(() => started.has('polled'), 'the polled job to start', STEP_MS)
    const listeners = await t.pool.query(
      `select count(*)::int as n from pg_stat_activity where datname = current_database() and query ilike 'listen%'`,
    )
    expect(listeners.rows[0].n).toBe(0)
  },
  STARTUP_MS + 2 * STEP_MS,
)

test(
  'JOB-20 [postgres] a listening connection killed by the server is made anew; jobs added meanwhile are found',
  async () => {
    const started = new Set<string>()
    const producer = await startProducer(['while-lost', 'after'])
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
    await producer.add()
    await waitFor(() => started.has('while-lost'), 'the job added while the listener was lost to run', STEP_MS)
    const again = await waitFor(async () => {
      const rows = await listening()
      return rows.length > 0 && rows.every((row) => row.pid !== first!.pid) && rows
    }, 'a new listening connection')
    expect(again).toHaveLength(1)
    // As above: the time the processes waited for a CPU is the machine's load, not counted in the second.
    const pids = [process.pid, ...(await server())]
    const added = await producer.add()
    const load = cpuWait(pids)
    const at = await waitFor(() => (started.has('after') ? performance.now() : undefined), 'the job added after to run', STEP_MS)
    const waited = load.ms()
    expect(
      at - added - waited,
      `started ${Math.round(at - added)} ms after its add; ${Math.round(waited)} ms waiting for a CPU`,
    ).toBeLessThan(1_000)
    expect(t.poolErrors).toEqual([])
  },
  STARTUP_MS + 6 * STEP_MS,
)

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
  // The time this process and the server's processes waited for a CPU is the machine's load: not counted.
  const pids = [process.pid, ...(await server())]
  await t.pool.query(`update jobs_job set state = 'canceled', finished_at = now() where id = 'quiet'`)
  const written = performance.now()
  const load = cpuWait(pids)
  await waitFor(() => states.includes('canceled'), 'the watch to see the plain SQL write', STEP_MS)
  const seenAfter = performance.now() - written
  const waited = load.ms()
  expect(seenAfter - waited, `seen ${Math.round(seenAfter)} ms after the write; ${Math.round(waited)} ms waiting for a CPU`).toBeLessThan(
    2_500,
  )
  await following
})
