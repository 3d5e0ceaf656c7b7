/**
 * drizzle-jobs/sse: a job's watch as server-sent events, in a standard
 * `Response` that Hono, Next.js route handlers and any fetch-style server
 * return as is, and that `pipeResponse` writes to a `node:http` response.
 */
import type { ServerResponse } from 'node:http'
import { andThen, type Answer } from '../dialect/index.js'
import type { AsyncSqliteDatabase, Database, PgDatabase, SyncDatabase } from '../dialect/open.js'
import { toTimerMs, type Duration } from '../duration.js'
import { JobsError, isJobsError } from '../errors.js'
import type { QueueRef, ResultOf } from '../queue/ref.js'
import { startWatch, type JobWatch } from '../queue/watch.js'
import { ENDED_STATES, type EndedState, type JobSnapshot } from '../types.js'
import { checkKnownOptions } from '../options.js'

/** The options of {@link jobEvents}. */
export interface JobEventsOptions<Result = unknown> {
  /**
   * The incoming request: its signal ends the watch when the client goes
   * away, and its `Last-Event-ID` header tells a reconnect after the end
   * (answered 204, which tells EventSource to stop reconnecting).
   */
  request?: Request
  /** Ends the stream when aborted, like the client going away. */
  signal?: AbortSignal
  /** How long a client waits before reconnecting after a dropped connection, sent as `retry:`. Defaults to `'1s'`. */
  retry?: Duration
  /** How often a comment line is sent to keep proxies from closing a quiet stream. Defaults to `'15s'`. */
  heartbeat?: Duration
  /** What each event's data holds (as JSON). Defaults to the whole snapshot; pick fields to keep `result` or `error` from the browser. */
  serialize?: (snapshot: JobSnapshot<Result>) => unknown
  /** Headers added to the response. */
  headers?: HeadersInit
  /**
   * The least time between two events that change only `ahead`, passed to {@link watch}: every other change is
   * sent as it happens. `0` sends every change of `ahead`. Defaults to `'250ms'`.
   */
  aheadInterval?: Duration
}

/** The id of the last event, the job's ended state: a reconnect that carries it has nothing more to get. */
export const END_EVENT_ID = 'end'

const OPTIONS = new Set(['request', 'signal', 'retry', 'heartbeat', 'serialize', 'headers', 'aheadInterval'])

/**
 * jobEvents streams a {@link watch} of the job as server-sent events: a
 * `retry:` line, then one `data:` event per snapshot (JSON), comment lines
 * as heartbeats, and the stream ends after the event of an ended state
 * (marked `id: end`). When the client goes away (the request's signal, or
 * the body stream canceled) the watch stops and frees what it held.
 *
 * EventSource reconnects whenever a stream ends: close it in the browser on
 * an ended state. One that reconnects anyway, after the end, gets 204 No
 * Content, which makes it stop.
 *
 * `ahead` alone is sent at most once per `aheadInterval` (250 ms by
 * default), as {@link watch} yields it; every other change is sent as it
 * happens.
 *
 * On SQLite it answers the response at once; on PostgreSQL a promise of it,
 * once the job's first snapshot has been read (so that an unknown job is
 * still a 404), which Hono, Next.js and {@link pipeResponse} take as is.
 *
 * Answers 404 (text) when the queue holds no such job. Throws
 * INVALID_OPTION for a bad option (an `aheadInterval` that is not a
 * duration, say), id or queue name, SCHEMA_MISSING when the tables were not
 * migrated.
 *
 * @example
 * // Hono
 * app.get('/replies/:id/events', (c) => jobEvents(db, replies, c.req.param('id'), { request: c.req.raw }))
 * // Next.js route handler
 * export function GET(request: Request, { params }: { params: { id: string } }) {
 *   return jobEvents(db, replies, params.id, { request })
 * }
 */
