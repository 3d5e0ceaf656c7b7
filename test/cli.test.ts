/**
 * The command-line tool, run as users run it: the package's `bin`, built into dist, in a child process, on
 * each dialect (`--db FILE` on SQLite, `--db postgres://…` on PostgreSQL). Test names carry the dialect.
 */
import { execFile } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { get } from 'node:http'
import { createServer } from 'node:net'
import { join, resolve } from 'node:path'
import Database from 'better-sqlite3'
import { afterEach, beforeAll, describe, expect, test } from 'vitest'
import { LOCK_FILE } from '../src/dialect/pglite/data-directory.js'
import { defineQueue, enqueue, listJobs, queueCounts, schedule, signal, work } from '../src/index.js'
import { drain, runSchedule } from '../src/testing/index.js'
import { freshDb, removeTempDirs, tempDir } from './helpers/db.js'
import { DIALECTS, eachContractDb } from './helpers/dialects.js'
import { databaseUrl, freshPgDb, pgServerUrl } from './helpers/pg.js'
import { STARTUP_MS, started, startFixture } from './helpers/processes.js'
import { startDashboardCommand } from './helpers/dashboard.js'
import { addedInTrace } from './helpers/traced.js'
import { waitFor } from './helpers/wait.js'

const ROOT = resolve(import.meta.dirname, '..')
const BIN = resolve(
  ROOT,
  (JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin['drizzle-jobs']!,
)

interface Ran {
  code: number
  stdout: string
  stderr: string
}

/** How long a command may take, its process's start included (no TypeScript to compile): a hang guard. */
const COMMAND_MS = 30_000

/**
 * A test's timeout: above its waits, a handful of commands (COMMAND_MS each at most) and a wait or two of 20 s. A
 * command is a process's start: at a load of 25 to 29, tests of 4 to 7 commands took up to 37 s, against vitest's 60 s.
 */
const CLI_TEST_MS = 8 * COMMAND_MS

/** Runs the command with DRIZZLE_JOBS_DB and DATABASE_URL unset, unless `env` sets them. */
function cliWith(env: Record<string, string>, ...args: string[]): Promise<Ran> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd: ROOT, env: { ...process.env, DRIZZLE_JOBS_DB: '', DATABASE_URL: '', ...env }, timeout: COMMAND_MS },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0
        done({ code, stdout, stderr })
      },
    )
  })
}

const cli = (...args: string[]) => cliWith({}, ...args)

const json = (ran: Ran) => JSON.parse(ran.stdout) as Record<string, unknown>

const replies = defineQueue<{ messageId: number }>('replies', { attempts: 1 })
const digests = defineQueue<{ day: string }>('digests')

