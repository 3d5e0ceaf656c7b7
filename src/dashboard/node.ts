/**
 * Serving a fetch-style handler from node:http: the request becomes a
 * standard `Request` (headers, URL, and a signal that aborts when the client
 * goes away), and the `Response` is streamed back, server-sent events
 * included. The dashboard's requests carry no body it reads, so none is read.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { pipeResponse } from '../sse/index.js'

export type FetchHandler = (request: Request) => Promise<Response>

export function nodeListener(handle: FetchHandler): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const gone = new AbortController()
    res.on('close', () => gone.abort())
    const headers = new Headers()
    for (const [name, value] of Object.entries(req.headers)) {
      if (Array.isArray(value)) for (const each of value) headers.append(name, each)
      else if (value !== undefined) headers.set(name, value)
    }
    let request: Request
    try {
      request = new Request(new URL(req.url ?? '/', `http://${req.headers.host ?? 'localhost'}`), {
        method: req.method ?? 'GET',
        headers,
        signal: gone.signal,
      })
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' }).end('bad request\n')
      return
    }
    void handle(request).then(
      // pipeResponse honours backpressure; a client that goes away mid-stream ends it, with nothing to report.
      (response) => pipeResponse(response, res).catch(() => {}),
      (error: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' })
        res.end(`the dashboard failed: ${(error as Error)?.message ?? String(error)}\n`)
      },
    )
  }
}
