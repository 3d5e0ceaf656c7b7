/** Progress crossing processes: a worker in a real child process, watchers here, the channel between them (JOB-11, JOB-12). */
import { fork, type ChildProcess } from 'node:child_process'
import { statSync } from 'node:fs'
import { createServer, type Socket } from 'node:net'
import { dirname, join, resolve } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { defineQueue, enqueue, getJob, watch, type JobSnapshot } from '../src/index.js'
import { openChannelConnections, subscribeRemoteProgress } from '../src/progress/remote.js'
import { activeWatchers } from '../src/queue/refresher.js'
import { freshDb, removeTempDirs, tempDir, type TestDb } from './helpers/db.js'
import { STARTUP_MS } from './helpers/processes.js'
import { waitFor } from './helpers/wait.js'

const CHILD = resolve(import.meta.dirname, 'fixtures/progress-child.ts')
const remote = defineQueue<{ text: string }>('remote')
const children: ChildProcess[] = []
const open: TestDb[] = []

afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL')
  for (const t of open.splice(0)) t.close()
  removeTempDirs()
})

/** Starts the worker process; resolves once it works the queue, within STARTUP_MS (a process's start on a loaded machine). */
async function startWorker(file: string, mode: 'steps' | 'burst'): Promise<ChildProcess> {
  const child = fork(CHILD, [file, mode], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  children.push(child)
  let timer: NodeJS.Timeout | undefined
  await new Promise<void>((resolveReady, reject) => {
    timer = setTimeout(() => reject(new Error(`the worker process was not ready within ${STARTUP_MS} ms`)), STARTUP_MS)
    child.on('message', (message) => message === 'ready' && resolveReady())
    child.once('exit', (code) => reject(new Error(`the worker process exited (${code}) before it was ready`)))
  }).finally(() => clearTimeout(timer))
  return child
}

function label(s: JobSnapshot): string {
  const step = (s.progress as { step?: string } | null)?.step
  return step ? `${s.state} ${step}` : s.state
}

test(
  'JOB-11 a watcher in another process sees every change, progress included, through the channel named in the lease',
  async () => {
    const t = freshDb()
    open.push(t)
    enqueue(t.db, remote, { text: 'hi' }, { id: 'reply:1' })
    const iterator = watch(t.db, remote, 'reply:1')
    const child = await startWorker(t.file, 'steps')
    const seen: string[] = []
    let channel: string | null = null
    for await (const snapshot of iterator) {
      seen.push(label(snapshot))
      // The worker moves on only once this watcher has seen where it is, so no state can slip by between polls.
      if (snapshot.state === 'running' && snapshot.progress === null) child.send('think')
      if (snapshot.state === 'running' && snapshot.progress !== null) {
        channel ??= t.client
          .prepare(`select w.channel from jobs_job j join jobs_lease w on w.owner = j.owner where j.id = 'reply:1'`)
          .pluck()
          .get() as string
        child.send('finish')
      }
      // The retry is an hour away; play the clock and make it due now that it was seen scheduled.
      if (snapshot.state === 'scheduled') t.client.prepare(`update jobs_job set run_at = ? where id = 'reply:1'`).run(Date.now())
      if (snapshot.state === 'done') expect(snapshot.result).toEqual({ text: 'you said hi' })
    }
    expect(seen).toEqual(['waiting', 'running', 'running thinking', 'scheduled', 'running', 'running thinking', 'done'])
    // The channel is a local socket only its user can reach, in a folder only its user can open.
    expect(channel).toMatch(/\.sock$/)
    const socket = statSync(channel!)
    expect(socket.isSocket()).toBe(true)
    expect(socket.mode & 0o777).toBe(0o600)
    expect(statSync(dirname(channel!)).mode & 0o777).toBe(0o700)
    expect(activeWatchers()).toEqual({ watchers: 0, connections: 0 })
    await waitFor(() => openChannelConnections() === 0, 'the channel connection to close once unused')
  },
  STARTUP_MS + 60_000,
)

test(
  'JOB-12 progress set many times with no database write reaches watchers of another process, in order, over one shared connection',
  async () => {
    const t = freshDb()
    open.push(t)
    enqueue(t.db, remote, { text: 'burst' }, { id: 'b' })
    const child = await startWorker(t.file, 'burst')
    const watchers = [watch(t.db, remote, 'b'), watch(t.reopen().db, remote, 'b')]
    const received: number[][] = [[], []]
    const done = watchers.map(async (iterator, n) => {
      for await (const snapshot of iterator) {
        const i = (snapshot.progress as { i?: number } | null)?.i
        if (i !== undefined) received[n]!.push(i)
        if (i === 200 && n === 0) {
          // The last progress arrived while the job's row did not change: it came over the channel, not from the database.
          expect(getJob(t.db, remote, 'b')).toMatchObject({ state: 'running', progress: { i: 200 } })
          expect(openChannelConnections()).toBe(1)
        }
      }
    })
    await waitFor(() => received.every((list) => list.at(-1) === 200), 'both watchers to see the last progress')
    child.send('finish')
    await Promise.all(done)
    for (const list of received) {
      expect(list.length).toBeGreaterThan(0)
      expect(list.every((i, k) => k === 0 || i > list[k - 1]!)).toBe(true)
    }
    const row = t.client.prepare(`select * from jobs_job where id = 'b'`).get() as Record<string, unknown>
    expect(JSON.stringify(row)).not.toContain('"i":')
  },
  STARTUP_MS + 60_000,
)

test('a subscriber whose connection to a channel drops connects again and subscribes again to what it follows', async () => {
  // A channel that drops its first connection, then answers by the protocol: KEY<TAB>PROGRESS per subscription.
  const path = join(tempDir(), 'flaky.sock')
  let connections = 0
  const lines: string[] = []
  const server = createServer((socket: Socket) => {
    if (++connections === 1) return socket.destroy()
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => {
      for (const line of chunk.split('\n').filter(Boolean)) {
        lines.push(line)
        if (line.startsWith('+')) socket.write(`${line.slice(1)}\t{"n":${connections}}\n`)
      }
    })
  })
  await new Promise<void>((resolveListen) => server.listen(path, resolveListen))
  const received: unknown[] = []
  const unsubscribe = subscribeRemoteProgress(path, 'owner\u00007\u00001', (progress) => received.push(progress.value))
  await waitFor(() => received.length > 0, 'the progress after the reconnect')
  expect(received).toEqual([{ n: 2 }])
  expect(connections).toBe(2)
  unsubscribe()
  await waitFor(() => lines.includes('-"owner\\u00007\\u00001"'), 'the unsubscribe')
  await waitFor(() => openChannelConnections() === 0, 'the idle connection to close')
  server.close()
})
