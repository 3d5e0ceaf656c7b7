/**
 * The web dashboard: queues with live counts and a throughput chart, job
 * lists by state with search, a job's detail with live progress, and the
 * actions retry, cancel, pause and resume. Server-rendered HTML with htmx,
 * updated over server-sent events; nothing for the user to build.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { cancel, retryJob } from '../admin/jobs.js'
import { inspectJob } from '../admin/list.js'
import { pauseQueue, resumeQueue } from '../admin/queues.js'
import { connectionOf, type Database } from '../dialect/open.js'
import { describe } from '../duration.js'
import { JobsError, isJobsError } from '../errors.js'
import { STATES, type JobState } from '../types.js'
import { CLIENT_JS, STYLE_CSS, htmxSource } from './assets.js'
import { carriesToken, isOwnAction, sameToken, tokenCookie, tokenCookieName } from './auth.js'
import { Throughput } from './chart.js'
import { allowedHostsOption, isAllowedHost, requestHost, type AllowedHost, type Host } from './hosts.js'
import { html, type Html } from './html.js'
import { LiveHub } from './live.js'
import { nodeListener } from './node.js'
import { jobPath, segmentText } from './paths.js'
import { flash, page, type View, type ViewContext } from './views.js'
import { checkKnownOptions } from '../options.js'

/** The options of {@link dashboard}. */
export interface DashboardOptions {
  /** The path the dashboard is mounted under, such as `'/jobs'`; its links are made under it. Defaults to `''` (the root). */
  basePath?: string
  /**
   * When set, every request must carry this token: an `Authorization: Bearer` header, or the cookie
   * that opening any page with `?token=…` sets. Without it, guard the mount point as the app guards
   * its own admin pages.
   */
  token?: string
  /**
   * Host names, besides loopback ones, that a dashboard without a token answers, such as
   * `['jobs.internal']` behind a proxy that keeps the Host header. A name matches whatever its case
   * and port; one with a leading dot (`'.example.com'`) also matches every subdomain; one with a port
   * (`'jobs.internal:8080'`) matches that port only. Defaults to none.
   */
  allowedHosts?: string[]
  /** What the header shows. Defaults to the database file's name (on PostgreSQL, the database's). */
  title?: string
  /**
   * The URL of a trace in the team's tracing tool, given its trace id (32 lowercase hex digits): a job's page then
   * links the trace id of the code that added it (stored where an OpenTelemetry SDK was registered), opening it in
   * a new tab. An answer that is not an absolute http or https URL makes no link. Without it, the trace id shows as
   * text.
   *
   * @example
   * dashboard(db, { traceUrl: (id) => `http://localhost:16686/trace/${id}` })
   */
  traceUrl?: (traceId: string) => string
}

/** A mounted dashboard: a fetch handler, the same as a node:http listener, and `close`. */
export interface Dashboard {
  /** Answers a request: for Hono (`app.mount('/jobs', jobs.fetch)`), Next.js route handlers, Bun, Deno. */
  fetch(request: Request): Promise<Response>
  /** The same as a node:http listener: `http.createServer(jobs.node)`. */
  readonly node: (req: IncomingMessage, res: ServerResponse) => void
  /** Ends the live streams and stops listening for changes. */
  close(): void
}

const OPTIONS = new Set(['basePath', 'token', 'allowedHosts', 'title', 'traceUrl'])

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
}

/**
 * dashboard answers a handler for the web dashboard of the database behind
 * `db`, to mount in the app's own server. Its pages show every queue with
 * live counts by state (read from the queue counters, never by counting
 * jobs), jobs done and failed per 10 seconds over the last 10 minutes, job
 * lists by state (keyset pages, as {@link listJobs}) with search by id and
 * group, and a job's detail: value, result, error with its stack, steps,
 * attempts, lease, live progress and the trace id of the code that added it
 * (a link to the trace with `traceUrl`). Buttons retry and cancel jobs and pause
 * and resume queues, as the admin API does. Pages update live over
 * server-sent events: at once for changes this process makes, within 250 ms
 * for other processes'.
 *
 * Actions only run when sent by the dashboard's own pages (htmx's
 * `HX-Request` header, which a form on another site cannot send) or with
 * the bearer token; with `token` set, every request needs the token.
 * Without a token, it answers only requests addressed (by their Host
 * header) to a loopback name or address — `localhost` and its subdomains,
 * 127.0.0.0/8, `[::1]`, with any port — or to a host `allowedHosts` names,
 * and refuses others with 421: a web page that points its own DNS name at
 * 127.0.0.1 cannot read jobs or act through it.
 *
 * Throws INVALID_OPTION for a bad option, SCHEMA_MISSING when the tables
 * were not migrated.
 *
 * @example
 * // Hono
 * const jobs = dashboard(db, { basePath: '/jobs' })
 * app.use('/jobs/*', basicAuth({ username: 'ops', password }))
 * app.mount('/jobs', jobs.fetch)
 * // node:http
 * http.createServer(dashboard(db).node).listen(4580, '127.0.0.1')
 */