beforeAll(() => {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build first (npm run build; npm test does it)`)
})
afterEach(() => removeTempDirs())

describe.each(DIALECTS)('%s', { timeout: CLI_TEST_MS }, (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`

  /** A job's row as stored: its state, attempts, error and result (JSON text, or null). */
  async function jobRow(
    id: string,
    queue = 'replies',
  ): Promise<{ state: string; attempts: number; error: string | null; result: string | null } | undefined> {
    const [row] = await t.query<{ state: string; attempts: number; error: string | null; result: string | null }>(
      `select state, attempts, error, ${t.dialect === 'postgres' ? 'result::text' : 'result'} as result from jobs_job where queue = $1 and id = $2`,
      queue,
      id,
    )
    return row
  }

  /** Sets when a job ended, in ms since the epoch. */
  async function endedAt(id: string, ms: number): Promise<void> {
    await t.run(
      `update jobs_job set finished_at = ${t.dialect === 'postgres' ? 'to_timestamp($1::float8 / 1000)' : '$1'} where id = $2 and queue = 'replies'`,
      ms,
      id,
    )
  }

  /** Two queues: replies with a done, a failed (with stack and no steps left), two waiting and one scheduled job; digests with one waiting. */
  async function seed(): Promise<void> {
    await enqueue(t.db, replies, { messageId: 1 }, { id: 'reply:1' })
    await enqueue(t.db, replies, { messageId: 2 }, { id: 'reply:2', group: 'chat:7' })
    const worker = work(t.db, replies, async ({ messageId }, run) => {
      await run.step('history', () => ['hi'])
      if (messageId === 2) throw new RangeError('the model is down')
      return { text: 'hello' }
    })
    await waitFor(async () => {
      const counts = await queueCounts(t.db, replies)
      return counts.done + counts.failed === 2
    }, 'both jobs to end')
    await worker.stop()
    await enqueue(t.db, replies, { messageId: 3 }, { id: 'reply:3' })
    await enqueue(t.db, replies, { messageId: 4 }, { id: 'reply:4', priority: -1 })
    await enqueue(t.db, replies, { messageId: 5 }, { id: 'reply:5', delay: '1h' })
    await enqueue(t.db, digests, { day: '2026-12-02' }, { id: 'reply:1' })
  }

  describe('status', () => {
    test(`${on} shows each queue with its counts, what ended in the last minute and the oldest due age`, async () => {
      await seed()
      const [text, asJson] = await Promise.all([cli('status', '--db', t.address), cli('status', '--db', t.address, '--json')])
      expect(text.code).toBe(0)
      const lines = text.stdout.trim().split('\n')
      expect(lines[0]).toMatch(
        /^queue\s+status\s+waiting\s+scheduled\s+running\s+done\s+failed\s+canceled\s+done\/min\s+failed\/min\s+oldest due$/,
      )
      expect(lines[1]).toMatch(/^digests\s+active\s+1\s+0\s+0\s+0\s+0\s+0\s+0\s+0\s+\d+(ms|s)$/)
      expect(lines[2]).toMatch(/^replies\s+active\s+2\s+1\s+0\s+1\s+1\s+0\s+1\s+1\s+\d+(ms|s)$/)
      expect(asJson.code).toBe(0)
      const queues = json(asJson).queues as Record<string, unknown>[]
      expect(queues).toHaveLength(2)
      expect(queues[1]).toMatchObject({ ...(await queueCounts(t.db, replies)), donePerMinute: 1, failedPerMinute: 1 })
      expect(queues[1]!.oldestDueMs).toBeGreaterThanOrEqual(0)
    })

    test(`${on} an empty migrated database says there is no queue yet`, async () => {
      const ran = await cli('status', '--db', t.address)
      expect(ran).toMatchObject({ code: 0, stdout: 'no queue yet: no job has been added to this database\n' })
    })
  })

  describe('list', () => {
    test(`${on} prints a page, and the cursor of the next, which --cursor follows`, async () => {
      await seed()
      const first = await cli('list', '--db', t.address, '--queue', 'replies', '--state', 'waiting', '--limit', '1', '--json')
      expect(first.code).toBe(0)
      const page = json(first) as { jobs: { id: string; state: string; value: unknown }[]; next: string }
      expect(page.jobs.map((job) => job.id)).toEqual(['reply:4'])
      const second = await cli(
        'list',
        '--db',
        t.address,
        '--queue',
        'replies',
        '--state',
        'waiting',
        '--limit',
        '1',
        '--cursor',
        page.next,
        '--json',
      )
      expect((json(second) as typeof page).jobs.map((job) => job.id)).toEqual(['reply:3'])

      const text = await cli('list', '--db', t.address, '--queue', 'replies', '--state', 'waiting', '--limit', '1')
      expect(text.stdout).toMatch(
        /^queue\s+id\s+state\s+group\s+attempt\s+when\s+error\nreplies\s+reply:4\s+waiting\s+0\/1\s+due \d+(ms|s) ago\n\nmore: add --cursor \S+\n$/,
      )
      const failed = await cli('list', '--db', t.address, '--state', 'failed')
      expect(failed.stdout).toMatch(/replies\s+reply:2\s+failed\s+chat:7\s+1\/1\s+ended \d+(ms|s) ago\s+the model is down/)
      const none = await cli('list', '--db', t.address, '--group', 'nobody')
      expect(none).toMatchObject({ code: 0, stdout: 'no job matches\n' })
    })
  })

  describe('show', () => {
    test(`${on} shows a job: value, error with stack, attempts; an id held by two queues needs --queue`, async () => {
      await seed()
      const text = await cli('show', 'reply:2', '--db', t.address)
      expect(text.code).toBe(0)
      expect(text.stdout).toMatch(/^job {8}reply:2\nqueue {6}replies\nstate {6}failed\ngroup {6}chat:7\n/)
      expect(text.stdout).toContain('attempts   1 of 1')
      expect(text.stdout).toContain('value\n  {\n    "messageId": 2\n  }')
      expect(text.stdout).toMatch(/error\n {2}RangeError: the model is down\n {6}at /)
      const asJson = await cli('show', 'reply:2', '--db', t.address, '--json')
      expect(json(asJson)).toMatchObject({
        id: 'reply:2',
        state: 'failed',
        error: 'the model is down',
        steps: [],
        lease: null,
        value: { messageId: 2 },
      })

      const ambiguous = await cli('show', 'reply:1', '--db', t.address)
      expect(ambiguous.code).toBe(2)
      expect(ambiguous.stderr).toBe("drizzle-jobs: queues 'digests', 'replies' each hold a job with id 'reply:1': say which with --queue\n")
      const chosen = await cli('show', 'reply:1', '--db', t.address, '--queue', 'digests', '--json')
      expect(json(chosen)).toMatchObject({ queue: 'digests', value: { day: '2026-12-02' } })
      const missing = await cli('show', 'reply:99', '--db', t.address, '--json')
      expect(missing.code).toBe(4)
      expect(JSON.parse(missing.stderr)).toEqual({
        error: { kind: 'not_found', exitCode: 4, message: "no queue holds a job with id 'reply:99' (it may have been pruned)" },
      })
    })

    test(`${on} shows the trace id of the code that added a job, where one is stored`, async () => {
      const traceId = await addedInTrace(() => enqueue(t.db, replies, { messageId: 1 }, { id: 'reply:traced' }))
      await enqueue(t.db, replies, { messageId: 2 }, { id: 'reply:untraced' })
      const traced = await cli('show', 'reply:traced', '--db', t.address)
      expect(traced.code).toBe(0)
      expect(traced.stdout).toMatch(new RegExp(`\nended {6}-\ntrace {6}${traceId}\n\nvalue\n`))
      expect(json(await cli('show', 'reply:traced', '--db', t.address, '--json'))).toMatchObject({ traceId })
      const untraced = await cli('show', 'reply:untraced', '--db', t.address)
      expect(untraced.stdout).not.toContain('trace ')
      expect(json(await cli('show', 'reply:untraced', '--db', t.address, '--json'))).toMatchObject({ traceId: null })
    })

    test(`${on} shows what a parked run waits for, in show (with the job's events), in the listing of scheduled jobs and in --json`, async () => {
      const parking = defineQueue<{ wait: 'sleep' | 'event' }>('parking')
      await enqueue(t.db, parking, { wait: 'sleep' }, { id: 'napping' })
      await enqueue(t.db, parking, { wait: 'event' }, { id: 'order' })
      await signal(t.db, parking, 'order', 'early', { by: 'ada' })
      workers.push(
        work(
          t.db,
          parking,
          async ({ wait }, run) => {
            if (wait === 'sleep') return run.sleep('nap', '1h')
            await run.waitForEvent('early')
            return run.waitForEvent('paid')
          },
          { pollInterval: '20ms' },
        ),
      )
      await waitFor(
        async () => (await listJobs(t.db, { queue: parking, state: 'scheduled' })).jobs.filter((job) => job.waitsFor).length === 2,
        'both runs to park',
      )
      const [list, listJson] = await Promise.all([
        cli('list', '--db', t.address, '--queue', 'parking', '--state', 'scheduled'),
        cli('list', '--db', t.address, '--queue', 'parking', '--state', 'scheduled', '--json'),
      ])
      expect(list.code).toBe(0)
      expect(list.stdout).toMatch(
        /\nparking\s+napping\s+scheduled\s+0\/\d+\s+sleeping \('nap'\), wakes in 59m \d\ds\nparking\s+order\s+scheduled\s+0\/\d+\s+waiting for event 'paid', no timeout\n$/,
      )
      const { jobs } = json(listJson) as { jobs: { id: string; runAt: string; waitsFor: unknown }[] }
      expect(jobs.map((job) => [job.id, job.waitsFor])).toEqual([
        ['napping', { kind: 'sleep', step: 'nap', until: jobs[0]!.runAt }],
        ['order', { kind: 'event', name: 'paid', until: null }],
      ])

      const [order, orderJson, napping] = await Promise.all([
        cli('show', 'order', '--db', t.address),
        cli('show', 'order', '--db', t.address, '--json'),
        cli('show', 'napping', '--db', t.address),
      ])
      expect(order.stdout).toMatch(/\nparked {5}waiting for event 'paid', no timeout\nrun at {5}when the event is sent\n/)
      expect(order.stdout).toMatch(
        /\nevents\n {2}early: sent \d+(ms|s) ago: \{"by":"ada"\}\n {2}paid: waiting since \d+(ms|s) ago, no timeout\n$/,
      )
      expect(json(orderJson)).toMatchObject({
        waitsFor: { kind: 'event', name: 'paid', until: null },
        events: [
          { name: 'early', state: 'sent', payload: { by: 'ada' }, deadline: null },
          { name: 'paid', state: 'waiting', payload: null, deadline: null },
        ],
      })
      expect(napping.stdout).toMatch(/\nparked {5}sleeping \('nap'\), wakes \S+Z \(in 59m \d\ds\)\nrun at {5}\S+Z \(in 59m \d\ds\)\n/)
      expect(napping.stdout).not.toContain('events')
    })

    test(
      `${on} shows a running job's steps and lease`,
      async () => {
        const q = defineQueue<{ hold?: boolean }>('admin')
        const child = startFixture('admin-child.ts', [t.address])
        await enqueue(t.db, q, { hold: true }, { id: 'busy' })
        await started(child, 'ready', 'the worker process to start')
        await waitFor(() => child.output().includes('running busy'), 'the worker process to run the job')
        const ran = await cli('show', 'busy', '--db', t.address)
        expect(ran.stdout).toMatch(/state {6}running\n/)
        expect(ran.stdout).toMatch(new RegExp(`lease {6}attempt 1 by \\S+/${child.process.pid}/\\S+, expires in \\d+s`))
        expect(ran.stdout).toContain('steps\n  one: "kept"')
      },
      STARTUP_MS + 60_000,
    )
  })

  describe('retry and cancel', () => {
    test(`${on} retry puts a failed job back with fresh attempts; a second retry is refused with exit 5`, async () => {
      await seed()
      const ran = await cli('retry', 'reply:2', '--db', t.address)
      expect(ran).toMatchObject({ code: 0, stdout: "job 'reply:2' of queue 'replies' is waiting again, with fresh attempts\n" })
      expect(await jobRow('reply:2')).toMatchObject({ state: 'waiting', attempts: 0, error: null })
      const again = await cli('retry', 'reply:2', '--db', t.address, '--json')
      expect(again.code).toBe(5)
      expect(JSON.parse(again.stderr).error).toMatchObject({
        kind: 'refused',
        message: expect.stringContaining('is waiting: only failed or canceled jobs can be retried; nothing changed'),
      })
      expect(await cli('retry', 'nope', '--queue', 'replies', '--db', t.address)).toMatchObject({ code: 4 })
    })

    test(
      `${on} cancel ends a waiting job; a running job in a worker process is aborted within its poll interval`,
      async () => {
        await seed()
        expect(await cli('cancel', 'reply:3', '--db', t.address, '--json')).toMatchObject({
          code: 0,
          stdout: expect.stringContaining('"canceled": true'),
        })
        expect((await jobRow('reply:3'))!.state).toBe('canceled')
        const again = await cli('cancel', 'reply:3', '--db', t.address)
        expect(again).toMatchObject({
          code: 5,
          stderr: "drizzle-jobs: job 'reply:3' of queue 'replies' has already ended (canceled); nothing changed\n",
        })

        const q = defineQueue<{ hold?: boolean }>('admin')
        const child = startFixture('admin-child.ts', [t.address])
        await enqueue(t.db, q, { hold: true }, { id: 'long' })
        await started(child, 'ready', 'the worker process to start')
        await waitFor(() => child.output().includes('running long'), 'the worker process to run the job')
        expect(await cli('cancel', 'long', '--db', t.address)).toMatchObject({
          code: 0,
          stdout: "job 'long' of queue 'admin' is canceled\n",
        })
        await waitFor(() => child.output().includes('aborted long LEASE_LOST'), 'the worker process to abort the run')
        expect(await jobRow('long', 'admin')).toMatchObject({ state: 'canceled', result: null })
        expect(await t.held()).toBe(0)
      },
      // The worker's start, its two waits, and three commands (30 s each at most).
      STARTUP_MS + 150_000,
    )
  })

  describe('pause, resume and prune', () => {
    test(`${on} pause and resume set the queue flag that workers obey`, async () => {
      expect(await cli('pause', 'replies', '--db', t.address)).toMatchObject({
        code: 0,
        stdout: "queue 'replies' is paused: workers claim nothing more from it until it is resumed\n",
      })
      expect((await queueCounts(t.db, replies)).paused).toBe(true)
      const status = await cli('status', '--db', t.address)
      expect(status.stdout).toMatch(/\nreplies\s+paused\s+0/)
      expect(json(await cli('resume', '--queue', 'replies', '--db', t.address, '--json'))).toEqual({ queue: 'replies', paused: false })
      expect((await queueCounts(t.db, replies)).paused).toBe(false)
      expect(await cli('pause', '--db', t.address)).toMatchObject({ code: 2 })
    })

    test(`${on} prune deletes jobs that ended longer ago than --older-than, and needs it`, async () => {
      await seed()
      await endedAt('reply:1', Date.now() - 2 * 86_400_000)
      const ran = await cli('prune', '--older-than', '1d', '--db', t.address, '--json')
      expect(ran.code).toBe(0)
      expect(json(ran)).toMatchObject({ deleted: 1 })
      expect((await listJobs(t.db, { queue: replies })).jobs.map((job) => job.id).sort()).toEqual([
        'reply:2',
        'reply:3',
        'reply:4',
        'reply:5',
      ])
      expect(json(await cli('prune', '--older-than', '0', '--state', 'done', '--db', t.address, '--json'))).toMatchObject({ deleted: 0 })
      expect(
        json(await cli('prune', '--older-than', '0ms', '--queue', 'replies', '--state', 'failed', '--db', t.address, '--json')),
      ).toMatchObject({ deleted: 1 })
      const missing = await cli('prune', '--db', t.address)
      expect(missing.code).toBe(2)
      expect(missing.stderr).toContain('prune needs --older-than DURATION')
      expect(await cli('prune', '--older-than', 'soon', '--db', t.address)).toMatchObject({ code: 2 })
    })

    test(`JOB-13 ${on} prune takes ages of months and years: --older-than 30d deletes what ended 40 days ago and keeps what ended 20 days ago`, async () => {
      await seed()
      const day = 86_400_000
      await endedAt('reply:1', Date.now() - 40 * day)
      await endedAt('reply:2', Date.now() - 20 * day)
      const ran = await cli('prune', '--older-than', '30d', '--db', t.address, '--json')
      expect(ran.code, ran.stderr).toBe(0)
      expect(json(ran)).toMatchObject({ deleted: 1 })
      expect((await listJobs(t.db, { queue: replies })).jobs.map((job) => job.id).sort()).toEqual([
        'reply:2',
        'reply:3',
        'reply:4',
        'reply:5',
      ])
      expect(json(await cli('prune', '--older-than', '3650d', '--db', t.address, '--json'))).toMatchObject({ deleted: 0 })
    })
  })

  describe('text stored in jobs, printed for a person', () => {
    /** What a terminal would act on: C0 controls but the line break, DEL, C1 controls, line and paragraph separators, bidirectional overrides. */
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what it looks for
    const CONTROL = /[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u
    const TITLE = '\x1b]0;you have been owned\x07'
    const LINK = '\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\'
    const COLOUR = '\x1b[31mred\x1b[0m\x1b[2J'
    const queue = `q${TITLE}`
    const id = `job${LINK}`
    const group = `${COLOUR}\u202eexe.txt`
    const reason = `the model said ${TITLE}${COLOUR}\u009b31m C1\x7f\u2028${LINK}`

    test(`${on} every human-readable output escapes control characters; --json stays exact`, async () => {
      const evil = defineQueue<{ text: string }>(queue, { attempts: 2, backoff: { initial: '1h', max: '1h' } })
      await enqueue(t.db, evil, { text: `\u009b2J${TITLE}\u202e` }, { id, group })
      const worker = work(
        t.db,
        evil,
        async (_value, run) => {
          await run.step(`step${COLOUR}`, () => `\u009b${TITLE}`)
          throw new Error(reason)
        },
        { slots: 1 },
      )
      workers.push(worker)
      await waitFor(async () => (await jobRow(id, queue))?.state === 'scheduled', 'the first attempt to fail')
      await worker.stop()
      await enqueue(t.db, evil, { text: 'waits' }, { id: `${id}:2`, group })

      const runs = await Promise.all([
        cli('status', '--db', t.address),
        cli('list', '--db', t.address),
        cli('list', '--db', t.address, '--state', 'scheduled'),
        cli('show', id, '--db', t.address),
        cli('show', id, '--queue', queue, '--db', t.address),
        cli('show', `nope${TITLE}`, '--queue', queue, '--db', t.address),
        cli('status', '--queue', `nowhere${TITLE}`, '--db', t.address),
      ])
      for (const ran of runs) {
        expect(ran.stdout, ran.stdout).not.toMatch(CONTROL)
        expect(ran.stderr, ran.stderr).not.toMatch(CONTROL)
      }
      const [status, list, failed, show, shown, missing, nowhere] = runs
      expect(status!.code).toBe(0)
      expect(status!.stdout).toContain('q\\x1b]0;you have been owned\\x07  active')
      expect(list!.stdout).toContain('job\\x1b]8;;https://evil.example/\\x1b\\click me\\x1b]8;;\\x1b\\')
      expect(list!.stdout).toContain('\\x1b[31mred\\x1b[0m\\x1b[2J\\u202eexe.txt')
      expect(failed!.stdout).toContain('the model said \\x1b]0;you have been owned\\x07\\x1b[31mred')
      expect(show!.code).toBe(0)
      expect(shown!.code).toBe(0)
      expect(show!.stdout).toContain(`job        job\\x1b]8;;https://evil.example/\\x1b\\click me\\x1b]8;;\\x1b\\\n`)
      expect(show!.stdout).toContain('Error: the model said \\x1b]0;you have been owned\\x07')
      expect(show!.stdout).toContain('\\x7f\\u2028\\x1b]8;;')
      expect(show!.stdout).toContain('"text": "\\u009b2J\\u001b]0;you have been owned\\u0007\\u202e"')
      expect(show!.stdout).toContain('  step\\x1b[31mred\\x1b[0m\\x1b[2J: "\\u009b\\u001b]0;you have been owned\\u0007"')
      expect(missing!.code).toBe(4)
      expect(missing!.stderr).toContain("job with id 'nope\\x1b]0;you have been owned\\x07'")
      expect(nowhere!.code).toBe(0)
      expect(nowhere!.stdout).toContain('nowhere\\x1b]0;you have been owned\\x07  active')

      const asJson = await Promise.all([
        cli('list', '--db', t.address, '--json'),
        cli('show', id, '--db', t.address, '--json'),
        cli('status', '--db', t.address, '--json'),
        cli('show', `nope${TITLE}`, '--queue', queue, '--db', t.address, '--json'),
      ])
      for (const ran of asJson) {
        expect(ran.stdout).not.toMatch(CONTROL)
        expect(ran.stderr).not.toMatch(CONTROL)
      }
      const page = JSON.parse(asJson[0]!.stdout) as { jobs: { id: string; queue: string; group: string; error: string | null }[] }
      expect(page.jobs.map((job) => [job.queue, job.id, job.group]).sort()).toEqual([
        [queue, id, group],
        [queue, `${id}:2`, group],
      ])
      expect(page.jobs.find((job) => job.id === id)!.error).toBe(reason)
      const detail = JSON.parse(asJson[1]!.stdout) as { value: unknown; errorStack: string }
      expect(detail.value).toEqual({ text: `\u009b2J${TITLE}\u202e` })
      expect(detail.errorStack.startsWith(`Error: ${reason}\n`)).toBe(true)
      expect((JSON.parse(asJson[2]!.stdout) as { queues: { queue: string }[] }).queues.map((q) => q.queue)).toEqual([queue])
      expect(JSON.parse(asJson[3]!.stderr).error.message).toContain(`nope${TITLE}`)

      const acted = [
        await cli('cancel', `${id}:2`, '--db', t.address),
        await cli('retry', `${id}:2`, '--queue', queue, '--db', t.address),
        await cli('pause', queue, '--db', t.address),
      ]
      for (const ran of acted) {
        expect(ran.code, ran.stderr).toBe(0)
        expect(ran.stdout).not.toMatch(CONTROL)
      }
      expect(acted[0]!.stdout).toBe(
        "job 'job\\x1b]8;;https://evil.example/\\x1b\\click me\\x1b]8;;\\x1b\\:2' of queue 'q\\x1b]0;you have been owned\\x07' is canceled\n",
      )
      expect(acted[1]!.stdout).toContain("' is waiting again")
      expect((await jobRow(`${id}:2`, queue))?.state).toBe('waiting')
      expect((await queueCounts(t.db, queue)).paused).toBe(true)
    })
  })

  describe('dashboard', () => {
    test(`${on} serves on 127.0.0.1, answers only loopback Host headers, and exits 0 on SIGTERM`, async () => {
      await seed()
      const served = await startDashboardCommand('--db', t.address, '--port', '0')
      try {
        expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/)
        const page = await fetch(served.url)
        expect(page.status).toBe(200)
        const text = await page.text()
        expect(text).toContain('<tr data-queue="replies">')
        expect(text).toContain('<td class="num" data-count="failed"><a href="/queues/replies?state=failed" class="count-failed">1</a></td>')
        // fetch cannot set Host: node:http can, as a browser led there by a rebound DNS name would send it.
        const rebound = await new Promise<number | undefined>((done, failed) =>
          get(served.url, { headers: { host: 'jobs.example.com' } }, (res) => {
            res.resume()
            done(res.statusCode)
          }).on('error', failed),
        )
        expect(rebound).toBe(421)
      } finally {
        expect(await served.stop()).toBe(0)
      }
    })

    test(`${on} refuses any other address without a token, and a short token; with one, every request needs it`, async () => {
      const [open, short] = await Promise.all([
        cli('dashboard', '--db', t.address, '--host', '0.0.0.0', '--port', '0'),
        cli('dashboard', '--db', t.address, '--token', 'short', '--port', '0'),
      ])
      expect(open.code).toBe(2)
      expect(open.stderr).toContain('refusing to listen on 0.0.0.0 without a token')
      expect(short.code).toBe(2)
      expect(short.stderr).toContain('token: at least 16 characters')
      const served = await startDashboardCommand('--db', t.address, '--port', '0', '--token', 'correct-horse-battery-staple')
      try {
        expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=correct-horse-battery-staple$/)
        const bare = new URL(served.url)
        bare.search = ''
        expect((await fetch(bare)).status).toBe(401)
        const entry = await fetch(served.url, { redirect: 'manual' })
        expect(entry.status).toBe(303)
        const cookie = entry.headers.get('set-cookie')!.split(';')[0]!
        expect((await fetch(bare, { headers: { cookie } })).status).toBe(200)
        const pause = await fetch(new URL('/queues/replies/pause', bare), { method: 'POST', headers: { cookie, 'hx-request': 'true' } })
        expect(pause.status).toBe(200)
        expect((await queueCounts(t.db, replies)).paused).toBe(true)
      } finally {
        expect(await served.stop()).toBe(0)
      }
    })
  })

  test(`JOB-21 ${on} lists each schedule with its cron, zone, next and last slots and the last job's state; --queue narrows, --json is exact`, async () => {
    await schedule(t.db, digests, 'daily-digest', { cron: '0 8 * * *', tz: 'Europe/Paris', value: { day: 'today' } })
    await schedule(t.db, replies, 'nightly', { cron: '0 3 * * *', value: { messageId: 0 } })
    const fired = await runSchedule(t.db, digests, 'daily-digest')
    await drain(t.db, digests, () => {})
    const text = await cli('schedules', '--db', t.address)
    expect(text.code).toBe(0)
    const [header, first, second] = text.stdout.trim().split('\n')
    expect(header).toMatch(/queue\s+name\s+cron\s+tz\s+next slot\s+last slot\s+last job/)
    expect(first).toMatch(/^digests\s+daily-digest\s+0 8 \* \* \*\s+Europe\/Paris\s+in .+\s+done$/)
    expect(second).toMatch(/^replies\s+nightly\s+0 3 \* \* \*\s+UTC\s+in .+\s+-\s+-$/)
    const one = json(await cli('schedules', '--db', t.address, '--queue', 'digests', '--json')) as {
      schedules: { name: string; lastJob: unknown; value: unknown }[]
    }
    expect(one.schedules).toHaveLength(1)
    expect(one.schedules[0]).toMatchObject({ name: 'daily-digest', value: { day: 'today' }, lastJob: { id: fired.id, state: 'done' } })
    expect((await cli('schedules', '--db', t.address, '--queue', 'none')).stdout.trim()).toBe('no schedule yet')
    expect((await cli('schedules', 'extra', '--db', t.address)).code).toBe(2)
  })
})

