/**
 * Live updates over server-sent events. One hub per dashboard notices
 * changes — at once for commits of this process; for other processes', by
 * one `PRAGMA data_version` check per poll on SQLite, by their NOTIFY on
 * PostgreSQL — and has each open page render its live regions again,
 * sending only those that changed. A job's page also watches the job, so its
 * progress shows as the worker sets it, from this process or another.
 */
import { isJobsError } from '../errors.js'
import { getJob } from '../queue/read.js'
import { watch } from '../queue/watch.js'
import { onJobsChanged } from '../engine/wake.js'
import { ENDED_STATES, type EndedState } from '../types.js'
import type { Html } from './html.js'
import { liveRegions, type View, type ViewContext } from './views.js'

/** How often the hub looks for other processes' commits. */
const POLL_MS = 250
/** Pages are rendered again at most this often, however fast jobs change. */
const MIN_REFRESH_GAP_MS = 200
/** A job page shows progress changes at most this often. */
const MIN_PROGRESS_GAP_MS = 100
/** Pages are rendered again this often with no change, as times go by and the chart moves on. */
const TICK_MS = 5_000
/** A comment line this often keeps proxies from closing an idle stream. */
const HEARTBEAT_MS = 15_000
/** The browser reconnects after this long if the stream breaks. */
const RETRY_MS = 2_000

const encoder = new TextEncoder()

export class LiveHub {
  private readonly clients = new Set<LiveClient>()
  private timers: NodeJS.Timeout[] = []
  private unsubscribe: (() => void) | null = null
  private lastVersion: number | null = null
  private polling = false
  private refreshTimer: NodeJS.Timeout | null = null
  private lastRefresh = 0

  constructor(readonly ctx: ViewContext) {}

  /** A `text/event-stream` response that sends the view's regions now and whenever they change. */
  stream(view: View, signal: AbortSignal | undefined): Response {
    let client: LiveClient
    const body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        client = new LiveClient(this, view, controller)
        this.add(client)
        controller.enqueue(encoder.encode(`retry: ${RETRY_MS}\n\n`))
        client.refresh()
        signal?.addEventListener('abort', () => client.close(), { once: true })
      },
      cancel: () => client.close(),
    })
    return new Response(body, {
      headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' },
    })
  }

  /** Ends every stream and stops listening. */
  close(): void {
    for (const client of [...this.clients]) client.close()
  }

  get size(): number {
    return this.clients.size
  }

  private add(client: LiveClient): void {
    this.clients.add(client)
    if (this.unsubscribe) return
    this.lastVersion = null
    void this.poll()
    const local = onJobsChanged(this.ctx.connection.key, () => this.changed())
    // Other processes' changes as they tell of them (PostgreSQL's NOTIFY); SQLite's are found by the poll.
    const remote = this.ctx.connection.listen(() => this.changed())
    this.unsubscribe = () => {
      local()
      remote()
    }
    this.timers = [
      setInterval(() => void this.poll(), POLL_MS),
      setInterval(() => this.changed(), TICK_MS),
      setInterval(() => {
        for (const each of this.clients) each.heartbeat()
      }, HEARTBEAT_MS),
    ]
  }

  remove(client: LiveClient): void {
    this.clients.delete(client)
    if (this.clients.size > 0 || !this.unsubscribe) return
    this.unsubscribe()
    this.unsubscribe = null
    for (const timer of this.timers) clearInterval(timer)
    this.timers = []
    if (this.refreshTimer) clearTimeout(this.refreshTimer)
    this.refreshTimer = null
  }

  private async poll(): Promise<void> {
    // One look at a time: on PostgreSQL a look is a promise, which may outlast the interval.
    if (this.polling) return
    this.polling = true
    let version: number
    try {
      version = await this.ctx.connection.executor.dataVersion()
    } catch (error) {
      if (this.ctx.connection.isBusy(error)) return
      return this.close()
    } finally {
      this.polling = false
    }
    const first = this.lastVersion === null
    if (version === this.lastVersion) return
    this.lastVersion = version
    if (!first) this.changed()
  }

  /** Something may have changed: render every page again, soon, and not more often than the gap allows. */
  changed(): void {
    if (this.refreshTimer) return
    const wait = Math.max(0, this.lastRefresh + MIN_REFRESH_GAP_MS - Date.now())
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = null
      // Inside a transaction of this connection the reads would see writes that may yet roll back.
      if (this.ctx.connection.inTransaction()) return this.changed()
      this.lastRefresh = Date.now()
      for (const client of this.clients) client.refresh()
    }, wait)
  }
}

