/**
 * The figures of one run and how they are shown: every run's value kept,
 * each cell the median of its runs, ratios drizzle-jobs / best peer and
 * drizzle-jobs / floor, and the issue's targets checked on the medians.
 */
import { median } from './stats.js'

export type Subject = 'drizzle-jobs' | 'plainjob' | 'liteque' | 'bullmq' | 'floor'
export const SUBJECTS: readonly Subject[] = ['drizzle-jobs', 'plainjob', 'liteque', 'bullmq', 'floor']
export const PEERS: readonly Subject[] = ['plainjob', 'liteque', 'bullmq']
export const HEADINGS: Record<Subject, string> = {
  'drizzle-jobs': 'drizzle-jobs',
  plainjob: 'plainjob 0.0.14',
  liteque: 'liteque 0.8.0',
  bullmq: 'BullMQ 6.7.6',
  floor: 'floor',
}

export interface Sample {
  value: number
  /** The run stopped before the whole drain (the subject's drain does not fit the run's time). */
  capped?: boolean
  /** What else the run saw, shown after the cell of the run whose value is the median (e.g. each process's share). */
  detail?: string
}

/** The samples of a run, by row and subject (the SQLite subjects by default; the PostgreSQL run has its own). */
export class Results<S extends string = Subject> {
  private readonly data = new Map<string, Map<S, Sample[]>>()

  add(row: string, subject: S, sample: Sample): void {
    let bySubject = this.data.get(row)
    if (!bySubject) this.data.set(row, (bySubject = new Map()))
    let list = bySubject.get(subject)
    if (!list) bySubject.set(subject, (list = []))
    list.push(sample)
  }

  samples(row: string, subject: S): Sample[] {
    return this.data.get(row)?.get(subject) ?? []
  }

  median(row: string, subject: S): number | undefined {
    const samples = this.samples(row, subject)
    return samples.length === 0 ? undefined : median(samples.map((sample) => sample.value))
  }

  /** The run whose value is the median (the lower of the middle two for an even count). */
  medianSample(row: string, subject: S): Sample | undefined {
    const sorted = [...this.samples(row, subject)].sort((a, b) => a.value - b.value)
    return sorted[Math.floor((sorted.length - 1) / 2)]
  }

  /** The largest value of every run. */
  max(row: string, subject: S): number | undefined {
    const samples = this.samples(row, subject)
    return samples.length === 0 ? undefined : Math.max(...samples.map((sample) => sample.value))
  }

  capped(row: string, subject: S): boolean {
    return this.samples(row, subject).some((sample) => sample.capped)
  }

  rows(): string[] {
    return [...this.data.keys()]
  }
}

export type Unit = 'tx/s' | 'jobs/s' | 'adds/s' | 'ms' | 'µs' | 's' | '%' | 'jobs' | 'snapshots'

export interface RowSpec {
  key: string
  figure: string
  unit: Unit
  better: 'higher' | 'lower'
  /** The row whose floor figure fills this row's floor column (the process rows use the batched drain). */
  floorFrom?: string
  /** No ratio column for this row. */
  noRatio?: boolean
  /** Something to show after a cell's median, e.g. the most jobs seen running at once. */
  extra?: (results: Results, subject: Subject) => string
  /** Why a subject has no figure in this row. */
  na?: Partial<Record<Subject, string>>
  /** A note on a subject's figure in this row (how it was measured there). */
  notes?: Partial<Record<Subject, string>>
  /** The subjects this row is about (default: all); a subject missing from the run says n/a only in its rows. */
  only?: readonly Subject[]
  target?: Target
}

export interface Target {
  text: string
  check: (results: Results) => { met: boolean; detail: string } | undefined
}

export function formatValue(value: number, unit: Unit): string {
  if (!Number.isFinite(value)) return '—'
  if (unit === '%') return `${(value * 100).toFixed(1)}%`
  if (unit === 's') return value.toFixed(2)
  if (unit === 'µs' || unit === 'snapshots') return value < 100 ? value.toFixed(1) : Math.round(value).toLocaleString('en-US')
  if (unit === 'ms') {
    if (value < 1) return value.toFixed(3)
    if (value < 10) return value.toFixed(2)
    if (value < 100) return value.toFixed(1)
    return value.toFixed(0)
  }
  return Math.round(value).toLocaleString('en-US')
}

export function formatRatio(ratio: number | undefined): string {
  if (ratio === undefined || !Number.isFinite(ratio)) return '—'
  return `${ratio >= 10 ? ratio.toFixed(0) : ratio >= 1 ? ratio.toFixed(2) : ratio.toPrecision(2)}×`
}

/** The best peer's median in a row: the highest throughput, or the lowest time. */
export function bestPeer(results: Results, spec: RowSpec): { subject: Subject; value: number } | undefined {
  let best: { subject: Subject; value: number } | undefined
  for (const subject of PEERS) {
    const value = results.median(spec.key, subject)
    if (value === undefined) continue
    if (!best || (spec.better === 'higher' ? value > best.value : value < best.value)) best = { subject, value }
  }
  return best
}

export function floorValue(results: Results, spec: RowSpec): number | undefined {
  return results.median(spec.floorFrom ?? spec.key, 'floor')
}

