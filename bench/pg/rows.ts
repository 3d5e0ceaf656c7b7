/**
 * The rows of the PostgreSQL benchmark (`npm run bench -- --pg`): drizzle-jobs beside graphile-worker
 * 0.17.3, pg-boss 10.4.2 and BullMQ 6.7.6's PostgreSQL backend on one server, what each row measures,
 * and the targets, checked on the medians of the same run. Every drain row is measured twice: on fresh
 * copies of a template just filled (no statistics) and on copies of it after `VACUUM ANALYZE`.
 */
import { formatRatio, formatValue, type Results, type Unit } from '../lib/report.js'

export type PgSubject = 'drizzle-jobs' | 'graphile-worker' | 'pg-boss' | 'bullmq'
export const PG_SUBJECTS: readonly PgSubject[] = ['drizzle-jobs', 'graphile-worker', 'pg-boss', 'bullmq']
export const PG_PEERS: readonly PgSubject[] = ['graphile-worker', 'pg-boss', 'bullmq']
export const PG_HEADINGS: Record<PgSubject, string> = {
  'drizzle-jobs': 'drizzle-jobs',
  'graphile-worker': 'graphile-worker 0.17.3',
  'pg-boss': 'pg-boss 10.4.2',
  bullmq: 'BullMQ 6.7.6 (PostgreSQL)',
}

/**
 * The two databases every drain runs on: a copy of the template as its fill left it, with no statistics
 * (autovacuum is off on every table, so none appear), and a copy of the template after `VACUUM ANALYZE`.
 */
export const DRAIN_STATES = ['fresh', 'analyzed'] as const
export type DrainState = (typeof DRAIN_STATES)[number]

/** BENCH_SMALL=1 makes every count small, for a quick check that the rows run (it never writes the results files). */
export const SMALL = process.env.BENCH_SMALL === '1'

export const PG_COUNTS = {
  appTransactions: SMALL ? 300 : 1_000,
  appWarmup: SMALL ? 50 : 100,
  batchTotal: SMALL ? 5_000 : 100_000,
  batchSize: 1_000,
  drain: SMALL ? 1_000 : 20_000,
  warmJobs: SMALL ? 100 : 500,
  slots: [1, 16, 64],
  procs: 4,
  procSlots: 16,
  telemetrySlots: 16,
  /** pg-boss runs at most `batchSize` jobs per poll interval: its drains stop after this long. */
  bossCapMs: SMALL ? 2_000 : 6_000,
  /** Any drain stops after this long (at concurrency 1 on a loaded machine a whole drain would take minutes); the cell is marked. */
  drainCapMs: SMALL ? 5_000 : 20_000,
  pickupSamples: SMALL ? 10 : 60,
  pickupGapMs: 50,
  bossPickupSamples: SMALL ? 4 : 15,
  bossPickupGapMs: 1_000,
  scaleWaiting: SMALL ? 20_000 : 1_000_000,
  scaleDrain: SMALL ? 1_000 : 20_000,
  scaleSlots: 16,
  aheadSamples: 15,
} as const

const n = (count: number): string => count.toLocaleString('en-US')

export interface PgRowSpec {
  key: string
  figure: string
  unit: Unit
  better: 'higher' | 'lower'
  /** Why a subject has no figure in this row. */
  na?: Partial<Record<PgSubject, string>>
  /** A note on a subject's figure in this row. */
  notes?: Partial<Record<PgSubject, string>>
  noRatio?: boolean
  target?: { text: string; check: (results: Results<PgSubject>) => { met: boolean; detail: string } | undefined }
}

const ours = (results: Results<PgSubject>, key: string): number | undefined => results.median(key, 'drizzle-jobs')