describe('errors and exit codes', { timeout: CLI_TEST_MS }, () => {
  /** A migrated SQLite file, for the commands that only need one to parse their arguments. */
  const file = () => freshDb('chat.db')

  test('a missing file, a file that is not SQLite and an unmigrated database each exit 3 with what to do', async () => {
    const dir = tempDir()
    const notSqlite = join(dir, 'notes.txt')
    writeFileSync(notSqlite, 'these are not the tables you are looking for\n'.repeat(200))
    const empty = join(dir, 'empty.db')
    new Database(empty).exec('create table app (id integer primary key)')
    const [missing, garbage, unmigrated, unmigratedJson] = await Promise.all([
      cli('status', '--db', join(dir, 'nothing.db')),
      cli('status', '--db', notSqlite),
      cli('list', '--db', empty),
      cli('status', '--db', empty, '--json'),
    ])
    expect(missing.code).toBe(3)
    expect(missing.stderr).toContain(`no database file at ${join(dir, 'nothing.db')}`)
    expect(existsSync(join(dir, 'nothing.db'))).toBe(false)
    expect(garbage.code).toBe(3)
    expect(garbage.stderr).toContain('is not a SQLite database')
    expect(unmigrated.code).toBe(3)
    expect(unmigrated.stderr).toMatch(/table jobs_queue, jobs_job, jobs_step, jobs_lease, jobs_schedule are missing: .*drizzle-kit migrate/)
    expect(JSON.parse(unmigratedJson.stderr).error).toMatchObject({ kind: 'database', exitCode: 3 })
  })

  test('usage errors exit 2; help and version exit 0', async () => {
    const t = file()
    const [unknown, badOption, wrongOption, noId, noCommand, help, version] = await Promise.all([
      cli('frobnicate', '--db', t.file),
      cli('status', '--db', t.file, '--colour'),
      cli('status', '--db', t.file, '--older-than', '1d'),
      cli('show', '--db', t.file),
      cli(),
      cli('--help'),
      cli('--version'),
    ])
    expect(unknown).toMatchObject({ code: 2, stderr: expect.stringContaining("unknown command 'frobnicate'") })
    expect(badOption).toMatchObject({ code: 2, stderr: expect.stringContaining("Unknown option '--colour'") })
    expect(wrongOption).toMatchObject({ code: 2, stderr: 'drizzle-jobs: status takes no --older-than; see drizzle-jobs --help\n' })
    expect(noId).toMatchObject({ code: 2, stderr: expect.stringContaining("show needs the job's id") })
    expect(noCommand.code).toBe(2)
    expect(help.code).toBe(0)
    expect(help.stdout).toContain('exit codes\n  0  done')
    expect(version).toMatchObject({
      code: 0,
      stdout: `${(JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as { version: string }).version}\n`,
    })
  })
})

