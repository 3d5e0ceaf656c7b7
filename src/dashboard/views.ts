/**
 * The dashboard's pages and the live regions inside them, rendered on the
 * server from the admin API's reads. Every region a page marks with
 * `data-live` is rendered again by the same function for server-sent updates.
 */
import type { JobDetail, JobEvent, JobRecord } from '../admin/list.js'
import { inspectJob, listJobs } from '../admin/list.js'
import type { QueueCounts } from '../admin/queues.js'
import { queueCounts } from '../admin/queues.js'
import { oldestDueMs } from '../admin/stats.js'
import { listSchedules } from '../admin/schedules.js'
import type { Connection } from '../dialect/index.js'
import type { Database } from '../dialect/open.js'
import { humanSpan } from '../duration.js'
import { getJob } from '../queue/read.js'
import { oneLine } from '../text.js'
import { STATES, type JobState, type JobWait } from '../types.js'
import { BUCKET_MS, renderChart, WINDOW_BUCKETS, type Series, type Throughput } from './chart.js'
import { html, raw, type Html } from './html.js'
import { jobPath, queuePath } from './paths.js'

export interface ViewContext {
  db: Database
  connection: Connection
  throughput: Throughput
  /** The path the dashboard is mounted at, '' at the root. */
  base: string
  /** What the header names: the database file. */
  label: string
  /** The URL of a trace in the team's tracing tool (DashboardOptions.traceUrl), or undefined: trace ids show as text. */
  traceUrl: ((traceId: string) => string) | undefined
}

const PAGE_SIZE = 25

/** What a page shows, parsed from its URL; the same value names the live regions to send it. */
export type View =
  | { page: 'overview' }
  | { page: 'queue'; queue: string; state: JobState | null; group: string | null; id: string | null; cursor: string | null }
  | { page: 'job'; queue: string; id: string }

function listPath(ctx: ViewContext, view: Extract<View, { page: 'queue' }>, changes: Partial<Extract<View, { page: 'queue' }>>): string {
  const next = { ...view, cursor: null, ...changes }
  const query = new URLSearchParams()
  if (next.state) query.set('state', next.state)
  if (next.group) query.set('group', next.group)
  if (next.id) query.set('id', next.id)
  if (next.cursor) query.set('cursor', next.cursor)
  const text = query.toString()
  return `${queuePath(ctx, next.queue)}${text ? `?${text}` : ''}`
}

/**
 * The live regions of a view, by name, as markup: what the page holds and what each update replaces. Each
 * read answers at once on SQLite and is awaited on PostgreSQL.
 */
export async function liveRegions(ctx: ViewContext, view: View, progress?: { value: unknown }): Promise<Record<string, Html>> {
  const now = Date.now()
  switch (view.page) {
    case 'overview': {
      const all = await queueCounts(ctx.db)
      const names = all.map((counts) => counts.queue)
      ctx.throughput.keepOnly(names)
      const perQueue = new Map<string, Series>()
      for (const name of names) perQueue.set(name, await ctx.throughput.series([name], now))
      return { chart: renderChart(sumSeries([...perQueue.values()], now)), queues: await queuesTable(ctx, all, perQueue, now) }
    }
    case 'queue': {
      ctx.throughput.keepOnly([view.queue])
      return {
        summary: queueSummary(ctx, view, await queueCounts(ctx.db, view.queue)),
        chart: renderChart(await ctx.throughput.series([view.queue], now)),
        jobs: await jobsList(ctx, view, now),
        schedules: await schedulesPanel(ctx, view.queue, now),
      }
    }
    case 'job':
      return { job: await jobBody(ctx, view, now, progress) }
  }
}

function sumSeries(all: Series[], now: number): Series {
  const start = all[0]?.start ?? (Math.floor(now / BUCKET_MS) - WINDOW_BUCKETS + 1) * BUCKET_MS
  const done = new Array<number>(WINDOW_BUCKETS).fill(0)
  const failed = new Array<number>(WINDOW_BUCKETS).fill(0)
  for (const series of all) {
    for (const [i, count] of series.done.entries()) done[i]! += count
    for (const [i, count] of series.failed.entries()) failed[i]! += count
  }
  return { start, done, failed }
}

/** Jobs ended in the last minute: the last six buckets of ten seconds. */
function lastMinute(series: Series | undefined, state: 'done' | 'failed'): number {
  return series ? series[state].slice(-6).reduce((sum, count) => sum + count, 0) : 0
}