/** drizzle-jobs at least `times` each of `peers` measured in the row (met only if every one measured is). */
function atLeast(key: string, times: number, peers: readonly PgSubject[]): PgRowSpec['target'] {
  return {
    text: `≥ ${times.toFixed(1)}× ${peers.map((peer) => PG_HEADINGS[peer].split(' ')[0]).join(' and ')}`,
    check: (results) => {
      const value = ours(results, key)
      const ratios = peers.flatMap((peer) => {
        const other = results.median(key, peer)
        return value === undefined || other === undefined ? [] : [{ peer, ratio: value / other }]
      })
      if (ratios.length === 0) return undefined
      return {
        met: ratios.every(({ ratio }) => ratio >= times),
        detail: ratios.map(({ peer, ratio }) => `${formatRatio(ratio)} ${PG_HEADINGS[peer].split(' ')[0]}`).join(', '),
      }
    },
  }
}

/** drizzle-jobs at least `share` of its own median in row `of`. */
function shareOf(key: string, of: string, share: number, name: string): PgRowSpec['target'] {
  return {
    text: `≥ ${(share * 100).toFixed(0)}% of ${name}`,
    check: (results) => {
      const value = ours(results, key)
      const other = ours(results, of)
      return value === undefined || other === undefined
        ? undefined
        : { met: value >= share * other, detail: `${((value / other) * 100).toFixed(0)}% of ${name}` }
    },
  }
}

const GRAPHILE_TX = "graphile_worker.add_job() in the app's transaction (through Drizzle's `tx.execute`)"
const BOSS_TX = "`send(…, { db: { executeSql } })` on the transaction's own client"
const BOSS_POLLS = `pg-boss 10 has no LISTEN: it polls, at \`pollingIntervalSeconds: 0.5\` (its minimum); a \`send()\` in the same instance wakes its own worker`
const GRAPHILE_LISTENS = 'graphile-worker always LISTENs (its `pollInterval` only finds scheduled jobs): it has no polling-only mode'
const BOSS_CAPPED = `pg-boss waits out its poll interval (0.5 s) after every fetch, even with a backlog: a worker runs at most \`batchSize\` (= the concurrency) jobs per 0.5 s, so its drain stops after ${PG_COUNTS.bossCapMs / 1000} s and the rate is the jobs it ran then`
const CAPPED = `the drain stopped after ${PG_COUNTS.drainCapMs / 1000} s (a whole drain at this rate would not fit the run's time): the rate is the jobs handled by then`
const NO_AHEAD = 'no call answers how many jobs are ahead of a given one'
const BULLMQ_NO_TX = "BullMQ's `Queue` adds on its own pool: an add cannot join the app's transaction"
const BULLMQ_LISTENS = "BullMQ's PostgreSQL worker always waits on LISTEN between fetches: it has no polling-only mode"
const DRIZZLE_ONLY = 'measured for drizzle-jobs only'
const STATE_WORDS: Record<DrainState, string> = {
  fresh: 'fresh database (no statistics)',
  analyzed: 'analyzed database',
}

/** The drain rows, each on a fresh and on an analyzed database, one after the other; the targets are on concurrency 16, 64 and the processes. */
function drainRows(): PgRowSpec[] {
  const drains = [
    ...PG_COUNTS.slots.map((slots) => ({
      key: `drain-${slots}`,
      figure: `drain ${n(PG_COUNTS.drain)}, one process, concurrency ${slots}`,
    })),
    {
      key: `processes-${PG_COUNTS.procs}`,
      figure: `drain ${n(PG_COUNTS.drain)}, ${PG_COUNTS.procs} processes × concurrency ${PG_COUNTS.procSlots}`,
    },
  ]
  return drains.flatMap(({ key, figure }) =>
    DRAIN_STATES.map((state): PgRowSpec => {
      const row = `${key}-${state}`
      return {
        key: row,
        figure: `${figure}, ${STATE_WORDS[state]}`,
        unit: 'jobs/s',
        better: 'higher',
        notes: { 'pg-boss': BOSS_CAPPED },
        ...(key === 'drain-1' ? {} : { target: atLeast(row, 1.5, ['graphile-worker', 'bullmq']) }),
      }
    }),
  )
}

