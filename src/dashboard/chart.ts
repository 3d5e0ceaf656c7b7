/**
 * The throughput chart: jobs done and failed per 10 seconds over the last
 * 10 minutes, read over the ended-jobs index. Buckets older than a few
 * seconds are kept in memory, so each refresh reads only the newest ones.
 */
import type { Connection } from '../dialect/index.js'
import { endedPerBucket } from '../admin/stats.js'
import { html, type Html } from './html.js'

export const BUCKET_MS = 10_000
export const WINDOW_BUCKETS = 60
/** A bucket that ended this long ago is final: every run that ended in it has been recorded. */
const SETTLE_MS = 5_000

export interface Series {
  /** The first bucket's start, ms since the epoch. */
  start: number
  done: number[]
  failed: number[]
}

export class Throughput {
  /** Final buckets per queue and state: bucket number → count. */
  private readonly kept = new Map<string, Map<number, number>>()

  constructor(private readonly connection: Connection) {}

  async series(queues: readonly string[], now: number): Promise<Series> {
    const current = Math.floor(now / BUCKET_MS)
    const first = current - WINDOW_BUCKETS + 1
    const done = new Array<number>(WINDOW_BUCKETS).fill(0)
    const failed = new Array<number>(WINDOW_BUCKETS).fill(0)
    for (const queue of queues) {
      add(done, await this.counts(queue, 'done', first, current, now))
      add(failed, await this.counts(queue, 'failed', first, current, now))
    }
    return { start: first * BUCKET_MS, done, failed }
  }

  /** Forgets queues no longer shown, so memory follows what is on screen. */
  keepOnly(queues: readonly string[]): void {
    const wanted = new Set(queues.flatMap((queue) => [`${queue}\u0000done`, `${queue}\u0000failed`]))
    for (const key of this.kept.keys()) if (!wanted.has(key)) this.kept.delete(key)
  }

  private async counts(queue: string, state: 'done' | 'failed', first: number, current: number, now: number): Promise<number[]> {
    const key = `${queue}\u0000${state}`
    let kept = this.kept.get(key)
    if (!kept) this.kept.set(key, (kept = new Map()))
    for (const bucket of kept.keys()) if (bucket < first) kept.delete(bucket)
    let from = first
    while (from <= current && kept.has(from)) from++
    const fresh = from <= current ? await endedPerBucket(this.connection, queue, state, from * BUCKET_MS, now + 1, BUCKET_MS) : []
    const settled = Math.floor((now - SETTLE_MS) / BUCKET_MS)
    fresh.forEach((count, i) => {
      if (from + i < settled) kept.set(from + i, count)
    })
    return Array.from({ length: WINDOW_BUCKETS }, (_, i) => {
      const bucket = first + i
      return bucket < from ? (kept.get(bucket) ?? 0) : (fresh[bucket - from] ?? 0)
    })
  }
}

function add(into: number[], counts: readonly number[]): void {
  for (const [i, count] of counts.entries()) into[i]! += count
}

const WIDTH = 1100
const HEIGHT = 120
const TOP = 14

/** The series as an SVG bar chart, done under failed, with a title per bar. */
export function renderChart(series: Series): Html {
  const totals = series.done.map((done, i) => done + series.failed[i]!)
  const max = Math.max(1, ...totals)
  const slot = WIDTH / WINDOW_BUCKETS
  const scale = (HEIGHT - TOP) / max
  const bars = series.done.map((done, i) => {
    const failed = series.failed[i]!
    const x = (i * slot + 1).toFixed(1)
    const doneHeight = done * scale
    const failedHeight = failed * scale
    const at = new Date(series.start + i * BUCKET_MS)
    const label = `${at.toLocaleTimeString('en-GB', { hour12: false })}: ${done} done, ${failed} failed`
    return html`<g><title>${label}</title>${done > 0 ? html`<rect x="${x}" y="${(HEIGHT - doneHeight).toFixed(1)}" width="${(slot - 2).toFixed(1)}" height="${doneHeight.toFixed(1)}" fill="#3f9142"></rect>` : ''}${failed > 0 ? html`<rect x="${x}" y="${(HEIGHT - doneHeight - failedHeight).toFixed(1)}" width="${(slot - 2).toFixed(1)}" height="${failedHeight.toFixed(1)}" fill="#d64545"></rect>` : ''}</g>`
  })
  const total = (values: number[]) => values.reduce((sum, value) => sum + value, 0)
  return html`<svg viewBox="0 0 ${WIDTH} ${HEIGHT + 16}" role="img" aria-label="jobs ended per 10 seconds over the last 10 minutes">
<line x1="0" y1="${HEIGHT}" x2="${WIDTH}" y2="${HEIGHT}" stroke="#cbd2d9"></line>
<text x="0" y="10" font-size="10" fill="#616e7c">${max} per 10s</text>
${bars}
<text x="0" y="${HEIGHT + 13}" font-size="10" fill="#616e7c">10 min ago</text>
<text x="${WIDTH}" y="${HEIGHT + 13}" font-size="10" fill="#616e7c" text-anchor="end">now</text>
</svg><div class="legend"><span class="done">${total(series.done)} done</span><span class="failed">${total(series.failed)} failed</span><span>in the last 10 minutes</span></div>`
}