async function queuesTable(ctx: ViewContext, all: QueueCounts[], series: Map<string, Series>, now: number): Promise<Html> {
  if (all.length === 0) return html`<p class="empty">No queue yet: no job has been added to this database.</p>`
  const rows: Html[] = []
  for (const counts of all) {
    const due = await oldestDueMs(ctx.connection, counts.queue, now)
    rows.push(html`<tr data-queue="${counts.queue}">
<td><a href="${queuePath(ctx, counts.queue)}">${counts.queue}</a></td>
<td>${statusBadge(counts.paused)}</td>
${STATES.map((state) => html`<td class="num" data-count="${state}"><a href="${`${queuePath(ctx, counts.queue)}?state=${state}`}" class="${state === 'failed' && counts.failed > 0 ? 'count-failed' : ''}">${counts[state]}</a></td>`)}
<td class="num">${lastMinute(series.get(counts.queue), 'done')}</td>
<td class="num">${lastMinute(series.get(counts.queue), 'failed')}</td>
<td class="num">${due === null ? '–' : humanSpan(due)}</td>
<td>${pauseButton(ctx, counts.queue, counts.paused)}</td>
</tr>`)
  }
  return html`<table><thead><tr><th>queue</th><th>status</th>${STATES.map((state) => html`<th class="num">${state}</th>`)}<th class="num">done/min</th><th class="num">failed/min</th><th class="num">oldest due</th><th></th></tr></thead>
<tbody>${rows}</tbody></table>`
}

function statusBadge(paused: boolean): Html {
  return paused ? html`<span class="badge paused">paused</span>` : html`<span class="badge active">active</span>`
}

function pauseButton(ctx: ViewContext, queue: string, paused: boolean): Html {
  const action = paused ? 'resume' : 'pause'
  return html`<button hx-post="${`${queuePath(ctx, queue)}/${action}`}" hx-target="#flash" data-action="${action}">${paused ? 'Resume' : 'Pause'}</button>`
}

function queueSummary(ctx: ViewContext, view: Extract<View, { page: 'queue' }>, counts: QueueCounts): Html {
  const total = STATES.reduce((sum, state) => sum + counts[state], 0)
  const tab = (state: JobState | null, label: string, n: number) =>
    html`<a href="${listPath(ctx, view, { state })}" class="${view.state === state ? 'current' : ''}" data-tab="${state ?? 'all'}">${label}<span class="n">${n}</span></a>`
  return html`<div class="tabs">${tab(null, 'all', total)}${STATES.map((state) => tab(state, state, counts[state]))}</div>
<p>${statusBadge(counts.paused)} ${pauseButton(ctx, view.queue, counts.paused)}</p>`
}

/** The queue's recurring schedules (JOB-21): cron and zone, next and last slots, and the last slot's job. */
async function schedulesPanel(ctx: ViewContext, queue: string, now: number): Promise<Html> {
  let schedules: Awaited<ReturnType<typeof listSchedules>>
  try {
    schedules = await listSchedules(ctx.db, queue)
  } catch (error) {
    return html`<p class="flash error">${(error as Error).message}</p>`
  }
  if (schedules.length === 0) return html`<p class="empty">No schedule adds jobs to this queue.</p>`
  const rows = schedules.map(
    (s) => html`<tr data-schedule="${s.name}">
<td>${s.name}</td>
<td><code>${s.cron}</code></td>
<td>${s.tz}</td>
<td>${time(shownTime(s.nextAt), now, s.malformed?.next_at)}</td>
<td>${s.lastSlot === null ? '–' : time(shownTime(s.lastSlot), now, s.malformed?.last_slot)}</td>
<td>${s.lastJob === null ? '–' : s.lastJob.state === null ? html`<span class="muted" title="${s.lastJob.id}">pruned</span>` : html`<a href="${jobPath(ctx, queue, s.lastJob.id)}">${stateBadge(s.lastJob.state)}</a>`}</td>
</tr>`,
  )
  return html`<table><thead><tr><th>schedule</th><th>cron</th><th>zone</th><th>next slot</th><th>last slot</th><th>last job</th></tr></thead>
<tbody>${rows}</tbody></table>`
}