export function dashboard(db: Database, options: DashboardOptions = {}): Dashboard {
  if (typeof options !== 'object' || options === null)
    throw new JobsError('INVALID_OPTION', `options: expected an object, got ${describe(options)}`)
  checkKnownOptions(options, OPTIONS, 'dashboard')
  const base = (options.basePath ?? '').replace(/\/+$/, '')
  if (base !== '' && !base.startsWith('/'))
    throw new JobsError('INVALID_OPTION', `basePath: expected a path starting with '/', such as '/jobs', got ${describe(options.basePath)}`)
  const token = options.token
  if (token !== undefined && (typeof token !== 'string' || token === ''))
    throw new JobsError('INVALID_OPTION', 'token: expected a non-empty string')
  const allowedHosts = allowedHostsOption(options.allowedHosts)
  const traceUrl = options.traceUrl
  if (traceUrl !== undefined && typeof traceUrl !== 'function')
    throw new JobsError('INVALID_OPTION', `traceUrl: expected a function from a trace id to its URL, got ${describe(traceUrl)}`)
  const connection = connectionOf(db)
  const ctx: ViewContext = {
    db,
    connection,
    throughput: new Throughput(connection),
    base,
    label: options.title ?? connection.label,
    traceUrl,
  }
  const hub = new LiveHub(ctx)
  const fetch = async (request: Request): Promise<Response> => {
    try {
      return await route(ctx, hub, { token, allowedHosts }, request)
    } catch (error) {
      if (isJobsError(error, 'NOT_FOUND')) return htmlResponse(flash(error.message, false), 404)
      if (isJobsError(error, 'UNIQUE_KEY_HELD')) return htmlResponse(flash(error.message, false), 409)
      if (isJobsError(error, 'INVALID_OPTION') || isJobsError(error, 'TOO_LARGE')) return htmlResponse(flash(error.message, false), 400)
      throw error
    }
  }
  return { fetch, node: nodeListener(fetch), close: () => hub.close() }
}

/** Who may reach a dashboard: with a token, whoever brings it; without, requests addressed to a loopback or allowed host. */
interface Access {
  token: string | undefined
  allowedHosts: readonly AllowedHost[]
}

async function route(ctx: ViewContext, hub: LiveHub, access: Access, request: Request): Promise<Response> {
  const { token } = access
  const host = requestHost(request)
  if (token === undefined && !isAllowedHost(host, access.allowedHosts)) return misdirected(host)
  const url = new URL(request.url)
  let path = url.pathname
  if (ctx.base !== '' && (path === ctx.base || path.startsWith(`${ctx.base}/`))) path = path.slice(ctx.base.length)
  let segments: string[]
  try {
    segments = path.split('/').filter(Boolean).map(segmentText)
  } catch {
    return htmlResponse(flash('That address is not well formed.', false), 400)
  }

  if (segments[0] === 'assets' && segments.length === 2 && request.method === 'GET') return asset(segments[1]!)
  if (token !== undefined) {
    const cookieName = tokenCookieName(ctx.base, host?.port ?? null)
    const given = url.searchParams.get('token')
    if (given !== null && request.method === 'GET') {
      if (!sameToken(given, token)) return unauthorized()
      url.searchParams.delete('token')
      const location = `${ctx.base}${path}${url.search}` || '/'
      return new Response(null, {
        status: 303,
        headers: { location, 'set-cookie': tokenCookie(cookieName, token, ctx.base), 'referrer-policy': 'no-referrer' },
      })
    }
    if (!carriesToken(request, token, cookieName)) return unauthorized()
  }

  const [first, queue, third, id, fifth] = segments
  if (request.method === 'POST') {
    if (!isOwnAction(request))
      return htmlResponse(flash('Actions are taken from the dashboard’s own pages (or with the bearer token).', false), 403)
    if (first === 'queues' && queue !== undefined && segments.length === 3 && (third === 'pause' || third === 'resume')) {
      if (third === 'pause') await pauseQueue(ctx.db, queue)
      else await resumeQueue(ctx.db, queue)
      return htmlResponse(
        flash(third === 'pause' ? `Queue ${queue} is paused: workers claim nothing more from it.` : `Queue ${queue} is resumed.`, true),
      )
    }
    if (
      first === 'queues' &&
      queue !== undefined &&
      third === 'jobs' &&
      id !== undefined &&
      segments.length === 5 &&
      (fifth === 'retry' || fifth === 'cancel')
    ) {
      return jobAction(ctx, queue, id, fifth)
    }
    return notFound()
  }
  if (request.method !== 'GET' && request.method !== 'HEAD')
    return new Response('method not allowed\n', { status: 405, headers: { allow: 'GET, POST' } })

  if (segments.length === 0) return pageResponse(ctx, { page: 'overview' }, 'Queues')
  if (first === 'events' && segments.length === 1) {
    const view = viewOf(url.searchParams)
    return view ? hub.stream(view, request.signal) : htmlResponse(flash('Unknown view.', false), 400)
  }
  if (first === 'queues' && queue !== undefined && segments.length === 2) {
    const view = queueView(queue, url.searchParams)
    return view
      ? pageResponse(ctx, view, `Queue ${queue}`)
      : htmlResponse(flash(`Unknown state: expected one of ${STATES.join(', ')}.`, false), 400)
  }
  if (first === 'queues' && queue !== undefined && third === 'jobs' && id !== undefined && segments.length === 4) {
    if (!(await inspectJob(ctx.db, queue, id)))
      return htmlResponse(pageShell(ctx, flash(`Queue ${queue} holds no job with id ${id}: it may have been pruned.`, false)), 404)
    return pageResponse(ctx, { page: 'job', queue, id }, `Job ${id}`)
  }
  return notFound()
}

