import { afterEach, expect, test } from 'vitest'
import { defineQueue, enqueueMany } from '../src/index.js'
import { freshDb, removeTempDirs, type TestDb } from './helpers/db.js'
import { killChildren, STARTUP_MS, started, startFixture, type Child } from './helpers/processes.js'
import { waitFor } from './helpers/wait.js'

let t: TestDb | undefined
afterEach(() => {
  killChildren()
  t?.close()
  removeTempDirs()
})

test(
  'JOB-07 concurrency and perGroup hold across every worker of every process, and are reached',
  async () => {
    t = freshDb()
    t.client.exec('create table gauge (name text primary key, now integer not null, high integer not null)')
    t.client.exec('create table ran_by (pid integer primary key)')
    const limited = defineQueue<{ n: number }>('limited', { concurrency: { total: 3, perGroup: 1 } })
    // One slot per process: three runs at once needs three processes running at once.
    const workers: Child[] = []
    for (let i = 0; i < 4; i++) workers.push(startFixture('contract-child.ts', ['work', t.file, 'overlap', '1']))
    await started(workers, 'working', 'the four worker processes to start')
    // 6 groups of 10 jobs: enough that three groups always have work, so the total cap is what binds.
    enqueueMany(
      t.db,
      limited,
      Array.from({ length: 60 }, (_, n) => ({ value: { n }, group: `g${n % 6}` })),
    )
    const done = () => (t!.client.prepare(`select count(*) as n from jobs_job where state = 'done'`).get() as { n: number }).n
    await waitFor(() => done() === 60, 'all 60 jobs to be done', 45_000)
    for (const worker of workers) worker.process.kill('SIGKILL')

    const gauges = t.client.prepare('select name, now, high from gauge order by name').all() as {
      name: string
      now: number
      high: number
    }[]
    const total = gauges.find((gauge) => gauge.name === 'total')!
    expect(total.high).toBe(3)
    const groups = gauges.filter((gauge) => gauge.name.startsWith('group:'))
    expect(groups).toHaveLength(6)
    for (const group of groups) expect(group.high).toBe(1)
    // At least three processes took part: the limit is held by the database, not by one process.
    expect((t.client.prepare('select count(*) as n from ran_by').get() as { n: number }).n).toBeGreaterThanOrEqual(3)
    expect(t.client.prepare('select count(*) as n from jobs_job where owner is not null').get()).toEqual({ n: 0 })
  },
  STARTUP_MS + 60_000,
)
