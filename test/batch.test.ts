/**
 * Batch handlers (`work(db, queue, handler, { batch: { size, wait } })`) on SQLite, libsql, PostgreSQL and PGlite:
 * the handler gets up to `size` jobs a call, waiting at most `wait` to fill one; each job still ends with its own
 * outcome and attempts, and the queue's limits count each job.
 */
import { describe, expect, test } from 'vitest'
import { type BatchWorkOptions, defineQueue, enqueueMany, isJobsError, work, type Database } from '../src/index.js'
import { CONTRACT_DATABASES, CONTRACT_TEST_MS, eachContractDb } from './helpers/dialects.js'
import { waitFor } from './helpers/wait.js'

describe.each(CONTRACT_DATABASES)('%s', { timeout: CONTRACT_TEST_MS }, (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`

  const ended = async (queue: string, count: number) =>
    waitFor(async () => {
      const rows = await t.query<{ id: string; state: string; attempts: number; error: string | null; result: unknown }>(
        `select id, state, attempts, error, result from jobs_job where queue = $1 and state in ('done', 'failed') order by id`,
        queue,
      )
      return rows.length === count && rows
    }, `${count} jobs of ${queue} to end`)

  test(`${on} a batch handler gets up to \`size\` jobs a call, and each job ends with its own outcome: a result, a failure, a retry`, async () => {
    const queue = defineQueue<{ n: number }, { twice: number }>('batched', { attempts: 2, backoff: { initial: 1, max: 1 } })
    const sizes: number[] = []
    await enqueueMany(
      t.db,
      queue,
      Array.from({ length: 10 }, (_, n) => ({ value: { n }, id: `job-${n}` })),
    )
    workers.push(
      work(
        t.db,
        queue,
        (jobs) => {
          sizes.push(jobs.length)
          return jobs.map(({ value, run }) => {
            if (value.n === 3) return run.fail('three is refused')
            if (value.n === 5 && run.attempt === 1) return run.retry()
            return { twice: value.n * 2 }
          })
        },
        { batch: { size: 4, wait: '50ms' }, pollInterval: '20ms' },
      ),
    )
    const rows = await ended('batched', 10)
    for (const row of rows) {
      const n = Number(row.id.slice(4))
      const result = typeof row.result === 'string' ? JSON.parse(row.result) : row.result
      if (n === 3) expect(row).toMatchObject({ state: 'failed', error: 'three is refused', attempts: 1 })
      else if (n === 5) expect({ ...row, result }).toMatchObject({ state: 'done', attempts: 2, result: { twice: 10 } })
      else expect({ ...row, result }).toMatchObject({ state: 'done', attempts: 1, result: { twice: n * 2 } })
    }
    // 11 runs in all (job 5 twice), never more than 4 a call, and the waiting jobs filled whole batches.
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(11)
    expect(Math.max(...sizes)).toBe(4)
  })

  test(`${on} a batch that does not fill is called after \`wait\`, with the jobs it has`, async () => {
    const queue = defineQueue<{ n: number }>('lonely')
    const sizes: number[] = []
    workers.push(
      work(
        t.db,
        queue,
        (jobs) => {
          sizes.push(jobs.length)
          return jobs.map(() => null)
        },
        { batch: { size: 50, wait: '100ms' }, pollInterval: '20ms' },
      ),
    )
    await enqueueMany(t.db, queue, [{ value: { n: 1 } }])
    await ended('lonely', 1)
    expect(sizes).toEqual([1])
  })

  test(`${on} the queue's concurrency counts each job of a batch: a limit of 3 holds every batch to 3`, async () => {
    const queue = defineQueue<{ n: number }>('limited-batches', { concurrency: 3 })
    const sizes: number[] = []
    await enqueueMany(
      t.db,
      queue,
      Array.from({ length: 12 }, (_, n) => ({ value: { n } })),
    )
    workers.push(
      work(
        t.db,
        queue,
        async (jobs) => {
          sizes.push(jobs.length)
          await new Promise((resolve) => setTimeout(resolve, 10))
          return jobs.map(() => null)
        },
        { batch: { size: 10, wait: '30ms' }, pollInterval: '20ms' },
      ),
    )
    await ended('limited-batches', 12)
    expect(Math.max(...sizes)).toBeLessThanOrEqual(3)
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(12)
  })

  test(`${on} a batch handler that throws, or answers the wrong number of answers, fails the attempt of every job of the batch; its runs cannot park`, async () => {
    const throws = defineQueue<{ n: number }>('throws', { attempts: 1 })
    const miscounts = defineQueue<{ n: number }>('miscounts', { attempts: 1 })
    const parks = defineQueue<{ n: number }>('parks', { attempts: 1 })
    const two = [{ value: { n: 1 } }, { value: { n: 2 } }]
    await enqueueMany(t.db, throws, two)
    await enqueueMany(t.db, miscounts, two)
    await enqueueMany(t.db, parks, [{ value: { n: 1 } }])
    const options: BatchWorkOptions = { batch: { size: 2, wait: '200ms' }, pollInterval: '20ms' }
    workers.push(
      work(
        t.db,
        throws,
        () => {
          throw new Error('the bulk API is down')
        },
        options,
      ),
      work(t.db, miscounts, () => [null], options),
      work(
        t.db,
        parks,
        async (jobs) => {
          await jobs[0]!.run.sleep('nap', '1h')
          return [null]
        },
        options,
      ),
    )
    for (const row of await ended('throws', 2)) expect(row).toMatchObject({ state: 'failed', error: 'the bulk API is down' })
    for (const row of await ended('miscounts', 2))
      expect(row.error).toMatch(
        /^the batch handler answered 1 answers for 2 jobs: it must answer an array of one result or outcome per job/,
      )
    const [parked] = await ended('parks', 1)
    expect(parked!.error).toMatch(/^run\.sleep: a run of a batch handler cannot park/)
  })

  test(`${on} bad batch options throw INVALID_OPTION naming them, and start nothing`, () => {
    const queue = defineQueue('refused')
    const codeOf = (batch: unknown) => {
      try {
        work(t.db as Database, queue, (jobs) => jobs.map(() => null), { batch } as never)
      } catch (error) {
        return isJobsError(error) ? `${error.code}: ${error.message}` : String(error)
      }
      return 'no error'
    }
    expect(codeOf({ size: 0 })).toMatch(/^INVALID_OPTION: batch\.size: expected a whole number from 1 to 1000/)
    expect(codeOf({ size: 1001 })).toMatch(/^INVALID_OPTION: batch\.size/)
    expect(codeOf({ size: 2, wait: 'soon' })).toMatch(/^INVALID_OPTION: batch\.wait/)
    expect(codeOf({ size: 2, linger: 5 })).toMatch(/^INVALID_OPTION: batch: unknown option 'linger'/)
    expect(codeOf(3)).toMatch(/^INVALID_OPTION: batch: expected \{ size, wait\? \}/)
  })
})