async function jobAction(ctx: ViewContext, queue: string, id: string, action: 'retry' | 'cancel'): Promise<Response> {
  const link = html`<a href="${jobPath(ctx, queue, id)}">${id}</a>`
  if (action === 'retry') {
    if (await retryJob(ctx.db, queue, id))
      return htmlResponse(html`<p class="flash" data-flash="ok">Job ${link} is waiting again, with fresh attempts.</p>`)
    return htmlResponse(
      html`<p class="flash error" data-flash="error">Job ${link} is ${(await inspectJob(ctx.db, queue, id))?.state ?? 'gone'}: only failed or canceled jobs can be retried. Nothing changed.</p>`,
      409,
    )
  }
  if (await cancel(ctx.db, queue, id)) return htmlResponse(html`<p class="flash" data-flash="ok">Job ${link} is canceled.</p>`)
  return htmlResponse(
    html`<p class="flash error" data-flash="error">Job ${link} has already ended (${(await inspectJob(ctx.db, queue, id))?.state ?? 'gone'}). Nothing changed.</p>`,
    409,
  )
}

/** The view an events stream follows, from its query: the page's own view. */
function viewOf(params: URLSearchParams): View | null {
  const view = params.get('view')
  const queue = params.get('queue')
  if (view === 'overview') return { page: 'overview' }
  if (view === 'queue' && queue) return queueView(queue, params)
  const id = params.get('id')
  // Any id a row holds, the empty one included.
  if (view === 'job' && queue && id !== null) return { page: 'job', queue, id }
  return null
}

function queueView(queue: string, params: URLSearchParams): Extract<View, { page: 'queue' }> | null {
  const state = params.get('state') || null
  if (state !== null && !STATES.includes(state as JobState)) return null
  return {
    page: 'queue',
    queue,
    state: state as JobState | null,
    group: params.get('group') || null,
    id: params.get('id') || null,
    cursor: params.get('cursor') || null,
  }
}

function eventsUrl(ctx: ViewContext, view: View): string {
  const query = new URLSearchParams({ view: view.page })
  if (view.page !== 'overview') query.set('queue', view.queue)
  if (view.page === 'job') query.set('id', view.id)
  if (view.page === 'queue') {
    if (view.state) query.set('state', view.state)
    if (view.group) query.set('group', view.group)
    if (view.id) query.set('id', view.id)
    if (view.cursor) query.set('cursor', view.cursor)
  }
  return `${ctx.base}/events?${query}`
}

async function pageResponse(ctx: ViewContext, view: View, title: string): Promise<Response> {
  return htmlResponse(await page(ctx, view, title, eventsUrl(ctx, view)))
}

function pageShell(ctx: ViewContext, content: Html): Html {
  return html`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>drizzle-jobs</title><link rel="icon" href="data:,"><link rel="stylesheet" href="${ctx.base}/assets/dashboard.css"></head>
<body><header><a class="brand" href="${ctx.base || '/'}">drizzle-jobs</a><span class="file">${ctx.label}</span></header><main>${content}</main></body></html>`
}

function htmlResponse(body: Html, status = 200): Response {
  return new Response(body.text, {
    status,
    headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...SECURITY_HEADERS },
  })
}

function notFound(): Response {
  return htmlResponse(flash('Nothing here.', false), 404)
}

function misdirected(host: Host | null): Response {
  const named = host === null ? 'a host that is not well formed' : host.name
  return htmlResponse(
    flash(
      `This dashboard answers requests addressed to localhost, 127.0.0.1 or [::1], not to ${named}. To serve it under that name, list the name in the dashboard's allowedHosts option, or give the dashboard a token.`,
      false,
    ),
    421,
  )
}

function unauthorized(): Response {
  return htmlResponse(
    flash('This dashboard needs its token: open the address it printed when it started (the one ending in ?token=…).', false),
    401,
  )
}

const ASSETS = new Map<string, { type: string; body: () => string }>([
  ['htmx.min.js', { type: 'text/javascript; charset=utf-8', body: htmxSource }],
  ['dashboard.js', { type: 'text/javascript; charset=utf-8', body: () => CLIENT_JS }],
  ['dashboard.css', { type: 'text/css; charset=utf-8', body: () => STYLE_CSS }],
])

function asset(name: string): Response {
  const found = ASSETS.get(name)
  if (!found) return notFound()
  return new Response(found.body(), {
    headers: { 'content-type': found.type, 'cache-control': 'public, max-age=3600', 'x-content-type-options': 'nosniff' },
  })
}