async function jobsList(ctx: ViewContext, view: Extract<View, { page: 'queue' }>, now: number): Promise<Html> {
  let page: Awaited<ReturnType<typeof listJobs>>
  try {
    page = await listJobs(ctx.db, {
      queue: view.queue,
      ...(view.state ? { state: view.state } : {}),
      ...(view.group ? { group: view.group } : {}),
      ...(view.id ? { id: view.id } : {}),
      ...(view.cursor ? { cursor: view.cursor } : {}),
      limit: PAGE_SIZE,
    })
  } catch (error) {
    return html`<p class="flash error">${(error as Error).message}</p>`
  }
  if (page.jobs.length === 0) return html`<p class="empty">No job matches.</p>`
  const rows = page.jobs.map(
    (job) => html`<tr data-job="${job.id}">
<td><a href="${jobPath(ctx, job.queue, job.id)}">${shownId(job.id)}</a></td>
<td>${stateBadge(job.state)}</td>
<td>${job.group ?? ''}</td>
<td class="num">${stored(job.attempt, job.malformed?.attempts)}/${stored(job.attempts, job.malformed?.max_attempts)}</td>
<td class="num">${stored(job.priority, job.malformed?.priority)}</td>
<td>${time(job.createdAt, now, job.malformed?.created_at)}</td>
<td>${when(job, now)}</td>
<td class="wrap">${oneLine(job.error, 80)}</td>
</tr>`,
  )
  return html`<table><thead><tr><th>id</th><th>state</th><th>group</th><th class="num">attempt</th><th class="num">priority</th><th>added</th><th>when</th><th>error</th></tr></thead>
<tbody>${rows}</tbody></table>
${page.next ? html`<p class="pager"><a href="${listPath(ctx, view, { cursor: page.next })}">Next page →</a></p>` : ''}`
}

function when(job: JobRecord, now: number): Html {
  if (job.finishedAt || job.malformed?.finished_at) return html`ended ${time(job.finishedAt, now, job.malformed?.finished_at)}`
  if (job.state === 'running') return html`running`
  if (job.waitsFor) return waitNote(job.waitsFor, now)
  return html`${job.runAt && job.runAt.getTime() > now ? 'runs' : 'due'} ${time(job.runAt, now, job.malformed?.run_at)}`
}

/** What a parked run waits for, and until when: "sleeping ('nap'), wakes in 59m", "waiting for event 'paid', no timeout". */
function waitNote(wait: JobWait, now: number): Html {
  const what = wait.kind === 'sleep' ? html`sleeping ('${wait.step}')` : html`waiting for event '${wait.name}'`
  if (wait.until === null) return html`<span data-waits-for="${wait.kind}">${what}, no timeout</span>`
  const due = wait.until.getTime() <= now ? 'due' : wait.kind === 'sleep' ? 'wakes' : 'times out'
  return html`<span data-waits-for="${wait.kind}">${what}, ${due} ${time(wait.until, now)}</span>`
}