describe('PGlite: a data directory', { timeout: CLI_TEST_MS }, () => {
  test(
    'JOB-13 [pglite] --db names a PGlite data directory: while the app that opened it runs, exit 3 naming its process; once it is gone, the commands read it',
    async () => {
      const dir = join(tempDir(), 'data')
      const app = startFixture('pglite-child.ts', [dir])
      try {
        await started(app, 'ready', 'the app to start and open its database')
        const pid = Number(/ready (\d+)/.exec(app.output())![1])
        const refused = await cli('status', '--db', dir)
        expect(refused.code).toBe(3)
        expect(refused.stderr).toContain(`the PGlite data directory ${dir} is open in process ${pid}: PGlite serves one process`)
      } finally {
        app.process.kill('SIGKILL')
        await app.exited
      }
      const shown = await cli('show', 'from-the-child', '--db', dir, '--json')
      expect(shown.code, shown.stderr).toBe(0)
      expect(json(shown)).toMatchObject({ id: 'from-the-child', queue: 'replies', value: { n: 1 } })
      // The tool let go of the directory as it ended: the app may open it again.
      expect(existsSync(join(dir, LOCK_FILE))).toBe(false)
    },
    STARTUP_MS + 90_000,
  )

  test('a directory that is neither a SQLite file nor a PGlite data directory exits 3 saying what --db takes', async () => {
    const dir = tempDir()
    const ran = await cli('status', '--db', dir)
    expect(ran.code).toBe(3)
    expect(ran.stderr).toContain(
      `${dir} is a directory, neither a SQLite database file nor a PGlite data directory (it holds no PG_VERSION): pass the SQLite file or the PGlite directory your app opens with --db`,
    )
  })
})