class LiveClient {
  private readonly sent = new Map<string, string>()
  private closed = false
  /** A render under way, and whether another was asked for meanwhile: renders never overlap, and the last one asked for runs. */
  private rendering = false
  private again = false
  private watching: AbortController | null = null
  private progress: { value: unknown } | undefined
  private progressTimer: NodeJS.Timeout | null = null
  private lastProgressRefresh = 0

  constructor(
    private readonly hub: LiveHub,
    private readonly view: View,
    private readonly controller: ReadableStreamDefaultController<Uint8Array>,
  ) {}

  /** Renders the view's regions and sends those that differ from what the page shows. */
  refresh(): void {
    if (this.closed) return
    if (this.rendering) {
      this.again = true
      return
    }
    this.rendering = true
    void this.render().finally(() => {
      this.rendering = false
      if (this.again) {
        this.again = false
        this.refresh()
      }
    })
  }

  private async render(): Promise<void> {
    let regions: Record<string, Html>
    try {
      regions = await liveRegions(this.hub.ctx, this.view, this.progress)
    } catch (error) {
      // A busy database is tried again; anything else ends this stream, and the browser reconnects.
      if (this.hub.ctx.connection.isBusy(error)) return this.hub.changed()
      return this.close()
    }
    if (this.closed) return
    const changed: Record<string, string> = {}
    for (const [name, markup] of Object.entries(regions)) {
      if (this.sent.get(name) === markup.text) continue
      this.sent.set(name, markup.text)
      changed[name] = markup.text
    }
    if (Object.keys(changed).length > 0) this.write(`data: ${JSON.stringify(changed)}\n\n`)
    if (this.view.page === 'job') await this.followJob(this.view)
  }

  heartbeat(): void {
    this.write(': still here\n\n')
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    this.watching?.abort()
    if (this.progressTimer) clearTimeout(this.progressTimer)
    this.hub.remove(this)
    try {
      this.controller.close()
    } catch {
      // The stream was already cancelled by the client going away.
    }
  }

  private write(text: string): void {
    if (this.closed) return
    try {
      this.controller.enqueue(encoder.encode(text))
    } catch {
      this.close()
    }
  }

  /** Watches a job that has not ended, for its progress; a job that ended and was retried is watched again. */
  private async followJob(view: Extract<View, { page: 'job' }>): Promise<void> {
    if (this.watching || this.closed) return
    let now: Awaited<ReturnType<typeof getJob>>
    try {
      now = await getJob(this.hub.ctx.db, view.queue, view.id)
    } catch {
      // Looked for again at the next refresh.
      return
    }
    if (this.watching || this.closed || !now || ENDED_STATES.includes(now.state as EndedState)) return
    const watching = (this.watching = new AbortController())
    void (async () => {
      try {
        for await (const snapshot of watch(this.hub.ctx.db, view.queue, view.id, { signal: watching.signal })) {
          this.progress = snapshot.state === 'running' ? { value: snapshot.progress } : undefined
          this.progressChanged()
        }
      } catch (error) {
        // A job deleted while watched shows as not found at the next refresh; anything else ends the stream.
        if (!isJobsError(error, 'NOT_FOUND')) this.close()
      } finally {
        if (this.watching === watching) this.watching = null
        this.progress = undefined
      }
    })()
  }

  private progressChanged(): void {
    if (this.progressTimer) return
    const wait = Math.max(0, this.lastProgressRefresh + MIN_PROGRESS_GAP_MS - Date.now())
    this.progressTimer = setTimeout(() => {
      this.progressTimer = null
      this.lastProgressRefresh = Date.now()
      this.refresh()
    }, wait)
  }
}