async function jobBody(ctx: ViewContext, view: Extract<View, { page: 'job' }>, now: number, progress?: { value: unknown }): Promise<Html> {
  const job = await inspectJob(ctx.db, view.queue, view.id)
  if (!job) return html`<p class="flash error">Queue ${view.queue} holds no job with id ${view.id}: it may have been pruned.</p>`
  const snapshot = await getJob(ctx.db, view.queue, view.id)
  const shownProgress = job.state === 'running' ? (progress ? progress.value : (snapshot?.progress ?? null)) : null
  return html`<h1>Job ${shownId(job.id)} <span class="badge ${job.state}" data-state="${job.state}">${job.state}</span></h1>
<div class="grid">
<div class="card"><h2>Job</h2><dl class="facts">
<dt>queue</dt><dd><a href="${queuePath(ctx, job.queue)}">${job.queue}</a></dd>
<dt>group</dt><dd>${job.group ?? '–'}</dd>
<dt>priority</dt><dd>${stored(job.priority, job.malformed?.priority)}</dd>
<dt>attempts</dt><dd data-attempts>${stored(job.attempt, job.malformed?.attempts)} of ${stored(job.attempts, job.malformed?.max_attempts)}</dd>
${snapshot?.ahead !== null && snapshot?.ahead !== undefined ? html`<dt>ahead</dt><dd data-ahead>${snapshot.ahead >= 10_000 ? '10,000 or more' : snapshot.ahead}</dd>` : ''}
<dt>added</dt><dd>${time(job.createdAt, now, job.malformed?.created_at)}</dd>
${job.waitsFor ? html`<dt>parked</dt><dd>${waitNote(job.waitsFor, now)}</dd>` : ''}
<dt>${job.runAt && job.runAt.getTime() > now ? 'runs' : 'run at'}</dt><dd>${job.waitsFor?.kind === 'event' && job.waitsFor.until === null ? 'when the event is sent' : time(job.runAt, now, job.malformed?.run_at)}</dd>
<dt>ended</dt><dd>${job.finishedAt || job.malformed?.finished_at ? time(job.finishedAt, now, job.malformed?.finished_at) : '–'}</dd>
${job.lease ? html`<dt>lease</dt><dd>attempt ${stored(job.lease.attempt, job.malformed?.['lease.attempt'])} by <code>${job.lease.owner}</code>, expires ${time(job.lease.expiresAt, now, job.malformed?.['lease.expires_at'])}</dd>` : ''}
${job.traceId !== null ? html`<dt>trace</dt><dd data-trace>${traceLink(ctx, job.traceId)}</dd>` : ''}
</dl>${jobActions(ctx, job)}</div>
<div class="card"><h2>Progress</h2>${job.state === 'running' ? html`<pre data-progress>${shownProgress === null ? 'none yet' : JSON.stringify(shownProgress, null, 2)}</pre>` : html`<p class="muted">Only a running job has progress.</p>`}</div>
</div>
${job.error !== null ? html`<div class="card"><h2>Error${job.state === 'failed' ? '' : ' of the last attempt'}</h2><pre class="error" data-error>${job.errorStack ?? job.error}</pre></div>` : ''}
<div class="card"><h2>Steps</h2>${steps(job)}</div>
${job.events.length > 0 ? html`<div class="card"><h2>Events</h2>${events(job.events, now)}</div>` : ''}
<div class="grid"><div class="card"><h2>Value</h2><pre data-value>${JSON.stringify(job.value, null, 2)}</pre></div>
<div class="card"><h2>Result</h2>${job.result === null ? html`<p class="muted">none</p>` : html`<pre data-result>${JSON.stringify(job.result, null, 2)}</pre>`}</div></div>`
}

function jobActions(ctx: ViewContext, job: JobDetail): Html {
  const path = jobPath(ctx, job.queue, job.id)
  const canRetry = job.state === 'failed' || job.state === 'canceled'
  const canCancel = job.state === 'waiting' || job.state === 'scheduled' || job.state === 'running'
  if (!canRetry && !canCancel) return raw('')
  return html`<div class="actions">
${canRetry ? html`<button class="primary" hx-post="${`${path}/retry`}" hx-target="#flash" data-action="retry">Retry</button>` : ''}
${canCancel ? html`<button class="danger" hx-post="${`${path}/cancel`}" hx-target="#flash" hx-confirm="${`Cancel job ${job.id}?${job.state === 'running' ? ' Its run is aborted.' : ''}`}" data-action="cancel">Cancel</button>` : ''}
</div>`
}

/** A trace id, a link to its trace (in a new tab) where `traceUrl` answers an http or https URL for it, else text. */
function traceLink(ctx: ViewContext, traceId: string): Html {
  const id = html`<code>${traceId}</code>`
  const url = ctx.traceUrl === undefined ? null : webUrl(ctx.traceUrl(traceId))
  return url === null ? id : html`<a href="${url}" target="_blank" rel="noopener noreferrer" data-trace-link>${id}</a>`
}

/** `text` as the http or https URL a browser would follow, or null: never a `javascript:`, `data:` or relative one. */
function webUrl(text: unknown): string | null {
  if (typeof text !== 'string' || !URL.canParse(text)) return null
  const url = new URL(text)
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null
}

function steps(job: JobDetail): Html {
  if (job.steps.length === 0) {
    return html`<p class="muted">${job.state === 'done' || job.state === 'failed' || job.state === 'canceled' ? 'Steps are deleted when their job ends.' : 'No step kept yet.'}</p>`
  }
  return html`<table><thead><tr><th>step</th><th>answer</th></tr></thead><tbody>${job.steps.map(
    (step) =>
      html`<tr><td>${step.name}</td><td class="wrap"><code>${oneLine(JSON.stringify(step.answer) ?? 'undefined', 300)}</code></td></tr>`,
  )}</tbody></table>`
}