describe('commands', { timeout: CLI_TEST_MS }, () => {
  test('names every object has are no commands', async () => {
    const t = freshDb('chat.db')
    const runs = await Promise.all(['constructor', 'toString', '__proto__', 'hasOwnProperty'].map((name) => cli(name, '--db', t.file)))
    for (const ran of runs) expect(ran).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown command') })
  })
})

describe('PostgreSQL: errors and exit codes', { timeout: CLI_TEST_MS }, () => {
  /** A loopback port where nothing listens: one the system gave a server that has closed since. */
  async function deadPort(): Promise<number> {
    const server = createServer()
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening))
    const { port } = server.address() as { port: number }
    await new Promise<void>((closed) => server.close(() => closed()))
    return port
  }

  test('a URL that cannot be read, or is not postgres://, exits 6 with one line saying what is expected', async () => {
    const [mysql, unreadable, fromEnv, asJson] = await Promise.all([
      cli('status', '--db', 'mysql://root@127.0.0.1/app'),
      cli('status', '--db', 'postgres://user:pw@[not-a-host/app'),
      cliWith({ DATABASE_URL: 'app.db' }, 'status'),
      cli('list', '--db', 'http://127.0.0.1:5432/app', '--json'),
    ])
    expect(mysql).toMatchObject({
      code: 6,
      stdout: '',
      stderr:
        "drizzle-jobs: --db: mysql:// URLs are not served: expected postgres:// or postgresql://, or a SQLite file's path with --db\n",
    })
    expect(unreadable).toMatchObject({
      code: 6,
      stderr: expect.stringMatching(
        /^drizzle-jobs: --db: not a URL that can be read: expected postgres:\/\/USER:PASSWORD@HOST:PORT\/DATABASE[^\n]*\n$/,
      ),
    })
    expect(fromEnv).toMatchObject({ code: 6, stderr: expect.stringContaining('DATABASE_URL: not a URL that can be read') })
    expect(JSON.parse(asJson.stderr).error).toMatchObject({ kind: 'bad_url', exitCode: 6 })
  })

  test('a refused connection exits 7: nothing listens there, or the database does not exist; the password is never printed', async () => {
    const port = await deadPort()
    const server = pgServerUrl()
    const noDatabase = databaseUrl(server, 'drizzle_jobs_no_such_database')
    const withPassword = new URL(`postgres://someone:hunter2hunter2@127.0.0.1:${port}/app`).href
    const [nobody, missing, asJson] = await Promise.all([
      cli('status', '--db', withPassword),
      cli('status', '--db', noDatabase),
      cli('dashboard', '--db', noDatabase, '--port', '0', '--json'),
    ])
    expect(nobody).toMatchObject({ code: 7, stdout: '' })
    expect(nobody.stderr).toMatch(
      new RegExp(
        `^drizzle-jobs: cannot connect to postgres://someone:\\*\\*\\*@127\\.0\\.0\\.1:${port}/app: .*ECONNREFUSED.*\\(is the server running, at that host and port\\?\\)\\n$`,
      ),
    )
    expect(nobody.stderr).not.toContain('hunter2')
    expect(missing).toMatchObject({
      code: 7,
      stderr: expect.stringContaining(
        'database "drizzle_jobs_no_such_database" does not exist (create it, or name another database in the URL)',
      ),
    })
    expect(missing.stderr.trimEnd().split('\n')).toHaveLength(1)
    expect(JSON.parse(asJson.stderr).error).toMatchObject({ kind: 'unreachable', exitCode: 7 })
  })

  test('a database whose tables are not migrated exits 3, naming them and the command to run', async () => {
    const bare = await freshPgDb({ migrate: false })
    try {
      const [text, asJson, dashboard] = await Promise.all([
        cli('status', '--db', bare.url),
        cliWith({ DATABASE_URL: bare.url }, 'list', '--json'),
        cli('dashboard', '--db', bare.url, '--port', '0'),
      ])
      expect(text).toMatchObject({ code: 3, stdout: '' })
      expect(text.stderr).toMatch(
        /^drizzle-jobs: postgres:\/\/\S+: table jobs_queue, jobs_job, jobs_step, jobs_lease, jobs_schedule, jobs_count are missing: .*drizzle-kit migrate`\n$/,
      )
      expect(JSON.parse(asJson.stderr).error).toMatchObject({ kind: 'database', exitCode: 3 })
      expect(dashboard.code).toBe(3)
    } finally {
      await bare.drop()
    }
  })

  test('DATABASE_URL names the database when --db is not given; DRIZZLE_JOBS_DB and --db come first', async () => {
    const pgDb = await freshPgDb()
    const sqlite = freshDb('other.db')
    try {
      await enqueue(pgDb.db, replies, { messageId: 1 }, { id: 'on-postgres' })
      enqueue(sqlite.db, replies, { messageId: 2 }, { id: 'on-sqlite' })
      const ids = (ran: Ran) => (json(ran) as { jobs: { id: string }[] }).jobs.map((job) => job.id)
      const [fromUrl, fromJobsDb, fromFlag] = await Promise.all([
        cliWith({ DATABASE_URL: pgDb.url }, 'list', '--json'),
        cliWith({ DATABASE_URL: pgDb.url, DRIZZLE_JOBS_DB: sqlite.file }, 'list', '--json'),
        cliWith({ DATABASE_URL: pgDb.url }, 'list', '--db', sqlite.file, '--json'),
      ])
      expect(ids(fromUrl)).toEqual(['on-postgres'])
      expect(ids(fromJobsDb)).toEqual(['on-sqlite'])
      expect(ids(fromFlag)).toEqual(['on-sqlite'])
    } finally {
      sqlite.close()
      await pgDb.drop()
    }
  })
})
