/**
 * Serving a fetch-style handler from node:http: the request becomes a
 * standard `Request` (headers, URL, and a signal that aborts when the client
 * goes away), and the `Response` is streamed back, server-sent events
 * included. The dashboard's requests carry no body it reads, so none is read.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'

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
      request = new Request(new URL(req.url ?? '/', `http://${req.headers.host ?? 'localhost'}`), { method: req.method ?? 'GET', headers, signal: gone.signal })
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' }).end('bad request\n')
      return
    }
    void handle(request).then(
      (response) => send(response, res),
      (error: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' })
        res.end(`the dashboard failed: ${(error as Error)?.message ?? String(error)}\n`)
      },
    )
  }
}

async function send(response: Response, res: ServerResponse): Promise<void> {
  const headers: Record<string, string | string[]> = {}
  response.headers.forEach((value, name) => {
    if (name !== 'set-cookie') headers[name] = value
  })
  const cookies = response.headers.getSetCookie()
  if (cookies.length > 0) headers['set-cookie'] = cookies
  res.writeHead(response.status, headers)
  if (!response.body) {
    res.end()
    return
  }
  const reader = response.body.getReader()
  res.on('close', () => void reader.cancel().catch(() => {}))
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      res.write(value)
    }
  } catch {
    // The client went away mid-stream.
  }
  res.end()
}
