/**
 * Rows a careless producer wrote with plain SQL on PostgreSQL, through node-postgres and postgres.js (JOB-18):
 * integers at int4's and bigint's bounds, infinite and far times, attempts below 0 or above the maximum, a
 * jobs_queue row deleted by hand. A row that breaks the table protocol is failed at once with an error naming
 * the column and the value; no row stops its queue, hangs, or makes a reading surface (getJob, watch, the admin
 * API, the CLI, the dashboard) throw; the counts stay right.
 */
import fc from 'fast-check'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import {
  defineQueue,
  enqueueMany,
  getJob,
  inspectJob,
  listJobs,
  queueCounts,
  watch,
  work,
  type PgDatabase,
  type Worker,
} from '../../src/index.js'
import { dashboard } from '../../src/dashboard/index.js'
import { list, show, status } from '../../src/cli/commands.js'
import { openDatabase } from '../../src/cli/open.js'
import { freshPgDb, type TestPgDb } from '../helpers/pg.js'
import { waitFor } from '../helpers/wait.js'

const BIGINT_MAX = '9223372036854775807'
const BIGINT_MIN = '-9223372036854775808'
const INT_MAX = 2 ** 31 - 1

const DRIVERS = ['pg', 'postgres.js'] as const

describe.each(DRIVERS)('%s', (driver) => {
  const on = `[postgres] [${driver}]`
  let t: TestPgDb
  let db: PgDatabase
  const workers: Worker[] = []
  const surfaced: unknown[] = []

  beforeEach(async () => {
    t = await freshPgDb()
    db = driver === 'pg' ? t.db : t.postgresJs().db
    surfaced.length = 0
  })
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 2_000 })))
    await t.drop()
  })

  /** A row as another program writes it: only the columns it cares about, the others at their defaults. */
  const insertRaw = (queue: string, id: string, columns: Record<string, unknown> = {}) => {
    const names = ['queue', 'id', 'value', ...Object.keys(columns)]
    return t.pool.query(`insert into jobs_job (${names.join(', ')}) values (${names.map((_, i) => `$${i + 1}`).join(', ')})`, [
      queue,
      id,
      '{"n": 1}',
      ...Object.values(columns),
    ])
  }
  const rowOf = async (queue: string, id: string) =>
    (
      await t.pool.query<{ state: string; attempts: number; error: string | null }>(
        'select state, attempts, error from jobs_job where queue = $1 and id = $2',
        [queue, id],
      )
    ).rows[0]!
  const recount = async (queue: string) =>
    Object.fromEntries(
      (
        await t.pool.query<{ state: string; n: string }>('select state, count(*) as n from jobs_job where queue = $1 group by state', [
          queue,
        ])
      ).rows.map((r) => [r.state, Number(r.n)]),
    )

  /** Every reading surface answers for each job of `queue` still stored (a worker prunes ended ones), without throwing. */
  async function everySurfaceAnswers(queue: string, all: string[]): Promise<void> {
    const ids = (await t.pool.query<{ id: string }>('select id from jobs_job where queue = $1 and id = any($2)', [queue, all])).rows.map(
      (row) => row.id,
    )
    for (const id of ids) {
      const snapshot = await getJob(db, queue, id)
      expect(snapshot, id).toBeDefined()
      const watched = watch(db, queue, id)
      expect((await watched.next()).value, id).toMatchObject({ id })
      await watched.return()
      expect(await inspectJob(db, queue, id), id).toMatchObject({ id })
    }
    for (const state of [undefined, 'waiting', 'scheduled', 'running', 'done', 'failed'] as const) {
      let page = await listJobs(db, { queue, state, limit: 2 })
      for (let pages = 0; page.next !== null && pages < 20; pages++)
        page = await listJobs(db, { queue, state, limit: 2, cursor: page.next })
    }
    await queueCounts(db, queue)
    const open = await openDatabase({ target: t.url, from: '--db' })
    try {
      expect((await status(open, { positionals: [] })).text).toContain(queue)
      await list(open, { positionals: [], queue })
      for (const id of ids) expect((await show(open, { positionals: [id], queue })).text).toContain(id)
    } finally {
      await open.close()
    }
    const mounted = dashboard(db)
    try {
      const paths = [
        '/',
        `/queues/${queue}`,
        ...['waiting', 'scheduled', 'running', 'done', 'failed'].map((state) => `/queues/${queue}?state=${state}`),
        ...ids.map((id) => `/queues/${queue}/jobs/${encodeURIComponent(id)}`),
      ]
      for (const path of paths) {
        const answer = await mounted.fetch(new Request(`http://127.0.0.1${path}`))
        const body = await answer.text()
        expect(answer.status, `${path}: ${body.slice(0, 300)}`).toBe(200)
      }
    } finally {
      mounted.close()
    }
  }

  test(`JOB-18 ${on} rows at the integers' bounds, with infinite times or bad attempts, fail at once naming the column; none stops the queue or a reader; the others run in claim order`, async () => {
    const q = defineQueue<{ n: number }>('careless-pg', { attempts: 3 })
    // Written before any writer installed the triggers: the install fails it too.
    await insertRaw(q.name, 'early-int-max', { attempts: INT_MAX, max_attempts: INT_MAX })
    await work(db, defineQueue('app-setup'), () => {}).stop()
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ['int-max', { attempts: INT_MAX, max_attempts: INT_MAX }, /^attempts holds 2147483647, not a count of runs that one more run fits/],
      ['negative-attempts', { attempts: -5 }, /^attempts holds -5, not a count of runs/],
      ['no-attempts', { max_attempts: 0 }, /^max_attempts holds 0, not a number of runs/],
      ['negative-max', { max_attempts: -3 }, /^max_attempts holds -3, not a number of runs/],
      ['above-max', { attempts: 7, max_attempts: 5 }, /^attempts holds 7, not a count of runs within max_attempts \(5\)/],
      ['infinity', { run_at: 'infinity' }, /^run_at holds 'infinity', not a time/],
      ['minus-infinity', { state: 'scheduled', run_at: '-infinity' }, /^run_at holds '-infinity', not a time/],
      ['far', { run_at: '290000-01-01 00:00:00+00' }, /^run_at holds '290000-01-01 .*', not a time/],
      ['created-infinity', { created_at: 'infinity' }, /^created_at holds 'infinity', not a time/],
    ]
    for (const [id, columns] of cases) await insertRaw(q.name, id, columns)
    // Due in whole ms, as the engine writes times: `ahead` compares a job's run_at as read, in ms.
    const due = new Date(Date.now() - 1_000)
    await insertRaw(q.name, 'top', { priority: BIGINT_MAX, run_at: due })
    await insertRaw(q.name, 'bottom', { priority: BIGINT_MIN, run_at: due })
    await insertRaw(q.name, 'good', { run_at: due })
    await insertRaw(q.name, 'later-broken')
    await t.pool.query(`update jobs_job set attempts = -1 where id = 'later-broken'`)
    // An ended row may hold anything: it never runs again, and readers show it.
    await insertRaw(q.name, 'ended-odd', {
      state: 'done',
      attempts: INT_MAX,
      max_attempts: -1,
      priority: BIGINT_MIN,
      run_at: 'infinity',
      finished_at: '-infinity',
    })
    const ids = ['early-int-max', ...cases.map(([id]) => id), 'top', 'bottom', 'good', 'later-broken', 'ended-odd']
    await everySurfaceAnswers(q.name, ids)
    const top = await getJob(db, q, 'top')
    expect(top, JSON.stringify(top)).toMatchObject({ state: 'waiting', ahead: 2 })
    // A time written with microseconds is read rounded to the ms, here up: the job is still not ahead of itself.
    const alone = defineQueue('careless-micro')
    await insertRaw(alone.name, 'micro', { run_at: '2020-01-01 00:00:00.0006+00' })
    expect(await getJob(db, alone, 'micro')).toMatchObject({ state: 'waiting', ahead: 0, runAt: new Date('2020-01-01T00:00:00.001Z') })

    const ran: string[] = []
    workers.push(work(db, q, (_value, run) => void ran.push(run.id), { slots: 1, onError: (error) => surfaced.push(error) }))
    await waitFor(async () => (await rowOf(q.name, 'top')).state === 'done', 'the job of the highest priority to run')
    expect(ran).toEqual(['bottom', 'good', 'top'])
    expect(await rowOf(q.name, 'early-int-max')).toMatchObject({
      state: 'failed',
      error: expect.stringMatching(/^attempts holds 2147483647/),
    })
    for (const [id, , error] of cases)
      expect(await rowOf(q.name, id), id).toMatchObject({ state: 'failed', error: expect.stringMatching(error) })
    expect(await rowOf(q.name, 'later-broken')).toMatchObject({
      state: 'failed',
      error: expect.stringMatching(/^attempts holds -1, not a count of runs/),
    })
    expect(surfaced).toEqual([])
    await everySurfaceAnswers(q.name, ids)
    await waitFor(async () => {
      const counts = await queueCounts(db, q)
      const stored = await recount(q.name)
      return (['waiting', 'scheduled', 'running', 'done', 'failed', 'canceled'] as const).every(
        (state) => counts[state] === (stored[state] ?? 0),
      )
    }, 'the counts to equal the jobs')
  })

  test(`JOB-18 ${on} a jobs_queue row deleted by hand leaves the counts right afterwards`, async () => {
    const q = defineQueue<{ n: number }>('deleted-row')
    workers.push(work(db, q, () => {}, { onError: (error) => surfaced.push(error) }))
    await enqueueMany(
      db,
      q,
      Array.from({ length: 7 }, (_, n) => ({ value: { n } })),
    )
    await waitFor(async () => (await queueCounts(db, q)).done === 7, 'seven jobs to be done')
    // Folded into the row (a worker folds once a second), then the row is deleted.
    await waitFor(
      async () => Number((await t.pool.query('select count(*) as n from jobs_count where queue = $1', [q.name])).rows[0].n) === 0,
      'the counts to be folded',
    )
    await t.pool.query('delete from jobs_queue where name = $1', [q.name])
    expect(await queueCounts(db, q)).toMatchObject({ done: 7 })
    await enqueueMany(db, q, [{ value: { n: 8 } }])
    await waitFor(async () => (await queueCounts(db, q)).done === 8, 'the eighth job to be counted done')
    await waitFor(
      async () => Number((await t.pool.query('select count(*) as n from jobs_count where queue = $1', [q.name])).rows[0].n) === 0,
      'the counts to be folded again',
    )
    expect(await queueCounts(db, q)).toMatchObject({ waiting: 0, running: 0, done: 8 })
    expect(surfaced).toEqual([])
  })

  test(`JOB-18 ${on} arbitrary rows at the integers' and times' extremes: every reading surface answers, and a worker brings every row it could claim to an end`, async () => {
    const q = defineQueue<{ n: number }>('careless-rows-pg', { attempts: 3, backoff: { initial: 1, max: 1 } })
    await work(db, defineQueue('app-setup'), () => {}).stop()
    const int = fc.oneof(fc.integer({ min: -3, max: 6 }), fc.constantFrom(INT_MAX, -INT_MAX - 1, INT_MAX - 1))
    const time = fc.oneof(
      { arbitrary: fc.constant('now()'), weight: 4 },
      {
        arbitrary: fc.constantFrom(
          "'infinity'",
          "'-infinity'",
          "'290000-01-01Z'",
          "'4713-01-01 BC'",
          "now() + interval '1000 years'",
          "'1970-01-01Z'",
        ),
        weight: 1,
      },
    )
    const row = fc.record({
      state: fc.constantFrom('waiting', 'waiting', 'scheduled', 'running', 'done', 'failed', 'canceled'),
      priority: fc.oneof(fc.integer({ min: -2, max: 2 }).map(String), fc.constantFrom(BIGINT_MAX, BIGINT_MIN, '9007199254740993')),
      attempts: int,
      max_attempts: int,
      run_at: time,
      created_at: time,
      finished_at: fc.oneof(fc.constant('null'), time),
    })
    let round = 0
    await fc.assert(
      fc.asyncProperty(fc.array(row, { minLength: 1, maxLength: 6 }), async (rows) => {
        const prefix = `r${round++}-`
        const ids = rows.map((_, i) => `${prefix}${i}`)
        for (const [i, r] of rows.entries()) {
          await t.pool.query(
            `insert into jobs_job (queue, id, value, state, priority, attempts, max_attempts, run_at, created_at, finished_at)
             values ($1, $2, '{"n": 1}', $3, $4::bigint, $5, $6, ${r.run_at}, ${r.created_at}, ${r.finished_at})`,
            [q.name, ids[i], r.state, r.priority, r.attempts, r.max_attempts],
          )
        }
        await everySurfaceAnswers(q.name, ids)
        const rowsWorker = work(db, q, () => {}, { pollInterval: '5ms', onError: (error) => surfaced.push(error) })
        try {
          await waitFor(
            async () => {
              const states = await t.pool.query<{ state: string; due: boolean }>(
                `select state, run_at <= now() + interval '1 minute' as due from jobs_job where id = any($1)`,
                [ids],
              )
              return states.rows.every((s) => s.state !== 'running' && !(['waiting', 'scheduled'].includes(s.state) && s.due))
            },
            `rows ${JSON.stringify(rows)} to settle`,
            10_000,
          )
        } finally {
          await rowsWorker.stop({ timeout: '2s' })
        }
        expect(surfaced).toEqual([])
        const failed = await t.pool.query<{ id: string; error: string }>(
          `select id, error from jobs_job where id = any($1) and state = 'failed' and error like '%breaks the table protocol'`,
          [ids],
        )
        for (const f of failed.rows) expect(f.error).toMatch(/^(run_at|created_at|attempts|max_attempts) holds /)
        await everySurfaceAnswers(q.name, ids)
      }),
      { numRuns: 15, endOnFailure: true },
    )
  }, 240_000)
})
