/**
 * The contracts on postgres.js (JOB-20), on each major the package supports (3.4 and 4): the contract suite runs its PostgreSQL half on node-postgres, and
 * these run the same promises on a Drizzle `drizzle-orm/postgres-js` handle — an add that commits or rolls
 * back with the app's row, a worker draining jobs to their outcomes, steps kept across attempts, a worker
 * process on postgres.js SIGKILLed mid-run, and a watch, of a run in this process and of one in another. Plain-SQL checks read through node-postgres, a
 * separate client, so that they see only what committed.
 */
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pgTable, serial, text } from 'drizzle-orm/pg-core'
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js'
import type postgres from 'postgres'
import { afterEach, describe, expect, test } from 'vitest'
import { defineQueue, enqueue, getJob, watch, work, type JobSnapshot, type Worker } from '../../src/index.js'
import { followed, SIGNAL_TABLE, steps } from '../fixtures/contract-queues.js'
import { removeTempDirs, tempDir } from '../helpers/db.js'
import { eachFreshPgDb, openPostgresJs, POSTGRES_JS, type PostgresJsMajor } from '../helpers/pg.js'
import { killChildren, STARTUP_MS, started, startFixture } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

const t = eachFreshPgDb()
const workers: Worker[] = []
const clients: { end(options: { timeout: number }): Promise<void> }[] = []

afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
  killChildren()
  // Every postgres.js client the test opened, ended now without waiting on a connection that may be lost.
  await Promise.all(clients.splice(0).map((client) => client.end({ timeout: 0 })))
  removeTempDirs()
})

/** A postgres.js client on the test's database, as another part of the app would open it, and its Drizzle handle. */
function postgresJs(major: PostgresJsMajor) {
  const opened = t.postgresJs(major)
  clients.push(opened.client)
  return opened.db
}

/**
 * A postgres.js client on the test's database whose notices are kept, where postgres.js would print each (its
 * default `onnotice` is console.log), and its Drizzle handle.
 */
function postgresJsNoticing(major: PostgresJsMajor): { db: PostgresJsDatabase; notices: postgres.Notice[] } {
  const notices: postgres.Notice[] = []
  const client = openPostgresJs(major, t.url, { max: 4, onnotice: (notice) => notices.push(notice) })
  clients.push(client)
  return { db: drizzle(client), notices }
}

/** The job as stored, read through node-postgres: what committed, and nothing else. */
async function stored(queue: string, id: string): Promise<{ state: string; attempts: number; error: string | null } | undefined> {
  return (await t.pool.query('select state, attempts, error from jobs_job where queue = $1 and id = $2', [queue, id])).rows[0]
}

const count = async (table: 'jobs_job' | 'jobs_step'): Promise<number> =>
  Number((await t.pool.query(`select count(*) as n from ${table}`)).rows[0].n)

/** How many jobs name a worker: the runs under way, each on its worker's lease. */
const held = async (): Promise<number> =>
  Number((await t.pool.query(`select count(*) as n from jobs_job where owner is not null`)).rows[0].n)

const messages = pgTable('messages', { id: serial('id').primaryKey(), text: text('text').notNull() })

