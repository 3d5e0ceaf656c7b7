/**
 * Watching a run of another process, once per dialect (JOB-11, JOB-12, JOB-20): the worker is a child process
 * with a connection of its own, the watcher is this one. On PostgreSQL they share nothing but the server
 * (progress travels by NOTIFY, on any host); on SQLite, the database file and the host's local socket.
 */
import pg from 'pg'
import { afterEach, describe, expect, test } from 'vitest'
import { enqueue, getJob, watch, type JobSnapshot } from '../../src/index.js'
import { listeningForProgress } from '../../src/progress/notices.js'
import { openChannelConnections } from '../../src/progress/remote.js'
import { activeWatchers } from '../../src/queue/refresher.js'
import { PROGRESS_NOTICE_INTERVAL_MS } from '../../src/limits.js'
import { PROCESS_DATABASES, eachContractDb } from '../helpers/dialects.js'
import { STARTUP_MS, started, startFixture } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'
import { followed, SIGNAL_TABLE } from '../fixtures/contract-queues.js'

/** The channel on which PostgreSQL carries progress values, as any program may LISTEN to it. */
const PROGRESS_CHANNEL = 'drizzle_jobs_progress'
const FLOOD = 3_000

describe.each(PROCESS_DATABASES)('%s', (dialect) => {
  const { t } = eachContractDb(dialect)
  const on = `[${dialect}]`
  const listeners: pg.Client[] = []
  afterEach(async () => {
    await Promise.all(listeners.splice(0).map((client) => client.end()))
  })

  /** Counts the progress notices the server delivers, on a connection of the test's own. */
  async function countNotices(): Promise<{ payloads: string[] }> {
    const client = new pg.Client({ connectionString: t.address })
    client.on('error', () => {})
    listeners.push(client)
    await client.connect()
    const seen = { payloads: [] as string[] }
    client.on('notification', (message) => {
      if (message.channel === PROGRESS_CHANNEL) seen.payloads.push(message.payload ?? '')
    })
    await client.query(`listen ${PROGRESS_CHANNEL}`)
    return seen
  }

  const signal = (name: string) => t.run('insert into signal (name) values ($1)', name)

  function label(snapshot: JobSnapshot): string {
    const step = (snapshot.progress as { step?: string } | null)?.step
    return step ? `${snapshot.state} ${step}` : snapshot.state
  }

  test(
    `JOB-11 ${on} a watcher sees every change of a job run by a worker in another process, its progress included`,
    async () => {
      await t.run(SIGNAL_TABLE)
      await enqueue(t.db, followed, { n: 7 }, { id: 'w' })
      const iterator = watch(t.db, followed, 'w')
      const worker = startFixture('contract-child.ts', ['work', t.address, 'progress'])
      await started(worker, 'working', 'the worker process to start')
      const seen: string[] = []
      let channel: string | null | undefined
      for await (const snapshot of iterator) {
        seen.push(label(snapshot))
        // The worker goes on only once this watcher has seen where it is, so that no change slips by unseen.
        if (snapshot.state === 'running' && snapshot.progress === null) await signal(`think${snapshot.attempt}`)
        if (snapshot.state === 'running' && snapshot.progress !== null) {
          channel ??= (
            await t.query<{ channel: string | null }>(
              `select w.channel from jobs_job j join jobs_lease w on w.owner = j.owner where j.id = 'w'`,
            )
          )[0]!.channel
          expect(await getJob(t.db, followed, 'w')).toMatchObject({ state: 'running', progress: { step: 'thinking' } })
          await signal(`finish${snapshot.attempt}`)
        }
        // The retry is an hour away: the test plays the clock once it has seen it scheduled (a change of run_at, which may be seen too).
        if (snapshot.state === 'scheduled' && !seen.slice(0, -1).includes('scheduled'))
          await t.run(`update jobs_job set run_at = $1 where id = 'w'`, dialect === 'postgres' ? new Date() : Date.now())
        if (snapshot.state === 'done') expect(snapshot.result).toEqual({ text: 'answer 7' })
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
      if (dialect === 'postgres') {
        // One path per dialect: on PostgreSQL the lease names no local socket, and no socket was opened.
        expect(channel).toBeNull()
        expect(openChannelConnections()).toBe(0)
      } else {
        expect(channel).toMatch(/\.sock$/)
      }
      expect(activeWatchers()).toEqual({ watchers: 0, connections: 0 })
      await waitFor(() => listeningForProgress() === 0 && openChannelConnections() === 0, 'the progress listening to stop once unused')
    },
    STARTUP_MS + 90_000,
  )

  test(
    `JOB-12 ${on} a flood of progress from a worker in another process reaches a watcher in order, its last value included, and is never written`,
    async () => {
      await t.run(SIGNAL_TABLE)
      await enqueue(t.db, followed, { n: 1 }, { id: 'flood' })
      const notices = dialect === 'postgres' ? await countNotices() : undefined
      const worker = startFixture('contract-child.ts', ['work', t.address, 'flood'], { FLOOD: String(FLOOD) })
      const received: number[] = []
      let floodMs = 0
      // The watch starts before the worker can claim the job, so that it follows the whole flood.
      const following = (async () => {
        for await (const snapshot of watch(t.db, followed, 'flood')) {
          const i = (snapshot.progress as { i?: number } | null)?.i
          if (i !== undefined) received.push(i)
        }
      })()
      await started(worker, 'working', 'the worker process to start')
      await waitFor(() => received.at(-1) === FLOOD, 'the last progress value', 60_000)
      await waitFor(() => /flooded \d+/.test(worker.output()), 'the worker to say how long the flood took')
      floodMs = Number(/flooded (\d+)/.exec(worker.output())![1])
      // The last value came while the job's row stood still: it was carried, not read from the database.
      expect(await getJob(t.db, followed, 'flood')).toMatchObject({ state: 'running', progress: { i: FLOOD } })
      expect(await t.query(`select 1 from jobs_job where cast(value as text) like '%"i"%' or cast(result as text) like '%"i"%'`)).toEqual(
        [],
      )
      await signal('finish1')
      await following
      expect(received.every((i, k) => k === 0 || i > received[k - 1]!)).toBe(true)
      if (notices) {
        // Coalesced per run: at most one notice per interval of the flood, plus the first, the trailing latest and an answer to the watcher's ask.
        const bound = Math.floor(floodMs / PROGRESS_NOTICE_INTERVAL_MS) + 3
        expect(notices.payloads.length, `${notices.payloads.length} notices for ${FLOOD} values set in ${floodMs} ms`).toBeLessThanOrEqual(
          bound,
        )
        expect(notices.payloads.length).toBeLessThan(FLOOD / 10)
        expect(notices.payloads.at(-1)).toMatch(new RegExp(`\\t\\{"i":${FLOOD}\\}$`))
        for (const payload of notices.payloads) expect(Buffer.byteLength(payload)).toBeLessThan(8_000)
      }
      const stored = await t.query<Record<string, unknown>>(`select * from jobs_job where id = 'flood'`)
      expect(JSON.stringify(stored)).not.toContain('"i":')
    },
    STARTUP_MS + 120_000,
  )

  test(
    `JOB-11 ${on} a watcher that starts while a run of another process is under way gets its current progress at once, with nothing set after`,
    async () => {
      await t.run(SIGNAL_TABLE)
      await enqueue(t.db, followed, { n: 1 }, { id: 'late' })
      const worker = startFixture('contract-child.ts', ['work', t.address, 'flood'], { FLOOD: '50' })
      await started(worker, 'working', 'the worker process to start')
      await waitFor(() => worker.output().includes('flooded'), 'the worker to set its last progress', 60_000)
      // No watcher followed the run until now: its owner answers this process's ask with the latest value.
      const iterator = watch(t.db, followed, 'late')
      const seen: Array<{ state: string; i: number | undefined }> = []
      for await (const snapshot of iterator) {
        seen.push({ state: snapshot.state, i: (snapshot.progress as { i?: number } | null)?.i })
        if (snapshot.state === 'running' && seen.at(-1)!.i === 50) await signal('finish1')
      }
      expect(seen.find((s) => s.i !== undefined)).toEqual({ state: 'running', i: 50 })
      expect(seen.at(-1)).toEqual({ state: 'done', i: undefined })
    },
    STARTUP_MS + 90_000,
  )
})
