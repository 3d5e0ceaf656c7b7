/**
 * Progress notices on PostgreSQL (JOB-12): what the server carries, read on a LISTEN connection of the test's
 * own as any program would: several runs' values share a notice, none reaches 8,000 bytes, each run's latest
 * value goes, and nothing is sent for a run before it sets progress; and a watcher's listening, killed, is made
 * anew without losing a value.
 */
import pg from 'pg'
import { afterEach, expect, test } from 'vitest'
import { defineQueue, enqueue, enqueueMany, watch, work, type Worker } from '../../src/index.js'
import { MAX_PROGRESS_BYTES } from '../../src/limits.js'
import { followed, SIGNAL_TABLE } from '../fixtures/contract-queues.js'
import { eachFreshPgDb } from '../helpers/pg.js'
import { killChildren, STARTUP_MS, started, startFixture } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

const t = eachFreshPgDb()
const workers: Worker[] = []
const clients: pg.Client[] = []
afterEach(async () => {
  killChildren()
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
  await Promise.all(clients.splice(0).map((client) => client.end()))
})

/** Every progress notice the server delivers from now on. */
async function listenForProgress(): Promise<string[]> {
  const client = new pg.Client({ connectionString: t.url })
  client.on('error', () => {})
  clients.push(client)
  await client.connect()
  const payloads: string[] = []
  client.on('notification', (message) => {
    if (message.channel === 'drizzle_jobs_progress') payloads.push(message.payload ?? '')
  })
  await client.query('listen drizzle_jobs_progress')
  return payloads
}

/** The latest value of each run the payloads carry, by the job's seq, with how many values of it came. */
function latestByJob(payloads: string[]): Map<number, { value: unknown; n: number; lines: number }> {
  const runs = new Map<number, { value: unknown; n: number; lines: number }>()
  for (const payload of payloads) {
    for (const line of payload.split('\n')) {
      const [n, key, json] = line.split('\t') as [string, string, string]
      const seq = Number((JSON.parse(key) as string).split('\u0000')[1])
      const seen = runs.get(seq)
      if (!seen || Number(n) > seen.n) runs.set(seq, { value: JSON.parse(json), n: Number(n), lines: (seen?.lines ?? 0) + 1 })
      else seen.lines++
    }
  }
  return runs
}

test('JOB-12 [postgres] the values of many runs share notices, none reaching 8,000 bytes, and the latest value of each run goes', async () => {
  const payloads = await listenForProgress()
  const q = defineQueue<number>('many')
  const runs = 60
  await enqueueMany(
    t.db,
    q,
    Array.from({ length: runs }, (_, i) => ({ value: i })),
  )
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  let started = 0
  // Half the runs set progress near the 4 KiB cap, half a small value; each sets three values at once, of which the last counts.
  const big = (i: number, step: number) => ({ i, step, pad: 'x'.repeat(MAX_PROGRESS_BYTES - 40) })
  workers.push(
    work(
      t.db,
      q,
      async (i, run) => {
        started++
        for (let step = 1; step <= 3; step++) run.setProgress(i % 2 === 0 ? big(i, step) : { i, step })
        await released
      },
      { slots: runs },
    ),
  )
  await waitFor(() => started === runs, 'every run to start')
  await waitFor(
    () =>
      latestByJob(payloads).size === runs && [...latestByJob(payloads).values()].every((run) => (run.value as { step: number }).step === 3),
    'the last value of every run',
  )
  for (const payload of payloads) expect(Buffer.byteLength(payload)).toBeLessThan(8_000)
  // Packed: fewer notices than runs (two big values never fit one notice; small ones fill the room they leave).
  expect(payloads.length).toBeLessThan(runs)
  expect(payloads.some((payload) => payload.split('\n').length > 1)).toBe(true)
  // Coalesced: the three values each run set in one turn went as one.
  for (const run of latestByJob(payloads).values()) expect(run.lines).toBe(1)
  release()
})

test('JOB-12 [postgres] a run that sets no progress sends no notice', async () => {
  const payloads = await listenForProgress()
  const q = defineQueue<number>('quiet')
  await enqueueMany(
    t.db,
    q,
    Array.from({ length: 20 }, (_, i) => ({ value: i })),
  )
  let done = 0
  workers.push(work(t.db, q, () => void done++, { slots: 8 }))
  await waitFor(() => done === 20, 'every run to end')
  // A notice sent at the last end would have arrived by the time a later one does.
  const marker = new pg.Client({ connectionString: t.url })
  clients.push(marker)
  await marker.connect()
  await marker.query(`select pg_notify('drizzle_jobs_progress', 'marker')`)
  await waitFor(() => payloads.includes('marker'), 'the marker notice')
  expect(payloads).toEqual(['marker'])
})

test(
  'JOB-12 [postgres] a watcher whose listening connection is killed listens anew, asks again, and gets the progress set meanwhile',
  async () => {
    await t.pool.query(SIGNAL_TABLE)
    await enqueue(t.db, followed, { n: 1 }, { id: 'w' })
    const child = startFixture('contract-child.ts', ['work', t.url, 'progress'])
    await started(child, 'working', 'the worker process to start')
    const seen: string[] = []
    const following = (async () => {
      for await (const snapshot of watch(t.db, followed, 'w')) {
        seen.push(`${snapshot.state} ${(snapshot.progress as { step?: string } | null)?.step ?? ''}`.trim())
      }
    })()
    await waitFor(() => seen.includes('running'), 'the run to start')
    const listening = `select pid from pg_stat_activity where datname = current_database() and query = 'listen "drizzle_jobs_progress"'`
    await waitFor(async () => (await t.pool.query(listening)).rows.length === 1, 'this process to listen for progress')
    await t.pool.query(`select pg_terminate_backend(pid) from (${listening}) l`)
    // The value is set while the listening is lost or being made anew: the ask that follows the new LISTEN brings it.
    await t.pool.query(`insert into signal (name) values ('think1')`)
    await waitFor(() => seen.includes('running thinking'), 'the progress set meanwhile', 20_000)
    await t.pool.query(`insert into signal (name) values ('finish1')`)
    await waitFor(() => seen.includes('scheduled'), 'the run to end')
    await t.pool.query(`update jobs_job set state = 'canceled', finished_at = now() where id = 'w'`)
    await t.pool.query(`select pg_notify('drizzle_jobs', 'other:followed')`)
    await following
    killChildren()
  },
  STARTUP_MS + 120_000,
)