export const PG_ROWS: readonly PgRowSpec[] = [
  {
    key: 'enqueue-app',
    figure: 'enqueue: one job per app transaction (app row + job)',
    unit: 'tx/s',
    better: 'higher',
    na: { bullmq: BULLMQ_NO_TX },
    notes: { 'graphile-worker': GRAPHILE_TX, 'pg-boss': BOSS_TX },
  },
  {
    key: 'enqueue-app-only',
    figure: 'the same transaction without the job',
    unit: 'tx/s',
    better: 'higher',
    na: { bullmq: BULLMQ_NO_TX },
    noRatio: true,
  },
  {
    key: 'enqueue-overhead',
    figure: 'enqueue: added cost of the job in the transaction',
    unit: 'µs',
    better: 'lower',
    na: { bullmq: BULLMQ_NO_TX },
  },
  {
    key: 'enqueue-batch',
    figure: `enqueue: batch of ${n(PG_COUNTS.batchTotal)} (1,000 a call)`,
    unit: 'jobs/s',
    better: 'higher',
    notes: {
      'drizzle-jobs': '`enqueueMany` of 1,000 a transaction',
      'graphile-worker': 'WorkerUtils `addJobs` of 1,000 a call',
      'pg-boss': '`insert()` of 1,000 a call',
      bullmq: '`addBulk` of 1,000 a call',
    },
  },
  ...drainRows(),
  {
    key: 'pickup-same-listen',
    figure: 'pickup, same process, LISTEN (median)',
    unit: 'ms',
    better: 'lower',
    na: { 'pg-boss': BOSS_POLLS },
  },
  {
    key: 'pickup-other-listen',
    figure: 'pickup, another process, LISTEN (median)',
    unit: 'ms',
    better: 'lower',
    na: { 'pg-boss': BOSS_POLLS },
    target: {
      text: '< 10 ms',
      check: (results) => {
        const value = ours(results, 'pickup-other-listen')
        return value === undefined ? undefined : { met: value < 10, detail: `${formatValue(value, 'ms')} ms` }
      },
    },
  },
  {
    key: 'pickup-other-listen-p99',
    figure: 'pickup, another process, LISTEN (p99)',
    unit: 'ms',
    better: 'lower',
    na: { 'pg-boss': BOSS_POLLS },
  },
  {
    key: 'pickup-same-poll',
    figure: "pickup, same process, polling (drizzle: `listen: false, pollInterval: '50ms'`) (median)",
    unit: 'ms',
    better: 'lower',
    na: { 'graphile-worker': GRAPHILE_LISTENS, bullmq: BULLMQ_LISTENS },
    notes: { 'pg-boss': BOSS_POLLS },
  },
  {
    key: 'pickup-other-poll',
    figure: 'pickup, another process, polling (median)',
    unit: 'ms',
    better: 'lower',
    na: { 'graphile-worker': GRAPHILE_LISTENS, bullmq: BULLMQ_LISTENS },
    notes: { 'pg-boss': BOSS_POLLS },
  },
  ...(['absent', 'api', 'sdk', 'sampled'] as const).map(
    (mode): PgRowSpec => ({
      key: `telemetry-${mode}`,
      figure: `drain ${n(PG_COUNTS.drain)}, concurrency ${PG_COUNTS.telemetrySlots}, analyzed, each job with a request's trace context: ${
        {
          absent: '`@opentelemetry/api` not installed',
          api: 'the API installed, no SDK registered',
          sdk: 'the SDK records every run (batch span processor, an exporter that drops spans, metrics)',
          sampled: 'the same SDK, one request in ten sampled at its root',
        }[mode]
      }`,
      unit: 'jobs/s',
      better: 'higher',
      na: { 'graphile-worker': DRIZZLE_ONLY, 'pg-boss': DRIZZLE_ONLY, bullmq: DRIZZLE_ONLY },
      noRatio: true,
      ...(mode === 'absent' || mode === 'sampled'
        ? {}
        : {
            target: shareOf(
              `telemetry-${mode}`,
              mode === 'api' ? 'telemetry-absent' : 'telemetry-api',
              mode === 'api' ? 0.95 : 0.7,
              mode === 'api' ? 'not installed' : 'no SDK',
            ),
          }),
    }),
  ),
  {
    key: 'scale-drain',
    figure: `drain ${n(PG_COUNTS.scaleDrain)} at concurrency ${PG_COUNTS.scaleSlots} with ${n(PG_COUNTS.scaleWaiting)} waiting`,
    unit: 'jobs/s',
    better: 'higher',
    na: { 'graphile-worker': DRIZZLE_ONLY, 'pg-boss': DRIZZLE_ONLY, bullmq: DRIZZLE_ONLY },
    noRatio: true,
    target: {
      text: '≥ 80% of the empty queue',
      check: (results) => {
        const full = ours(results, 'scale-drain')
        const empty = ours(results, 'drain-16-analyzed')
        return full === undefined || empty === undefined
          ? undefined
          : { met: full >= 0.8 * empty, detail: `${((full / empty) * 100).toFixed(0)}% of the concurrency-16 drain, analyzed` }
      },
    },
  },
  {
    key: 'scale-ahead',
    figure: `\`ahead\` of the last of ${n(PG_COUNTS.scaleWaiting)} waiting (getJob, median)`,
    unit: 'ms',
    better: 'lower',
    na: { 'graphile-worker': NO_AHEAD, 'pg-boss': NO_AHEAD, bullmq: NO_AHEAD },
    noRatio: true,
  },
]

