/**
 * A job's watch as server-sent events, written with `watch` for a database
 * that `drizzle-jobs/sse`'s `jobEvents` does not take yet (PostgreSQL). The
 * same stream as jobEvents: a `retry:` line, one `data:` event per snapshot,
 * comment lines as heartbeats, and the end marked `id: end`, after which a
 * reconnect gets 204 No Content (which makes EventSource stop). When the
 * client goes away, the watch stops.
 */
import { isJobsError, watch, type JobSnapshot, type PgDatabase, type QueueRef, type ResultOf } from 'drizzle-jobs'

const END_EVENT_ID = 'end'
const RETRY_MS = 1_000
const HEARTBEAT_MS = 15_000
const ENDED = new Set(['done', 'failed', 'canceled'])

/** Answers 404 when the queue holds no such job. */
export async function watchEvents<Q extends QueueRef>(
  db: PgDatabase,
  queue: Q,
  id: string,
  request: Request,
  serialize: (snapshot: JobSnapshot<ResultOf<Q>>) => unknown,
): Promise<Response> {
  if (request.headers.get('last-event-id') === END_EVENT_ID) return new Response(null, { status: 204 })
  const stop = new AbortController()
  request.signal.addEventListener('abort', () => stop.abort(), { once: true })
  const watching = watch(db, queue, id, { signal: stop.signal })
  let first: IteratorResult<JobSnapshot<ResultOf<Q>>, undefined>
  try {
    // On PostgreSQL the job is read by the first next(): a missing job answers NOT_FOUND there.
    first = await watching.next()
  } catch (error) {
    stop.abort()
    if (isJobsError(error, 'NOT_FOUND'))
      return new Response(error.message, { status: 404, headers: { 'content-type': 'text/plain; charset=utf-8' } })
    throw error
  }
  const encoder = new TextEncoder()
  const event = (snapshot: JobSnapshot<ResultOf<Q>>): Uint8Array => {
    const ended = ENDED.has(snapshot.state)
    return encoder.encode(`${ended ? `id: ${END_EVENT_ID}\n` : ''}data: ${JSON.stringify(serialize(snapshot))}\n\n`)
  }
  let heartbeat: NodeJS.Timeout | undefined
  let closed = false
  const finish = (controller?: ReadableStreamDefaultController<Uint8Array>): void => {
    if (closed) return
    closed = true
    clearInterval(heartbeat)
    stop.abort()
    void watching.return()
    controller?.close()
  }
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(encoder.encode(`retry: ${RETRY_MS}\n\n`))
      if (first.done) return finish(controller)
      controller.enqueue(event(first.value))
      if (ENDED.has(first.value.state)) return finish(controller)
      heartbeat = setInterval(() => controller.enqueue(encoder.encode(': heartbeat\n\n')), HEARTBEAT_MS)
    },
    async pull(controller) {
      let next: IteratorResult<JobSnapshot<ResultOf<Q>>, undefined>
      try {
        next = await watching.next()
      } catch (error) {
        if (closed) return
        const code = isJobsError(error) ? error.code : 'ERROR'
        controller.enqueue(
          encoder.encode(`id: ${END_EVENT_ID}\nevent: error\ndata: ${JSON.stringify({ code, message: String(error) })}\n\n`),
        )
        return finish(controller)
      }
      if (closed) return
      if (next.done) return finish(controller)
      controller.enqueue(event(next.value))
      if (ENDED.has(next.value.state)) finish(controller)
    },
    cancel() {
      finish()
    },
  })
  return new Response(body, {
    headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' },
  })
}
