/**
 * Claims ahead of the free slots (docs/api.md, "How a worker writes"): a worker whose runs are short next to its
 * transactions claims jobs ahead, starts them in claim order (JOB-17), hands back the ones it had not started when
 * it stops (JOB-15) and drops unstarted the ones canceled meanwhile; a limited queue never claims ahead (JOB-07).
 * Once per dialect.
 */
import { describe, expect, test } from 'vitest'
import pg from 'pg'
import { cancel, defineQueue, enqueue, enqueueMany, work } from '../src/index.js'
import { DIALECTS, eachContractDb, type ContractDb } from './helpers/dialects.js'
import { waitFor } from './helpers/wait.js'

async function inState(t: ContractDb, queue: string, state: string): Promise<Array<{ id: string; attempts: number }>> {
  return t.query(`select id, attempts from jobs_job where queue = $1 and state = $2 order by seq`, queue, state)
}

/** The ids of the running jobs whose handler has not started: claimed ahead. */
async function unstarted(t: ContractDb, queue: string, started: readonly string[]): Promise<string[]> {
  const before = new Set(started)
  return (await inState(t, queue, 'running')).map((job) => job.id).filter((id) => !before.has(id))
}

/** A gate a handler waits on until the test opens it. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void
  const wait = new Promise<void>((resolve) => (open = resolve))
  return { wait, open }
}

const ids = (count: number) => Array.from({ length: count }, (_, n) => `job-${String(n).padStart(3, '0')}`)

describe.each(DIALECTS)('%s', (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`

  test(`JOB-15 ${on} a worker of one slot whose runs are short claims ahead, starts those jobs in claim order, and a stop hands back the ones not started, their attempts refunded`, async () => {
    const queue = defineQueue<{ n: number }>('ahead')
    const all = ids(300)
    await enqueueMany(
      t.db,
      queue,
      all.map((id, n) => ({ id, value: { n } })),
    )
    const started: string[] = []
    const held = gate()
    const worker = work(
      t.db,
      queue,
      async (_value, run) => {
        started.push(run.id)
        // Short runs first, so that the worker learns to claim ahead; then one that waits while jobs are held.
        if (started.length === 200) await held.wait
      },
      { slots: 1, pollInterval: '10ms' },
    )
    workers.push(worker)
    await waitFor(() => started.length === 200, 'the first 200 runs')
    // One slot, one run under way: a running job that never started was claimed ahead and waits in the worker
    // (others are runs that ended, their ends not yet written).
    await waitFor(async () => (await unstarted(t, 'ahead', started)).length > 0, 'jobs claimed ahead of the slot')
    const ahead = await unstarted(t, 'ahead', started)
    const stopping = worker.stop()
    held.open()
    await stopping
    expect(started).toEqual(all.slice(0, started.length))
    for (const id of ahead) expect(started).not.toContain(id)
    const waiting = await inState(t, 'ahead', 'waiting')
    expect(waiting.map((job) => job.id)).toEqual(all.slice(started.length))
    expect(waiting.every((job) => job.attempts === 0)).toBe(true)
    expect((await inState(t, 'ahead', 'done')).length).toBe(started.length)
    expect(await t.held()).toBe(0)
    // The jobs handed back run as their first attempt once a worker takes them.
    const attempts: number[] = []
    workers.push(work(t.db, queue, (_value, run) => void attempts.push(run.attempt), { slots: 4, pollInterval: '10ms' }))
    await waitFor(async () => (await inState(t, 'ahead', 'done')).length === 300, 'every job to be done')
    expect(new Set(attempts)).toEqual(new Set([1]))
  })

  test(`JOB-15 ${on} a job canceled while it waits claimed ahead is dropped unstarted, and the rest run`, async () => {
    const queue = defineQueue<{ n: number }>('ahead-cancel')
    const all = ids(300)
    await enqueueMany(
      t.db,
      queue,
      all.map((id, n) => ({ id, value: { n } })),
    )
    const started: string[] = []
    const held = gate()
    workers.push(
      work(
        t.db,
        queue,
        async (_value, run) => {
          started.push(run.id)
          if (started.length === 200) await held.wait
        },
        { slots: 1, pollInterval: '10ms' },
      ),
    )
    await waitFor(() => started.length === 200, 'the first 200 runs')
    await waitFor(async () => (await unstarted(t, 'ahead-cancel', started)).length > 0, 'jobs claimed ahead of the slot')
    const [victim] = await unstarted(t, 'ahead-cancel', started)
    expect(await cancel(t.db, queue, victim!)).toBe(true)
    // The worker hears of the cancel (in this process at once, by its poll otherwise) before the slot frees.
    await new Promise((resolve) => setTimeout(resolve, 200))
    held.open()
    await waitFor(async () => (await inState(t, 'ahead-cancel', 'done')).length === 299, 'every other job to be done')
    expect(started).not.toContain(victim)
    expect((await t.job('ahead-cancel', victim!))?.state).toBe('canceled')
    expect(await t.held()).toBe(0)
  })

  test(`JOB-07 ${on} a queue with a concurrency never claims ahead: its running jobs never outnumber the worker's slot, though the limit would allow more`, async () => {
    const queue = defineQueue<{ n: number }>('ahead-limited', { concurrency: 4 })
    await enqueueMany(
      t.db,
      queue,
      Array.from({ length: 400 }, (_, n) => ({ value: { n } })),
    )
    let done = 0
    let most = 0
    const worker = work(t.db, queue, () => void done++, { slots: 1, pollInterval: '10ms' })
    workers.push(worker)
    while (done < 400) {
      const [row] = await t.query<{ n: number | string }>(
        `select count(*) as n from jobs_job where queue = 'ahead-limited' and state = 'running'`,
      )
      most = Math.max(most, Number(row!.n))
      await new Promise((resolve) => setTimeout(resolve, 1))
    }
    expect(most).toBe(1)
  })
})

describe('a stop that comes while a claim is under way', () => {
  // Only PostgreSQL lets a claim wait in the middle (on a limited queue's row, locked here); on SQLite a claim runs whole.
  const { t, workers } = eachContractDb('postgres')

  test('JOB-15 [postgres] a claim that commits after the worker began to stop starts nothing: its job goes back unstarted, its attempt refunded', async () => {
    const queue = defineQueue<{ n: number }>('stop-mid-claim', { concurrency: 1 })
    const started: string[] = []
    const worker = work(t.db, queue, (_value, run) => void started.push(run.id), { slots: 1, pollInterval: '10ms' })
    workers.push(worker)
    await waitFor(
      async () => (await t.query(`select 1 from jobs_queue where name = 'stop-mid-claim' and limits_set_at is not null`)).length === 1,
      'the worker to store its limits',
    )
    const locker = new pg.Client({ connectionString: t.address })
    await locker.connect()
    try {
      await locker.query('begin')
      await locker.query(`select 1 from jobs_queue where name = 'stop-mid-claim' for update`)
      // The job is added only now, so that no claim can take it before the queue's row is locked (a job due later
      // could fall due first on a loaded machine): the worker's claim waits for the row.
      await enqueue(t.db, queue, { n: 1 }, { id: 'late' })
      await waitFor(
        async () =>
          (await locker.query(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`))
            .rowCount === 1,
        'the claim to wait for the lock',
        10_000,
      )
      const stopping = worker.stop()
      await locker.query('commit')
      await stopping
    } finally {
      await locker.end()
    }
    expect(started).toEqual([])
    // Back as it was claimed: in the state it was added in, its attempt refunded.
    expect(await t.job('stop-mid-claim', 'late')).toMatchObject({ state: 'waiting', attempts: 0 })
    expect(await t.held()).toBe(0)
  })
})
