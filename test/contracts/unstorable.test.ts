/**
 * Text and numbers the databases cannot store, decided by the package before anything is sent (JOB-13), on
 * SQLite, on PostgreSQL through node-postgres and through postgres.js: a value, a step's answer or a result
 * holding a lone surrogate is refused with INVALID_VALUE; an error or a stack holding U+0000 or a lone
 * surrogate is kept with U+FFFD in their place, so that no run's end ever fails for its content; options
 * past what the tables store are refused with INVALID_OPTION; a transaction PostgreSQL already aborted is
 * named as such. One contract on both databases: what PostgreSQL refuses, SQLite refuses too.
 */
import { sql } from 'drizzle-orm'
import type { NodePgDatabase } from 'drizzle-orm/node-postgres'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import {
  defineQueue,
  enqueue,
  enqueueMany,
  getJob,
  isJobsError,
  schedule,
  work,
  type Json,
  type PgDatabase,
  type Run,
  type SyncDatabase,
  type Worker,
} from '../../src/index.js'
import { MIN_STORED_TIME_MS } from '../../src/limits.js'
import { freshDb, removeTempDirs, type TestDb } from '../helpers/db.js'
import { freshPgDb, type TestPgDb } from '../helpers/pg.js'
import { waitFor } from '../helpers/wait.js'

const DRIVERS = ['sqlite', 'pg', 'postgres.js'] as const

/** U+D800 alone: half of a UTF-16 pair, which PostgreSQL's jsonb refuses. */
const LONE = '\uD800'

async function caught(call: () => unknown): Promise<unknown> {
  try {
    await call()
  } catch (error) {
    return error
  }
  return undefined
}

function expectCode(error: unknown, code: string, message?: RegExp): void {
  expect(isJobsError(error, code as never), String(error)).toBe(true)
  if (message) expect((error as Error).message).toMatch(message)
}