export function jobEvents<Q extends QueueRef>(db: SyncDatabase, queue: Q, id: string, options?: JobEventsOptions<ResultOf<Q>>): Response
export function jobEvents<Q extends QueueRef>(
  db: PgDatabase | AsyncSqliteDatabase,
  queue: Q,
  id: string,
  options?: JobEventsOptions<ResultOf<Q>>,
): Promise<Response>
export function jobEvents<Q extends QueueRef>(
  db: Database,
  queue: Q,
  id: string,
  options?: JobEventsOptions<ResultOf<Q>>,
): Response | Promise<Response>
export function jobEvents<Q extends QueueRef>(
  db: Database,
  queue: Q,
  id: string,
  options: JobEventsOptions<ResultOf<Q>> = {},
): Response | Promise<Response> {
  checkKnownOptions(options, OPTIONS, 'jobEvents')
  const retryMs = toTimerMs(options.retry ?? '1s', 'retry')
  const heartbeatMs = toTimerMs(options.heartbeat ?? '15s', 'heartbeat')
  if (heartbeatMs === 0) throw new JobsError('INVALID_OPTION', 'heartbeat: must be longer than 0 ms')
  const serialize = options.serialize ?? ((snapshot: JobSnapshot<ResultOf<Q>>) => snapshot)
  const stop = new AbortController()
  for (const signal of [options.signal, options.request?.signal]) {
    if (signal?.aborted) stop.abort()
    else signal?.addEventListener('abort', () => stop.abort(), { once: true })
  }
  const headers = new Headers(options.headers)
  const notFound = (error: unknown): Response => {
    if (!isJobsError(error, 'NOT_FOUND')) throw error
    headers.set('content-type', 'text/plain; charset=utf-8')
    return new Response(error.message, { status: 404, headers })
  }
  // At once where the job is read at once; else once its read answers, so that an unknown job is still a 404.
  let started: Answer<JobWatch<ResultOf<Q>>>
  try {
    started = startWatch(db, queue, id, { signal: stop.signal, aheadInterval: options.aheadInterval })
  } catch (error) {
    return notFound(error)
  }
  if (options.request?.headers.get('last-event-id') === END_EVENT_ID) {
    andThen(
      started,
      (watching) => void watching.return(),
      () => {},
    )
    return new Response(null, { status: 204, headers })
  }
  return andThen(
    started,
    (watching) => {
      headers.set('content-type', 'text/event-stream; charset=utf-8')
      headers.set('cache-control', 'no-cache, no-transform')
      headers.set('x-accel-buffering', 'no')
      return new Response(eventStream(watching, serialize, retryMs, heartbeatMs, stop), { status: 200, headers })
    },
    notFound,
  )
}

function eventStream<Result>(
  watching: JobWatch<Result>,
  serialize: (snapshot: JobSnapshot<Result>) => unknown,
  retryMs: number,
  heartbeatMs: number,
  stop: AbortController,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder()
  let heartbeat: ReturnType<typeof setInterval> | undefined
  let closed = false
  const finish = (controller?: ReadableStreamDefaultController<Uint8Array>): void => {
    if (closed) return
    closed = true
    clearInterval(heartbeat)
    stop.abort()
    void watching.return()
    controller?.close()
  }
  return new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(encoder.encode(`retry: ${retryMs}\n\n`))
      heartbeat = setInterval(() => {
        if (!closed) controller.enqueue(encoder.encode(': heartbeat\n\n'))
      }, heartbeatMs)
      ;(heartbeat as { unref?: () => void }).unref?.()
    },
    async pull(controller) {
      let next: IteratorResult<JobSnapshot<Result>, undefined>
      try {
        next = await watching.next()
      } catch (error) {
        if (closed) return
        const code = isJobsError(error) ? error.code : 'ERROR'
        const message = error instanceof Error ? error.message : String(error)
        controller.enqueue(encoder.encode(`id: ${END_EVENT_ID}\nevent: error\ndata: ${JSON.stringify({ code, message })}\n\n`))
        return finish(controller)
      }
      if (closed) return
      if (next.done) return finish(controller)
      const ended = ENDED_STATES.includes(next.value.state as EndedState)
      controller.enqueue(encoder.encode(`${ended ? `id: ${END_EVENT_ID}\n` : ''}data: ${JSON.stringify(serialize(next.value))}\n\n`))
      if (ended) finish(controller)
    },
    cancel() {
      finish()
    },
  })
}

/**
 * pipeResponse writes a fetch `Response` (such as {@link jobEvents}'
 * answer, or its promise on PostgreSQL) to a `node:http` response: status, headers, then the body as it
 * comes. When the client goes away it cancels the body, which stops the
 * watch. Resolves once the response has ended.
 *
 * @example
 * createServer((req, res) => {
 *   const id = new URL(req.url!, 'http://x').searchParams.get('id')!
 *   void pipeResponse(jobEvents(db, replies, id, { heartbeat: '15s' }), res)
 * }).listen(3000)
 */
export async function pipeResponse(answer: Response | PromiseLike<Response>, res: ServerResponse): Promise<void> {
  const response = await answer
  const headers: Record<string, string | string[]> = {}
  response.headers.forEach((value, name) => {
    headers[name] = name === 'set-cookie' ? response.headers.getSetCookie() : value
  })
  res.writeHead(response.status, headers)
  res.flushHeaders()
  if (!response.body) {
    res.end()
    return
  }
  const reader = response.body.getReader()
  const cancel = (): void => {
    reader.cancel().catch(() => {})
  }
  res.once('close', cancel)
  try {
    for (;;) {
      const { value, done } = await reader.read()
      if (done || res.destroyed) break
      if (!res.write(value))
        await new Promise((resolve) => {
          res.once('drain', resolve)
          res.once('close', resolve)
        })
    }
  } finally {
    res.off('close', cancel)
    if (!res.writableEnded && !res.destroyed) res.end()
  }
}
