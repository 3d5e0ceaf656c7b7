/**
 * Rows a careless producer in another language wrote with plain SQL: a value
 * that is not JSON, an unknown state, a negative run_at, huge priorities. The
 * worker must fail a job it cannot run with an error that says why, run the
 * ones it can, and go on with the others; nothing the producer wrote may stop
 * the queue or the worker.
 */
import { afterEach, beforeEach, expect, test } from 'vitest'
import { defineQueue, enqueue, work, type Worker } from '../../src/index.js'
import { freshDb, removeTempDirs, type TestDb } from '../helpers/db.js'
import { waitFor } from './processes.js'

const queue = defineQueue<{ n: number }>('careless', { attempts: 2, backoff: { initial: '10ms' } })

let t: TestDb
let worker: Worker | undefined
let producer: ReturnType<TestDb['reopen']>['client']
const ran: string[] = []
const surfaced: unknown[] = []

beforeEach(() => {
  t = freshDb()
  producer = t.reopen().client
  ran.length = 0
  surfaced.length = 0
})
afterEach(async () => {
  await worker?.stop({ timeout: '5s' })
  worker = undefined
  t.close()
  removeTempDirs()
})

/** Inserts a row as a producer in another language would: plain SQL, every column it cares about by hand. */
function insertRaw(row: { id: string; value: string; state?: string; runAt?: number | bigint; priority?: number | bigint }): void {
  producer
    .prepare(`insert into jobs_job (queue, id, value, state, priority, max_attempts, run_at, created_at) values (?, ?, ?, ?, ?, 2, ?, ?)`)
    .run(queue.name, row.id, row.value, row.state ?? 'waiting', row.priority ?? 0, row.runAt ?? Date.now(), Date.now())
}

function startWorker(): void {
  worker = work(
    t.db,
    queue,
    (value, run) => {
      ran.push(run.id)
      return { double: value.n * 2 }
    },
    { slots: 1, onError: (error) => surfaced.push(error) },
  )
}

const jobOf = (id: string) => t.client.prepare(`select state, attempts, error, result from jobs_job where queue = ? and id = ?`).get(queue.name, id) as { state: string; attempts: number; error: string | null; result: string | null }

test('JOB-13 a value that is not JSON fails its job at once with an error saying so; a negative run_at runs; huge priorities run in their order; the others go on', async () => {
  enqueue(t.db, queue, { n: 1 }, { id: 'good-1' })
  insertRaw({ id: 'not-json', value: "{'n': 1}" })
  insertRaw({ id: 'empty', value: '' })
  insertRaw({ id: 'long-ago', value: '{"n": 3}', runAt: -5 })
  insertRaw({ id: 'last', value: '{"n": 4}', priority: 9223372036854775807n })
  insertRaw({ id: 'first', value: '{"n": 5}', priority: -9223372036854775808n })
  insertRaw({ id: 'float-priority', value: '{"n": 6}', priority: 1e300 })
  enqueue(t.db, queue, { n: 2 }, { id: 'good-2' })
  startWorker()

  const ids = ['good-1', 'not-json', 'empty', 'long-ago', 'last', 'first', 'float-priority', 'good-2']
  await waitFor('every row to end', () => ids.every((id) => ['done', 'failed'].includes(jobOf(id).state)), 20_000)
  for (const id of ['not-json', 'empty']) {
    expect(jobOf(id)).toMatchObject({ state: 'failed', attempts: 1 })
    expect(jobOf(id).error).toMatch(/not JSON/)
  }
  for (const [id, n] of [['good-1', 1], ['good-2', 2], ['long-ago', 3], ['last', 4], ['first', 5], ['float-priority', 6]] as const) {
    expect(jobOf(id)).toEqual({ state: 'done', attempts: 1, error: null, result: JSON.stringify({ double: n * 2 }) })
  }
  expect(ran).toEqual(['first', 'long-ago', 'good-1', 'good-2', 'last', 'float-priority'])
  expect(surfaced).toEqual([])
  expect(t.client.prepare(`select waiting, scheduled, running, done, failed from jobs_queue where name = ?`).get(queue.name)).toEqual({ waiting: 0, scheduled: 0, running: 0, done: 6, failed: 2 })
  expect(t.client.prepare('pragma integrity_check').pluck().get()).toBe('ok')
})

test('JOB-13 a row in an unknown state is failed by the worker with an error naming the state, and the others go on', async () => {
  insertRaw({ id: 'pending', value: '{"n": 1}', state: 'pending' })
  insertRaw({ id: 'shouting', value: '{"n": 2}', state: 'WAITING' })
  enqueue(t.db, queue, { n: 3 }, { id: 'good' })
  startWorker()

  await waitFor('the good job to be done', () => jobOf('good').state === 'done', 20_000)
  await waitFor('the rows in unknown states to be failed', () => jobOf('pending').state === 'failed' && jobOf('shouting').state === 'failed', 5_000)
  expect(jobOf('pending').error).toMatch(/pending/)
  expect(jobOf('shouting').error).toMatch(/WAITING/)
  expect(ran).toEqual(['good'])
  expect(surfaced).toEqual([])
})