describe.each(DRIVERS)('%s', (driver) => {
  const on = driver === 'sqlite' ? '[sqlite]' : `[postgres] [${driver}]`
  let sqlite: TestDb | undefined
  let pg: TestPgDb | undefined
  let db: SyncDatabase | PgDatabase
  const workers: Worker[] = []

  beforeEach(async () => {
    if (driver === 'sqlite') {
      sqlite = freshDb()
      db = sqlite.db
    } else {
      pg = await freshPgDb()
      db = driver === 'pg' ? pg.db : pg.postgresJs().db
    }
  })
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
    sqlite?.close()
    sqlite = undefined
    removeTempDirs()
    await pg?.drop()
    pg = undefined
  })

  const query = async <T>(text: string, ...params: unknown[]): Promise<T[]> =>
    sqlite ? (sqlite.client.prepare(text.replace(/\$\d+/g, '?')).all(...params) as T[]) : ((await pg!.pool.query(text, params)).rows as T[])
  const ids = async () => (await query<{ id: string }>('select id from jobs_job order by id')).map((row) => row.id)

  /**
   * Makes each call in the app's transaction, then `appWrite`, which adds a job of the app's: the refusals left the
   * transaction usable. Answers what each call threw (undefined where it did not).
   */
  async function inAppTransaction(calls: Array<(tx: never) => unknown>, appWrite: (tx: never) => unknown): Promise<unknown[]> {
    const errors: unknown[] = []
    if (sqlite) {
      sqlite.db.transaction((tx) => {
        for (const call of calls) {
          try {
            call(tx as never)
            errors.push(undefined)
          } catch (error) {
            errors.push(error)
          }
        }
        appWrite(tx as never)
      })
      return errors
    }
    await (db as NodePgDatabase).transaction(async (tx) => {
      for (const call of calls) errors.push(await caught(() => call(tx as never)))
      await appWrite(tx as never)
    })
    return errors
  }

  test(`JOB-13 ${on} a value holding a lone surrogate is refused with INVALID_VALUE naming where, writes nothing, and leaves the caller's transaction usable`, async () => {
    const q = defineQueue<Json>('lone')
    const refusal = (error: unknown) => expectCode(error, 'INVALID_VALUE', /lone surrogate/)
    const refusals = await inAppTransaction(
      [
        (tx) => enqueue(tx, q, { text: `a${LONE}b` }, { id: 'bad' }),
        (tx) => enqueue(tx, q, { [`k${LONE}`]: 1 }, { id: 'bad-key' }),
        (tx) => enqueue(tx, q, '\uDC00', { id: 'bad-low' }),
        (tx) =>
          enqueueMany(tx, q, [
            { value: 1, id: 'one' },
            { value: [LONE], id: 'two' },
          ]),
      ],
      (tx) => enqueue(tx, q, { text: 'kept' }, { id: 'after' }),
    )
    expect(refusals).toHaveLength(4)
    refusals.forEach(refusal)
    expect((refusals[0] as Error).message).toMatch(/^value\.text is a string holding a lone surrogate \(U\+D800 at index 1/)
    refusal(await caught(() => schedule(db, q, 'nightly', { cron: '0 3 * * *', value: { text: LONE } })))
    // A pair is text: kept as given.
    await enqueue(db, q, { text: '\uD83D\uDE00' }, { id: 'pair' })
    expect(await ids()).toEqual(['after', 'pair'])
    expect((await getJob(db, q, 'pair'))?.state).toBe('waiting')
  })

  test(`JOB-13 ${on} a run's end never fails for its content: a result that cannot be stored fails its job with INVALID_VALUE, errors and stacks keep U+FFFD for U+0000 and lone surrogates, a step's answer is refused, and the other jobs of the same write end`, async () => {
    const q = defineQueue<string>('ends', { attempts: 1 })
    const behaviours: Record<string, (run: Run) => unknown> = {
      'bad-result': () => ({ text: `x${LONE}` }),
      'nul-throw': () => {
        throw new Error('before\u0000after')
      },
      'lone-throw': () => {
        throw new Error(`half ${LONE} pair`)
      },
      'nul-string': () => {
        throw 'thrown\u0000text'
      },
      'nul-fail': (run) => run.fail(`failed\u0000with \uDC00 both`),
      'odd-message': () => {
        throw Object.assign(new Error('replaced'), { message: 42 })
      },
      'bad-step': async (run) => {
        const error = await caught(() => run.step('answer', () => `a${LONE}`))
        return isJobsError(error, 'INVALID_VALUE') ? 'step refused' : `step said ${String(error)}`
      },
      good: () => 'fine',
    }
    const surfaced: unknown[] = []
    const started: string[] = []
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    // Every run waits for the others to start, so that their ends are written together.
    workers.push(
      work(
        db as never,
        q,
        async (behaviour, run) => {
          started.push(run.id)
          if (started.length === Object.keys(behaviours).length) release()
          await gate
          return behaviours[behaviour]!(run) as never
        },
        { slots: 10, onError: (error) => surfaced.push(error) },
      ),
    )
    await enqueueMany(
      db as never,
      q,
      Object.keys(behaviours).map((id) => ({ value: id, id })),
    )
    const rows = async () =>
      query<{ id: string; state: string; error: string | null; error_stack: string | null; result: unknown }>(
        'select id, state, error, error_stack, result from jobs_job order by id',
      )
    await waitFor(async () => (await rows()).every((row) => row.state === 'done' || row.state === 'failed'), 'every job to end')
    const byId = Object.fromEntries((await rows()).map((row) => [row.id, row]))
    expect(byId.good).toMatchObject({ state: 'done' })
    expect(byId['bad-step']).toMatchObject({ state: 'done' })
    expect((await getJob(db, q, 'bad-step'))?.result).toBe('step refused')
    expect(byId['bad-result']).toMatchObject({
      state: 'failed',
      result: null,
      error: expect.stringMatching(/^the handler's result\.text is a string holding a lone surrogate/),
    })
    expect(byId['nul-throw']).toMatchObject({
      state: 'failed',
      error: 'before\uFFFDafter',
      error_stack: expect.stringMatching(/^Error: before\uFFFDafter\n/),
    })
    expect(byId['lone-throw']).toMatchObject({ state: 'failed', error: 'half \uFFFD pair' })
    expect(byId['nul-string']).toMatchObject({ state: 'failed', error: 'thrown\uFFFDtext' })
    expect(byId['nul-fail']).toMatchObject({ state: 'failed', error: 'failed\uFFFDwith \uFFFD both' })
    expect(byId['odd-message']).toMatchObject({ state: 'failed', error: '42' })
    expect(surfaced).toEqual([])
    // The worker goes on claiming.
    await enqueue(db, q, 'good', { id: 'later' })
    await waitFor(async () => (await getJob(db, q, 'later'))?.state === 'done', 'a later job to be done')
  })

  test(`JOB-13 ${on} options past what the tables store are refused with INVALID_OPTION and write nothing`, async () => {
    const past = 2 ** 31
    for (const options of [
      { attempts: past },
      { concurrency: past },
      { concurrency: { total: past } },
      { concurrency: { perGroup: past } },
      { rate: { limit: past, per: '1s' } },
      { rate: { limit: 5, per: '1s', perGroup: past } },
    ]) {
      expectCode(await caught(() => defineQueue('wide', options as never)), 'INVALID_OPTION', /2147483647/)
    }
    const widest = defineQueue<number>('widest', {
      attempts: past - 1,
      concurrency: { total: past - 1, perGroup: past - 1 },
      rate: { limit: past - 1, per: '1s' },
    })
    await enqueue(db, widest, 1, { id: 'widest' })
    expect(await query('select max_attempts from jobs_job')).toEqual([{ max_attempts: past - 1 }])

    const q = defineQueue<number>('times')
    const refusals = await inAppTransaction(
      [
        ...[{ runAt: new Date(MIN_STORED_TIME_MS - 1) }, { runAt: -8.64e15 }, null, [], [{ id: 'x' }]].map(
          (options) => (tx: never) => enqueue(tx, q, 1, options as never),
        ),
        (tx) => enqueueMany(tx, q, [{ value: 1, runAt: MIN_STORED_TIME_MS - 1 }]),
      ],
      (tx) => enqueue(tx, q, 2, { id: 'earliest', runAt: MIN_STORED_TIME_MS }),
    )
    expect(refusals).toHaveLength(6)
    for (const error of refusals) expectCode(error, 'INVALID_OPTION')
    expect((refusals[0] as Error).message).toMatch(/^runAt: .*4714-11-24 BC/)
    expect((refusals[2] as Error).message).toMatch(/options must be an object, got null/)
    expect((refusals[3] as Error).message).toMatch(/options must be an object, got an array/)
    expect(await ids()).toEqual(['earliest', 'widest'])
    expect((await getJob(db, q, 'earliest'))?.runAt?.getTime()).toBe(MIN_STORED_TIME_MS)
  })

  if (driver !== 'sqlite') {
    test(`JOB-13 ${on} in a transaction PostgreSQL already aborted, enqueue throws a JobsError that says so, and writes nothing`, async () => {
      const q = defineQueue<number>('aborted')
      let error: unknown
      const outcome = await caught(() =>
        (db as NodePgDatabase).transaction(async (tx) => {
          await caught(() => tx.execute(sql`select 1 / 0`))
          error = await caught(() => enqueue(tx, q, 1, { id: 'in-aborted' }))
        }),
      )
      expectCode(error, 'INVALID_OPTION', /transaction is aborted/)
      expect((error as Error).message).toMatch(/roll the transaction back/)
      // The app's transaction ends as PostgreSQL ends an aborted one.
      expect(outcome === undefined || outcome instanceof Error).toBe(true)
      expect(await ids()).toEqual([])
      await enqueue(db as PgDatabase, q, 2, { id: 'after' })
      expect(await ids()).toEqual(['after'])
    })
  }
})
