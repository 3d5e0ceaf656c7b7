/**
 * drizzle-jobs/sse: a watch as server-sent events, served by Hono (@hono/node-server) and by node:http, over
 * real sockets, on each dialect (test names carry it).
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import { Hono } from 'hono'
import { afterEach, describe, expect, test } from 'vitest'
import { defineQueue, enqueue, work } from '../src/index.js'
import { activeWatchers } from '../src/queue/refresher.js'
import { jobEvents, pipeResponse } from '../src/sse/index.js'
import { DIALECTS, eachContractDb, type ContractDb } from './helpers/dialects.js'
import { waitFor } from './helpers/wait.js'

const replies = defineQueue<{ text: string }>('replies')
const servers: { close(): void }[] = []

afterEach(() => {
  for (const server of servers.splice(0)) server.close()
})

/** Reads server-sent events off a fetch body until `until` says stop or the stream ends. */
async function readEvents(
  response: Response,
  until: (events: ParsedEvent[]) => boolean = () => false,
  live: { text: string } = { text: '' },
): Promise<{ events: ParsedEvent[]; text: string }> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    live.text += value
    if (until(parse(live.text))) {
      await reader.cancel()
      break
    }
  }
  return { events: parse(live.text), text: live.text }
}

interface ParsedEvent {
  id?: string
  event?: string
  data?: unknown
  retry?: number
  comment?: string
}

function parse(text: string): ParsedEvent[] {
  return text
    .split('\n\n')
    .filter((block) => block.length > 0 && text.includes(`${block}\n\n`))
    .map((block) => {
      const event: ParsedEvent = {}
      for (const line of block.split('\n')) {
        const [field, ...rest] = line.split(':')
        const value = rest.join(':').replace(/^ /, '')
        if (field === '') event.comment = value
        else if (field === 'data') event.data = JSON.parse(value)
        else if (field === 'retry') event.retry = Number(value)
        else if (field === 'id') event.id = value
        else if (field === 'event') event.event = value
      }
      return event
    })
}

function honoApp(t: ContractDb): Promise<string> {
  const app = new Hono()
  app.get('/jobs/:id/events', (c) =>
    jobEvents(t.db, replies, c.req.param('id'), {
      request: c.req.raw,
      heartbeat: 30,
      serialize: (job) => ({ state: job.state, ahead: job.ahead, progress: job.progress }),
    }),
  )
  return new Promise((resolve) => {
    servers.push(serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => resolve(`http://127.0.0.1:${info.port}`)))
  })
}

function nodeHttpApp(t: ContractDb): Promise<string> {
  const server: Server = createServer((req, res) => {
    const id = new URL(req.url!, 'http://localhost').searchParams.get('id')!
    void pipeResponse(jobEvents(t.db, replies, id, { retry: '2s' }), res)
  })
  servers.push(server)
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  )
}