/** The Markdown table of the medians, with its footnotes and the targets. */
export function renderPgTable(
  results: Results<PgSubject>,
  specs: readonly PgRowSpec[],
  targetColumn = true,
): { table: string; footnotes: string[]; targets: Array<{ figure: string; text: string; met: boolean | undefined; detail: string }> } {
  const footnotes: string[] = []
  const note = (text: string): string => {
    let index = footnotes.indexOf(text)
    if (index === -1) index = footnotes.push(text) - 1
    return `[${index + 1}]`
  }
  const header = [
    'figure',
    ...PG_SUBJECTS.map((subject) => PG_HEADINGS[subject]),
    ...PG_PEERS.map((peer) => `drizzle-jobs / ${PG_HEADINGS[peer].split(' ')[0]}`),
    ...(targetColumn ? ['target'] : []),
  ]
  const lines = [`| ${header.join(' | ')} |`, `| ${header.map(() => '---').join(' | ')} |`]
  const targets: Array<{ figure: string; text: string; met: boolean | undefined; detail: string }> = []
  for (const spec of specs) {
    const cells = PG_SUBJECTS.map((subject) => {
      const value = results.median(spec.key, subject)
      if (value === undefined) return spec.na?.[subject] ? `n/a ${note(spec.na[subject] as string)}` : '—'
      let cell = formatValue(value, spec.unit)
      const drainRow = spec.key.startsWith('drain') || spec.key.startsWith('processes')
      if (results.capped(spec.key, subject)) cell += ` ${note(spec.notes?.[subject] ?? CAPPED)}`
      else if (spec.notes?.[subject] && !drainRow) cell += ` ${note(spec.notes[subject] as string)}`
      return cell
    })
    const value = results.median(spec.key, 'drizzle-jobs')
    const ratio = (peer: PgSubject): string => {
      const other = results.median(spec.key, peer)
      return spec.noRatio || value === undefined || other === undefined ? '—' : formatRatio(value / other)
    }
    let target = ''
    if (spec.target) {
      const checked = spec.target.check(results)
      targets.push({ figure: spec.figure, text: spec.target.text, met: checked?.met, detail: checked?.detail ?? 'not measured' })
      target = checked
        ? `${spec.target.text}: **${checked.met ? 'met' : 'MISSED'}** (${checked.detail})`
        : `${spec.target.text}: not measured`
    }
    lines.push(`| ${[`${spec.figure} (${spec.unit})`, ...cells, ...PG_PEERS.map(ratio), ...(targetColumn ? [target] : [])].join(' | ')} |`)
  }
  return { table: lines.join('\n'), footnotes, targets }
}