/** A job's events: sent (with the payload), waited for (until its deadline), or timed out. */
function events(all: readonly JobEvent[], now: number): Html {
  return html`<table><thead><tr><th>event</th><th>state</th><th>since</th><th>until</th><th>payload</th></tr></thead><tbody>${all.map(
    (event) =>
      html`<tr data-event="${event.name}"><td>${event.name}</td><td data-event-state>${event.state === 'timed_out' ? 'timed out' : event.state}</td>
<td>${time(event.at, now)}</td>
<td>${event.state !== 'waiting' ? '–' : event.deadline === null ? 'no timeout' : time(event.deadline, now)}</td>
<td class="wrap">${event.state === 'sent' ? html`<code>${oneLine(JSON.stringify(event.payload) ?? 'undefined', 300)}</code>` : '–'}</td></tr>`,
  )}</tbody></table>`
}

function stateBadge(state: JobState): Html {
  return html`<span class="badge ${state}">${state}</span>`
}

/** An id as a link's or a heading's text: an empty one (another program wrote it) is named, so that its link can be seen and clicked. */
function shownId(id: string): Html | string {
  return id === '' ? html`<span class="muted" data-empty-id>(empty id)</span>` : id
}

/** A Date that holds a time, else null (an invalid Date: a stored value that is not one, which `time` shows as stored). */
function shownTime(date: Date): Date | null {
  return Number.isNaN(date.getTime()) ? null : date
}

/** A time, relative to now; a stored value that is not a time (another program wrote it) is shown as stored. */
function time(date: Date | null, now: number, literal?: string): Html {
  if (date === null) return html`<span class="malformed" title="not a time">${literal ?? '–'}</span>`
  const ms = date.getTime() - now
  return html`<time datetime="${date.toISOString()}" title="${date.toISOString()}">${ms > 0 ? `in ${humanSpan(ms)}` : `${humanSpan(-ms)} ago`}</time>`
}

/** A number as the row holds it: its stored value where that breaks the table protocol. */
function stored(value: number, literal?: string): string {
  return literal ?? String(value)
}

/** A whole page: the layout around a view's regions, each in its `data-live` element. */
export async function page(ctx: ViewContext, view: View, title: string, eventsUrl: string): Promise<Html> {
  const regions = await liveRegions(ctx, view)
  const region = (name: string, tag = 'div', cls = '') =>
    html`<${raw(tag)} data-live="${name}"${cls ? html` class="${cls}"` : ''}>${regions[name] ?? ''}</${raw(tag)}>`
  let body: Html
  switch (view.page) {
    case 'overview':
      body = html`<h1>Queues</h1>
<div class="card"><h2>Throughput, all queues</h2>${region('chart', 'div', 'chart')}</div>
<div class="card">${region('queues')}</div>`
      break
    case 'queue':
      body = html`<nav class="crumbs"><a href="${ctx.base || '/'}">Queues</a> / ${view.queue}</nav>
<h1>Queue ${view.queue}</h1>
${region('summary')}
<div class="card"><h2>Throughput</h2>${region('chart', 'div', 'chart')}</div>
<div class="card"><h2>Schedules</h2>${region('schedules')}</div>
<div class="card"><form class="search" method="get" action="${queuePath(ctx, view.queue)}">
${view.state ? html`<input type="hidden" name="state" value="${view.state}">` : ''}
<input type="search" name="id" placeholder="job id" value="${view.id ?? ''}" aria-label="job id">
<input type="search" name="group" placeholder="group" value="${view.group ?? ''}" aria-label="group">
<button type="submit">Search</button>${view.id || view.group ? html` <a href="${listPath(ctx, view, { id: null, group: null })}">clear</a>` : ''}
</form>${region('jobs')}</div>`
      break
    case 'job':
      body = html`<nav class="crumbs"><a href="${ctx.base || '/'}">Queues</a> / <a href="${queuePath(ctx, view.queue)}">${view.queue}</a> / ${view.id}</nav>
${region('job')}`
      break
  }
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="htmx-config" content='{"includeIndicatorStyles":false}'>
<title>${title} · drizzle-jobs</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${ctx.base}/assets/dashboard.css">
<script src="${ctx.base}/assets/htmx.min.js" defer></script>
<script src="${ctx.base}/assets/dashboard.js" defer></script>
</head>
<body data-events="${eventsUrl}">
<header><a class="brand" href="${ctx.base || '/'}">drizzle-jobs</a><span class="file">${ctx.label}</span><span class="live">live</span></header>
<main><div id="flash" aria-live="polite"></div>
${body}
</main></body></html>`
}

/** A short message for an action's answer, shown in the page's flash region. */
export function flash(message: string, ok: boolean): Html {
  return html`<p class="flash${ok ? '' : ' error'}" data-flash="${ok ? 'ok' : 'error'}">${message}</p>`
}