describe.each(DIALECTS)('%s', (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`

  test(`JOB-11 ${on} over SSE with Hono: retry, one event per snapshot, heartbeats, and the stream ends with the job`, async () => {
    await enqueue(t.db, replies, { text: 'hi' }, { id: 'r1' })
    const base = await honoApp(t)
    const response = await fetch(`${base}/jobs/r1/events`)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
    expect(response.headers.get('cache-control')).toBe('no-cache, no-transform')
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    const live = { text: '' }
    const reading = readEvents(response, undefined, live)
    workers.push(
      work(t.db, replies, async (_value, run) => {
        // Progress is set once the stream told of the run: on PostgreSQL the watch reads the row after the claim
        // commits, and a progress set before that read would come with the running state, in one event.
        await waitFor(() => live.text.includes('"state":"running"'), 'the running event')
        run.setProgress({ step: 'thinking' })
        await released
        return 'hello'
      }),
    )
    await waitFor(() => live.text.includes('thinking'), 'the progress event')
    // While nothing changes, heartbeats keep the stream alive.
    await waitFor(() => live.text.split('thinking')[1]!.includes(': heartbeat'), 'a heartbeat')
    release()
    const { events, text } = await reading
    expect(text.startsWith('retry: 1000\n\n')).toBe(true)
    expect(events.some((e) => e.comment === 'heartbeat')).toBe(true)
    const data = events.filter((e) => e.data !== undefined)
    expect(data.map((e) => e.data)).toEqual([
      { state: 'waiting', ahead: 0, progress: null },
      { state: 'running', ahead: null, progress: null },
      { state: 'running', ahead: null, progress: { step: 'thinking' } },
      { state: 'done', ahead: null, progress: null },
    ])
    expect(data.at(-1)!.id).toBe('end')
    expect(activeWatchers().watchers).toBe(0)

    // A reconnect after the end is told to stop (204); an unknown job is a 404.
    const again = await fetch(`${base}/jobs/r1/events`, { headers: { 'last-event-id': 'end' } })
    expect(again.status).toBe(204)
    const missing = await fetch(`${base}/jobs/nope/events`)
    expect(missing.status).toBe(404)
    expect(await missing.text()).toContain("no job with id 'nope'")
  })

  test(`${on} SSE with Hono stops watching when the client goes away`, async () => {
    await enqueue(t.db, replies, { text: 'hi' }, { id: 'r2' })
    const base = await honoApp(t)
    const controller = new AbortController()
    const response = await fetch(`${base}/jobs/r2/events`, { signal: controller.signal })
    const { events } = await readEvents(response, (seen) => seen.some((e) => e.data !== undefined))
    expect(events.find((e) => e.data !== undefined)?.data).toMatchObject({ state: 'waiting' })
    expect(activeWatchers().watchers).toBe(1)
    controller.abort()
    await waitFor(() => activeWatchers().watchers === 0, 'the watch to stop after the client left')
  })

  test(`${on} SSE with node:http through pipeResponse: events, and the watch stops when the client goes away`, async () => {
    await enqueue(t.db, replies, { text: 'hi' }, { id: 'r3' })
    const base = await nodeHttpApp(t)
    const controller = new AbortController()
    const response = await fetch(`${base}/?id=r3`, { signal: controller.signal })
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
    const { events, text } = await readEvents(response, (seen) => seen.some((e) => e.data !== undefined))
    expect(text.startsWith('retry: 2000\n\n')).toBe(true)
    expect(events.find((e) => e.data !== undefined)?.data).toMatchObject({
      id: 'r3',
      queue: 'replies',
      state: 'waiting',
      ahead: 0,
      attempt: 0,
    })
    controller.abort()
    await waitFor(() => activeWatchers().watchers === 0, 'the watch to stop after the client left')
  })

  test(`JOB-11 ${on} over SSE, aheadInterval reaches the watch: 0 sends every change of ahead; one that is not a duration is INVALID_OPTION`, async () => {
    const line = defineQueue<number>('sse-line', { concurrency: 1 })
    for (let i = 0; i < 3; i++) await enqueue(t.db, line, i, { id: `a${i}` })
    await enqueue(t.db, line, 3, { id: 'w' })
    expect(() => jobEvents(t.db, line, 'w', { aheadInterval: 'soon' as never })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION' }),
    )
    expect(activeWatchers().watchers).toBe(0)
    const app = new Hono()
    app.get('/w', (c) =>
      jobEvents(t.db, line, 'w', { request: c.req.raw, aheadInterval: 0, serialize: (job) => ({ state: job.state, ahead: job.ahead }) }),
    )
    const base = await new Promise<string>((resolve) => {
      servers.push(serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => resolve(`http://127.0.0.1:${info.port}`)))
    })
    const live = { text: '' }
    const reading = readEvents(await fetch(`${base}/w`), undefined, live)
    await waitFor(() => live.text.includes('"ahead":3'), 'the first event')
    // The jobs ahead run one at a time, each held until the event of the move it made was sent; the watched job
    // too, until its running event was sent, so that its run and its end are two changes the watch sees apart.
    const opens: (() => void)[] = []
    const gates = Array.from({ length: 4 }, () => new Promise<void>((resolve) => opens.push(resolve)))
    workers.push(work(t.db, line, async (value) => gates[value]))
    for (let i = 0; i < 3; i++) {
      await waitFor(() => live.text.includes(`"ahead":${2 - i}`), `ahead ${2 - i}`)
      opens[i]!()
    }
    await waitFor(() => live.text.includes('"state":"running"'), 'the running event')
    opens[3]!()
    const { events } = await reading
    expect(events.filter((e) => e.data !== undefined).map((e) => e.data)).toEqual([
      { state: 'waiting', ahead: 3 },
      { state: 'waiting', ahead: 2 },
      { state: 'waiting', ahead: 1 },
      { state: 'waiting', ahead: 0 },
      { state: 'running', ahead: null },
      { state: 'done', ahead: null },
    ])
  })
})