export interface Rendered {
  table: string
  footnotes: string[]
  targets: Array<{ figure: string; text: string; met: boolean | undefined; detail: string }>
}

export interface RenderOptions {
  /** A target column (the docs state figures, not the issue's targets). Default true. */
  targetColumn?: boolean
  /** A note on a subject's column heading (e.g. the durability it runs with). */
  headingNotes?: Partial<Record<Subject, string>>
  /** Why a subject could not be measured in this run at all: its cells say n/a with this reason. */
  unavailable?: Partial<Record<Subject, string>>
  /** Why a subject was left out of one row in this run (by row key): its cell says n/a with this reason. */
  skipped?: Record<string, Partial<Record<Subject, string>>>
}

/**
 * The Markdown table of the medians, its footnotes (n/a reasons, capped runs, column notes) and the targets.
 * With `targetColumn: false` the table has no target column; the footnotes are the same either way.
 */
export function renderTable(
  results: Results,
  specs: readonly RowSpec[],
  cappedNote: (subject: Subject) => string,
  options: RenderOptions = {},
): Rendered {
  const { targetColumn = true, headingNotes = {}, unavailable = {}, skipped = {} } = options
  const footnotes: string[] = []
  const note = (text: string): string => {
    let index = footnotes.indexOf(text)
    if (index === -1) index = footnotes.push(text) - 1
    return `[${index + 1}]`
  }
  const heading = (subject: Subject): string => {
    const text = unavailable[subject] ?? headingNotes[subject]
    return text ? `${HEADINGS[subject]} ${note(text)}` : HEADINGS[subject]
  }
  const header = [
    'figure',
    ...SUBJECTS.map(heading),
    'drizzle-jobs / best peer',
    'drizzle-jobs / floor',
    ...(targetColumn ? ['target'] : []),
  ]
  const lines = [`| ${header.join(' | ')} |`, `| ${header.map(() => '---').join(' | ')} |`]
  const targets: Rendered['targets'] = []
  for (const spec of specs) {
    const cells = SUBJECTS.map((subject) => {
      const value = subject === 'floor' ? floorValue(results, spec) : results.median(spec.key, subject)
      if (value === undefined) {
        const reason =
          spec.na?.[subject] ??
          skipped[spec.key]?.[subject] ??
          ((spec.only ?? SUBJECTS).includes(subject) ? unavailable[subject] : undefined)
        return reason ? `n/a ${note(reason)}` : '—'
      }
      let cell = formatValue(value, spec.unit)
      const row = subject === 'floor' ? (spec.floorFrom ?? spec.key) : spec.key
      if (results.capped(row, subject)) cell += ` ${note(cappedNote(subject))}`
      const remark = spec.notes?.[subject]
      if (remark) cell += ` ${note(remark)}`
      const extra = spec.extra?.(results, subject)
      if (extra) cell += ` ${extra}`
      return cell
    })
    const ours = results.median(spec.key, 'drizzle-jobs')
    const best = bestPeer(results, spec)
    const floor = floorValue(results, spec)
    const vsPeer = spec.noRatio || ours === undefined || !best ? '—' : `${formatRatio(ours / best.value)} (vs ${best.subject})`
    const vsFloor = spec.noRatio || ours === undefined || floor === undefined ? '—' : formatRatio(ours / floor)
    let target = ''
    if (spec.target) {
      const checked = spec.target.check(results)
      targets.push({ figure: spec.figure, text: spec.target.text, met: checked?.met, detail: checked?.detail ?? 'not measured' })
      target = checked
        ? `${spec.target.text}: **${checked.met ? 'met' : 'MISSED'}** (${checked.detail})`
        : `${spec.target.text}: not measured`
    }
    lines.push(`| ${[`${spec.figure} (${spec.unit})`, ...cells, vsPeer, vsFloor, ...(targetColumn ? [target] : [])].join(' | ')} |`)
  }
  return { table: lines.join('\n'), footnotes, targets }
}

/** Every run's value, for the noise to be seen; `units` gives the unit of figures that have no row of their own. */
export function renderRuns(results: Results, specs: readonly RowSpec[], units: Record<string, Unit> = {}): string {
  const header = ['figure', ...SUBJECTS.map((subject) => HEADINGS[subject])]
  const lines = [`| ${header.join(' | ')} |`, `| ${header.map(() => '---').join(' | ')} |`]
  const keys = new Set<string>()
  for (const spec of specs) {
    keys.add(spec.key)
    if (spec.floorFrom) keys.add(spec.floorFrom)
  }
  for (const key of results.rows()) keys.add(key)
  for (const key of keys) {
    const spec = specs.find((candidate) => candidate.key === key)
    const unit = spec?.unit ?? units[key] ?? 'jobs/s'
    const cells = SUBJECTS.map((subject) => {
      const samples = results.samples(key, subject)
      return samples.length === 0
        ? ''
        : samples
            .map((sample) => `${formatValue(sample.value, unit)}${sample.capped ? '†' : ''}${sample.detail ? ` (${sample.detail})` : ''}`)
            .join(', ')
    })
    if (cells.every((cell) => cell === '')) continue
    lines.push(`| ${[`\`${key}\``, ...cells].join(' | ')} |`)
  }
  return lines.join('\n')
}