// Each major of postgres.js an app may bring: its tests are named [postgres.js] (3.4) and [postgres.js 4].
for (const major of POSTGRES_JS) {
  describe(major, () => {
    test(`JOB-02 [${major}] a job added inside db.transaction commits with the app's row, unseen until then; a throw or tx.rollback() takes both back`, async () => {
      const db = postgresJs(major)
      const q = defineQueue<{ messageId: number }>('replies')
      await t.pool.query('create table messages (id serial primary key, text text not null)')

      const seenInside = await db.transaction(async (tx) => {
        const [message] = await tx.insert(messages).values({ text: 'kept' }).returning()
        const added = await enqueue(tx, q, { messageId: message!.id }, { id: `reply:${message!.id}` })
        expect(added).toEqual({ id: `reply:${message!.id}`, added: true })
        // The transaction has not committed: another connection sees neither the row nor its job.
        return { job: await stored('replies', added.id), rows: (await t.pool.query('select * from messages')).rowCount }
      })
      expect(seenInside).toEqual({ job: undefined, rows: 0 })
      expect(await stored('replies', 'reply:1')).toMatchObject({ state: 'waiting', attempts: 0 })

      await expect(
        db.transaction(async (tx) => {
          const [message] = await tx.insert(messages).values({ text: 'thrown away' }).returning()
          await enqueue(tx, q, { messageId: message!.id }, { id: 'thrown' })
          throw new Error('the app changes its mind')
        }),
      ).rejects.toThrow('the app changes its mind')
      await expect(
        db.transaction(async (tx) => {
          await tx.insert(messages).values({ text: 'rolled back' })
          await enqueue(tx, q, { messageId: 0 }, { id: 'rolled-back' })
          tx.rollback()
        }),
      ).rejects.toThrow(/rollback/i)

      expect(await stored('replies', 'thrown')).toBeUndefined()
      expect(await stored('replies', 'rolled-back')).toBeUndefined()
      expect((await t.pool.query('select text from messages')).rows).toEqual([{ text: 'kept' }])
      expect(await count('jobs_job')).toBe(1)
    })

    test(`[${major}] on a database just migrated, the worker's first start sends no notice to a client that prints them (postgres.js logs each unless told not to)`, async () => {
      const { db, notices } = postgresJsNoticing(major)
      const q = defineQueue('replies')
      const worker = work(db, q, () => 'ran')
      workers.push(worker)
      await enqueue(db, q, null, { id: 'first' })
      await waitFor(async () => (await stored('replies', 'first'))?.state === 'done', 'the job to run')
      expect(notices).toEqual([])
    })

    test(`[${major}] on a database just migrated, the app's first add, inside db.transaction, sends no notice to a client that prints them`, async () => {
      const { db, notices } = postgresJsNoticing(major)
      await db.transaction(async (tx) => void (await enqueue(tx, defineQueue('replies'), null, { id: 'first' })))
      expect(await stored('replies', 'first')).toMatchObject({ state: 'waiting' })
      expect(notices).toEqual([])
    })

    test(`JOB-08 [${major}] a worker drains the jobs: done with its result, failed by run.fail, failed after its last attempt throws`, async () => {
      const db = postgresJs(major)
      const q = defineQueue<{ outcome: string; n: number }>('outcomes', { attempts: 2, backoff: { initial: 0, max: 0 } })
      for (let n = 0; n < 6; n++) await enqueue(db, q, { outcome: 'return', n }, { id: `ok-${n}` })
      await enqueue(db, q, { outcome: 'fail', n: 6 }, { id: 'fail' })
      await enqueue(db, q, { outcome: 'throw', n: 7 }, { id: 'throw' })
      workers.push(
        work(
          db,
          q,
          (value, run) => {
            if (value.outcome === 'fail') return run.fail('the message was deleted')
            if (value.outcome === 'throw') throw new Error(`the model timed out on attempt ${run.attempt}`)
            return { doubled: value.n * 2 }
          },
          { slots: 3 },
        ),
      )
      await waitFor(
        async () => Number((await t.pool.query(`select count(*) as n from jobs_job where state in ('done', 'failed')`)).rows[0].n) === 8,
        'every job to end',
      )

      for (let n = 0; n < 6; n++)
        expect(await getJob(db, q, `ok-${n}`)).toMatchObject({ state: 'done', result: { doubled: n * 2 }, attempt: 1 })
      expect(await getJob(db, q, 'fail')).toMatchObject({ state: 'failed', error: 'the message was deleted', attempt: 1 })
      expect(await getJob(db, q, 'throw')).toMatchObject({ state: 'failed', error: 'the model timed out on attempt 2', attempt: 2 })
      expect(await held()).toBe(0)
    })

    test(`JOB-06 [${major}] JOB-14 a finished step is not run again by a later attempt, and no step row outlives its job`, async () => {
      const db = postgresJs(major)
      const q = defineQueue('stepped', { attempts: 3, backoff: { initial: 0, max: 0 } })
      await enqueue(db, q, null, { id: 's' })
      const calls: string[] = []
      workers.push(
        work(db, q, async (_value, run) => {
          const first = await run.step('one', () => (calls.push(`one@${run.attempt}`), { kept: run.attempt }))
          expect(first).toEqual({ kept: 1 })
          expect(await count('jobs_step')).toBe(1)
          if (run.attempt === 1) throw new Error('again')
          await run.step('two', () => void calls.push(`two@${run.attempt}`))
        }),
      )
      await waitFor(async () => (await stored('stepped', 's'))?.state === 'done', 'the job to finish on its second attempt')
      expect(calls).toEqual(['one@1', 'two@2'])
      expect(await stored('stepped', 's')).toMatchObject({ attempts: 2 })
      expect(await count('jobs_step')).toBe(0)
    })

    test(
      `JOB-05 [${major}] JOB-06 a worker process on postgres.js SIGKILLed after a step: another worker finishes the job, the step not rerun`,
      async () => {
        const stepLog = join(tempDir(), 'steps.log')
        writeFileSync(stepLog, '')
        await t.pool.query(`insert into jobs_job (queue, id, value, max_attempts) values ('steps', 'resumable', '{"n":1}', 5)`)
        const child = startFixture('contract-child.ts', ['work', t.url, 'step-then-hang'], { STEP_LOG: stepLog, PG_DRIVER: major })
        await started(child, 'step-done', 'the child to start and finish its step')
        // The child talks to the server through postgres.js, which names itself; nothing else here has opened it yet.
        const onPostgresJs = await t.pool.query(
          `select count(*) as n from pg_stat_activity where datname = $1 and application_name = 'postgres.js'`,
          [t.name],
        )
        expect(Number(onPostgresJs.rows[0].n)).toBeGreaterThan(0)
        child.process.kill('SIGKILL')
        expect(await child.exited).toBe('SIGKILL')
        expect(await stored('steps', 'resumable')).toMatchObject({ state: 'running', attempts: 1 })
        expect(await count('jobs_step')).toBe(1)

        // A worker on this host finds the job's worker gone and runs the job again at once, without waiting for its lease.
        const db = postgresJs(major)
        const ran: string[] = []
        workers.push(
          work(db, steps, async (_value, run) => {
            const first = await run.step('one', () => {
              throw new Error('step one finished in the killed process: it must not run again')
            })
            ran.push(`${String(first)}@${run.attempt}`)
            await run.step('two', () => appendFileSync(stepLog, `two ${run.id} ${run.attempt}\n`))
          }),
        )
        await waitFor(async () => (await stored('steps', 'resumable'))?.state === 'done', 'another worker to finish the job')
        expect(ran).toEqual(['first@2'])
        expect(await stored('steps', 'resumable')).toMatchObject({ state: 'done', attempts: 2 })
        expect(readFileSync(stepLog, 'utf8').trim().split('\n')).toEqual(['one resumable 1', 'two resumable 2'])
        expect(await count('jobs_step')).toBe(0)
        expect(await held()).toBe(0)
      },
      STARTUP_MS + 60_000,
    )

    test(`JOB-11 [${major}] watch on one postgres.js client follows a job that a worker on another runs: waiting, running with its progress, done`, async () => {
      const watching = postgresJs(major)
      const running = postgresJs(major)
      const q = defineQueue<{ n: number }, { text: string }>('watched')
      await enqueue(watching, q, { n: 1 }, { id: 'w' })
      const seen: JobSnapshot<{ text: string }>[] = []
      const following = (async () => {
        for await (const snapshot of watch(watching, q, 'w')) seen.push(snapshot)
      })()
      await waitFor(() => seen.length > 0, 'the first snapshot')
      let release!: () => void
      const released = new Promise<void>((resolve) => (release = resolve))
      workers.push(
        work(running, q, async (_value, run) => {
          run.setProgress({ step: 'thinking' })
          await released
          return { text: 'hello' }
        }),
      )
      await waitFor(
        () => seen.some((snapshot) => snapshot.state === 'running' && (snapshot.progress as { step?: string } | null)?.step === 'thinking'),
        'the running snapshot with its progress',
      )
      release()
      await following
      expect(seen[0]).toMatchObject({ id: 'w', state: 'waiting', ahead: 0 })
      expect(seen.at(-1)).toMatchObject({ state: 'done', result: { text: 'hello' }, attempt: 1 })
      expect(seen.map((snapshot) => snapshot.state).filter((s, i, all) => s !== all[i - 1])).toEqual(['waiting', 'running', 'done'])
    })

    test(
      `JOB-11 [${major}] watch on postgres.js follows a run of another process on postgres.js, its progress by notice: both attempts, each with its progress, and done`,
      async () => {
        const watching = postgresJs(major)
        await t.pool.query(SIGNAL_TABLE)
        await enqueue(watching, followed, { n: 3 }, { id: 'w' })
        // The watch reads the job waiting before the worker can claim it: its process's start is bounded by the test's timeout.
        startFixture('contract-child.ts', ['work', t.url, 'progress'], { PG_DRIVER: major })
        const seen: string[] = []
        for await (const snapshot of watch(watching, followed, 'w')) {
          const label = `${snapshot.state} ${(snapshot.progress as { step?: string } | null)?.step ?? ''}`.trim()
          seen.push(label)
          if (label === 'running') await t.pool.query('insert into signal (name) values ($1)', [`think${snapshot.attempt}`])
          if (label === 'running thinking') await t.pool.query('insert into signal (name) values ($1)', [`finish${snapshot.attempt}`])
          if (label === 'scheduled' && seen.indexOf('scheduled') === seen.length - 1)
            await t.pool.query(`update jobs_job set run_at = now() where id = 'w'`)
        }
        expect(seen.filter((label, i) => label !== seen[i - 1])).toEqual([
          'waiting',
          'running',
          'running thinking',
          'scheduled',
          'running',
          'running thinking',
          'done',
        ])
      },
      STARTUP_MS + 120_000,
    )
  })
}
