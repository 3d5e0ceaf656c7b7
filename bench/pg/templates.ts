/**
 * The databases of the PostgreSQL benchmark's measurements: each subject's templates, made once a run, and
 * a fresh copy of one for every measurement, dropped after it.
 *
 * Statistics: autovacuum is turned off on every table of a subject's schema template (a storage parameter
 * every copy keeps), so no database of the run gains statistics but by the run's own `VACUUM ANALYZE`.
 * The drain's template is kept as its fill left it ("fresh": its tables with statistics must be the
 * schema's, none) and copied once more and given `VACUUM ANALYZE` ("analyzed"); the scale row's template is
 * analyzed too. A copy's tables with statistics (rows in pg_statistic) are counted before its measurement
 * and after: before, they must be its template's; a change by the end is remarked in the report.
 */
import { runTask } from '../lib/child.js'
import { createDatabase, databaseUrl, dropDatabase, holdAutovacuum, tablesWithStatistics, vacuumAnalyze, type PgFillResult } from './lib.js'
import { PG_COUNTS, PG_HEADINGS, type DrainState, type PgSubject } from './rows.js'

/** A template database: its name, the last job's id where the subject has one, and how many of its tables have statistics. */
export interface Template {
  name: string
  lastId?: string
  statistics: number
}
export type TemplateKind = 'schema' | DrainState | 'scale'

/**
 * The run's templates, by subject and kind, each made on first use: its schema alone (`schema`, autovacuum
 * off on every table); its schema with the drain's jobs (and the warm-up's) waiting as the fill left them
 * (`fresh`), and a copy of that after `VACUUM ANALYZE` (`analyzed`); and the scale row's jobs, analyzed
 * (`scale`). `measure` runs a task on a copy of one; `remarks` collects the statistics a run changed.
 */
export function pgCopies(options: {
  server: string
  modules: Record<PgSubject, string>
  log: (line: string) => void
  fail: (subject: PgSubject, what: string, error: unknown) => void
}): {
  measure: <T>(
    subject: PgSubject,
    kind: TemplateKind,
    task: string,
    args: object,
    what: string,
    timeoutMs?: number,
  ) => Promise<T | undefined>
  remarks: string[]
} {
  const { server, modules, log, fail } = options
  const templates = new Map<string, Promise<Template | undefined>>()

  function template(subject: PgSubject, kind: TemplateKind): Promise<Template | undefined> {
    const key = `${subject}/${kind}`
    let made = templates.get(key)
    if (!made) templates.set(key, (made = makeTemplate(subject, kind)))
    return made
  }

  async function makeTemplate(subject: PgSubject, kind: TemplateKind): Promise<Template | undefined> {
    try {
      if (kind === 'schema') {
        const name = await createDatabase(server, `${subject}_schema`)
        const url = databaseUrl(server, name)
        await runTask(modules[subject], 'setup', { url })
        await holdAutovacuum(url)
        return { name, statistics: await tablesWithStatistics(url) }
      }
      if (kind === 'analyzed') {
        const fresh = await template(subject, 'fresh')
        if (!fresh) return undefined
        const name = await createDatabase(server, `${subject}_analyzed`, fresh.name)
        return { ...fresh, name, statistics: await analyze(subject, name) }
      }
      const schema = await template(subject, 'schema')
      if (!schema) return undefined
      const name = await createDatabase(server, `${subject}_${kind}`, schema.name)
      const url = databaseUrl(server, name)
      const count = kind === 'fresh' ? PG_COUNTS.drain : PG_COUNTS.scaleWaiting
      const filled = await runTask<PgFillResult>(
        modules[subject],
        'fill',
        { url, count, warm: PG_COUNTS.warmJobs },
        { timeoutMs: 1_800_000 },
      )
      const made = filled.lastId === undefined ? { name } : { name, lastId: filled.lastId }
      const statistics = await tablesWithStatistics(url)
      log(
        `${subject}: template of ${count.toLocaleString('en-US')} waiting jobs filled in ${(filled.ms / 1000).toFixed(1)} s, ${statistics} tables with statistics`,
      )
      if (kind === 'scale') return { ...made, statistics: await analyze(subject, name) }
      if (statistics !== schema.statistics)
        throw new Error(`${statistics} tables have statistics after the fill, ${schema.statistics} before: the template is not fresh`)
      return { ...made, statistics }
    } catch (error) {
      fail(subject, `${kind} template`, error)
      return undefined
    }
  }

  /** `VACUUM ANALYZE` of a template; answers how many of its tables then have statistics. */
  async function analyze(subject: PgSubject, name: string): Promise<number> {
    const url = databaseUrl(server, name)
    await vacuumAnalyze(url)
    const statistics = await tablesWithStatistics(url)
    log(`${subject}: template analyzed, ${statistics} tables with statistics`)
    return statistics
  }

  /** What the runs saw of the copies' statistics beyond what their templates gave them. */
  const remarks: string[] = []

  /**
   * Runs one task in a child on a fresh copy of the subject's template; a failure is logged and kept for the
   * notes. The copy must have its template's statistics before the task; a change by the end is remarked.
   */
  async function measure<T>(
    subject: PgSubject,
    kind: TemplateKind,
    task: string,
    args: object,
    what: string,
    timeoutMs = 600_000,
  ): Promise<T | undefined> {
    const from = await template(subject, kind)
    if (!from) return undefined
    let name: string | undefined
    try {
      name = await createDatabase(server, subject, from.name)
      const url = databaseUrl(server, name)
      const before = await tablesWithStatistics(url)
      if (before !== from.statistics)
        throw new Error(`the copy has ${before} tables with statistics, its ${kind} template ${from.statistics}`)
      const result = await runTask<T>(
        modules[subject],
        task,
        { ...args, url, ...(from.lastId === undefined ? {} : { lastId: from.lastId }) },
        { timeoutMs },
      )
      const after = await tablesWithStatistics(url)
      if (after !== before) {
        const remark = `${PG_HEADINGS[subject]}, ${what} (${kind}): ${after} tables with statistics at the end, ${before} at the start`
        if (!remarks.includes(remark)) remarks.push(remark)
        log(`note: ${remark}`)
      }
      return result
    } catch (error) {
      fail(subject, what, error)
      return undefined
    } finally {
      if (name) await dropDatabase(server, name).catch(() => undefined)
    }
  }

  return { measure, remarks }
}
