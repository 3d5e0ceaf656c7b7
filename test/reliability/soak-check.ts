/**
 * The crash soak's verdict: reads the database and the side log the worker
 * processes wrote, and checks every promise the soak stands for. Each broken
 * promise is one line of `problems`; the figures are what the soak prints.
 */
import type { Exit } from './processes.js'
import type { SoakJobRow, SoakSnapshot } from './soak-database.js'
import { SOAK_QUEUE, type SoakLogRecord } from './soak-protocol.js'

export interface SoakFigures {
  /** Regular jobs added (the poisoned one aside). */
  jobs: number
  done: number
  /** Worker processes SIGKILLed by the killer. */
  kills: number
  /** Worker processes the poisoned job killed. */
  poisonKills: number
  /** Worker connections ended by pg_terminate_backend (PostgreSQL). */
  terminations: number
  workersStarted: number
  /** Handler starts of regular jobs beyond one per job. */
  rerunHandlers: number
  /** Step functions that ran again for a job, each after a kill fell inside the earlier run of it. */
  rerunSteps: number
  /** Final inserts run again that found the row already there (`on conflict do nothing`). */
  rerunInserts: number
  /** Most handlers running at once, over all processes, and within one group. */
  maxRunning: { global: number; perGroup: number }
  /** Most attempts a regular job used. */
  maxAttemptsUsed: number
  poison: { state: string; attempts: number; maxAttempts: number; error: string | null } | null
  leasesLeft: number
  stepsLeft: number
  /** SQLite's integrity_check; null on PostgreSQL. */
  integrity: string | null
  elapsedMs: number
}

export interface SoakVerdict {
  figures: SoakFigures
  problems: string[]
}

export interface SoakFacts {
  jobs: number
  attempts: number
  kills: ReadonlyMap<number, number>
  terminations: number
  exits: ReadonlyMap<number, Exit>
  /** Worker processes asked to stop (SIGTERM) at the end. */
  stopped: ReadonlySet<number>
  workersStarted: number
  elapsedMs: number
}

type JobRow = SoakJobRow

const SHOWN = 5

/** Checks the outcome of a soak: what its database holds at the end, and its side log. */
export function checkSoak(snapshot: SoakSnapshot, log: readonly SoakLogRecord[], facts: SoakFacts): SoakVerdict {
  const problems: string[] = []
  const report = (what: string, cases: readonly string[]): void => {
    if (cases.length > 0)
      problems.push(`${what} (${cases.length}): ${cases.slice(0, SHOWN).join('; ')}${cases.length > SHOWN ? '; …' : ''}`)
  }

  const rows = snapshot.jobs
  const byId = new Map(rows.map((row) => [row.id, row]))
  const regular = rows.filter((row) => row.id !== 'poison')
  const poisonRow = byId.get('poison') ?? null
  if (regular.length !== facts.jobs) problems.push(`the queue holds ${regular.length} regular jobs, ${facts.jobs} were added`)

  report(
    'jobs not done',
    regular
      .filter((row) => row.state !== 'done')
      .map((row) => `${row.id} is ${row.state} after ${row.attempts} attempts (${row.error ?? 'no error'})`),
  )
  report(
    'jobs whose result is not their total',
    regular.filter((row) => row.state === 'done' && !hasTotal(row.result, 5 * numberOf(row.id))).map((row) => `${row.id}: ${row.result}`),
  )
  report(
    'attempts beyond max_attempts',
    rows.filter((row) => row.attempts > row.maxAttempts).map((row) => `${row.id}: ${row.attempts} of ${row.maxAttempts}`),
  )
  if (!poisonRow) problems.push('the poisoned job is missing')
  else {
    if (poisonRow.state !== 'failed') problems.push(`the poisoned job is ${poisonRow.state}, not failed`)
    if (poisonRow.attempts !== facts.attempts)
      problems.push(`the poisoned job used ${poisonRow.attempts} attempts, not all ${facts.attempts}`)
    if (!/ended without an outcome/.test(poisonRow.error ?? ''))
      problems.push(`the poisoned job's error does not say its run ended without an outcome: ${poisonRow.error}`)
  }

  const appRows = snapshot.appRows
  const appById = new Map(appRows.map((row) => [row.id, row.total]))
  report(
    'app rows missing',
    regular.filter((row) => !appById.has(row.id)).map((row) => row.id),
  )
  report(
    'app rows that are not a job of the soak',
    appRows.filter((row) => !byId.has(row.id) || row.id === 'poison').map((row) => row.id),
  )
  report(
    'app rows with a wrong total',
    appRows.filter((row) => byId.has(row.id) && row.total !== 5 * numberOf(row.id)).map((row) => `${row.id}: ${row.total}`),
  )

  const { leasesLeft, stepsLeft, integrity, counters } = snapshot
  if (leasesLeft !== 0) problems.push(`${leasesLeft} leases are left`)
  if (stepsLeft !== 0) problems.push(`${stepsLeft} step rows outlive their jobs (JOB-14)`)
  if (integrity !== null && integrity !== 'ok') problems.push(`integrity_check: ${integrity}`)
  const counted: Record<string, number> = { waiting: 0, scheduled: 0, running: 0, done: 0, failed: 0, canceled: 0 }
  for (const row of rows) counted[row.state] = (counted[row.state] ?? 0) + 1
  for (const [state, count] of Object.entries(counted)) {
    if (counters?.[state] !== count) problems.push(`jobs_queue counts ${counters?.[state]} ${state}, the table holds ${count}`)
  }

  const deaths = new Map(facts.kills)
  for (const record of log) if (record.t === 'death') deaths.set(record.pid, record.at)
  const poisonKills = log.filter((record) => record.t === 'death').length
  report(
    'worker processes that ended neither killed nor stopped',
    [...facts.exits]
      .filter(([pid, exit]) => !deaths.has(pid) && !(facts.stopped.has(pid) && (exit.code === 0 || exit.signal === 'SIGTERM')))
      .map(([pid, exit]) => `${pid} (${exit.code ?? exit.signal})`),
  )
  report(
    'handler runs that threw',
    log.flatMap((record) =>
      record.t === 'threw' ? [`${record.job} attempt ${record.attempt} in ${record.pid}: ${record.code ?? ''} ${record.message}`] : [],
    ),
  )
  report(
    'errors the workers surfaced',
    log.flatMap((record) => (record.t === 'error' ? [`${record.pid}: ${record.code ?? ''} ${record.message}`] : [])),
  )

  const runs = checkRuns(log, deaths, byId, report)
  const rerunSteps = checkSteps(log, deaths, report)
  const inserts = log.filter((record) => record.t === 'insert')
  const landed = new Map<string, number>()
  for (const insert of inserts) if (insert.changes === 1) landed.set(insert.job, (landed.get(insert.job) ?? 0) + 1)
  // An insert that landed may go unlogged when a kill falls between its commit and its log line; its rerun then finds the row.
  report(
    'jobs whose final insert landed more than once',
    regular.filter((row) => (landed.get(row.id) ?? 0) > 1).map((row) => `${row.id}: ${landed.get(row.id)}`),
  )
  const inserted = new Set(inserts.map((insert) => insert.job))
  report(
    'jobs whose final insert never ran',
    regular.filter((row) => !inserted.has(row.id)).map((row) => row.id),
  )

  const maxRunning = maxConcurrent(runs)
  if (maxRunning.global > SOAK_QUEUE.concurrency.total)
    problems.push(`${maxRunning.global} handlers ran at once; concurrency.total is ${SOAK_QUEUE.concurrency.total} (JOB-07)`)
  if (maxRunning.perGroup > SOAK_QUEUE.concurrency.perGroup)
    problems.push(`${maxRunning.perGroup} handlers of one group ran at once; perGroup is ${SOAK_QUEUE.concurrency.perGroup} (JOB-07)`)

  const regularRuns = log.filter((record) => record.t === 'run' && record.job !== 'poison').length
  return {
    problems,
    figures: {
      jobs: facts.jobs,
      done: regular.filter((row) => row.state === 'done').length,
      kills: facts.kills.size,
      poisonKills,
      terminations: facts.terminations,
      workersStarted: facts.workersStarted,
      rerunHandlers: regularRuns - regular.length,
      rerunSteps,
      rerunInserts: inserts.filter((insert) => insert.changes === 0).length,
      maxRunning,
      maxAttemptsUsed: Math.max(0, ...regular.map((row) => row.attempts)),
      poison: poisonRow && {
        state: poisonRow.state,
        attempts: poisonRow.attempts,
        maxAttempts: poisonRow.maxAttempts,
        error: poisonRow.error,
      },
      leasesLeft,
      stepsLeft,
      integrity,
      elapsedMs: facts.elapsedMs,
    },
  }
}

interface RunInterval {
  job: string
  grp: string | null
  start: number
  end: number
}

/**
 * Every handler start is one attempt (no attempt number is handed out twice,
 * and no job has more starts than counted attempts: JOB-04), and ends either
 * by returning or with the death of its process.
 */
function checkRuns(
  log: readonly SoakLogRecord[],
  deaths: ReadonlyMap<number, number>,
  jobs: ReadonlyMap<string, JobRow>,
  report: (what: string, cases: string[]) => void,
): RunInterval[] {
  const ends = new Map<string, number>()
  for (const record of log) if (record.t === 'end') ends.set(`${record.job}#${record.attempt}#${record.pid}`, record.at)
  const seen = new Set<string>()
  const twice: string[] = []
  const open: string[] = []
  const starts = new Map<string, number>()
  const intervals: RunInterval[] = []
  for (const record of log) {
    if (record.t !== 'run') continue
    const attemptKey = `${record.job}#${record.attempt}`
    if (seen.has(attemptKey)) twice.push(`${record.job} attempt ${record.attempt}`)
    seen.add(attemptKey)
    starts.set(record.job, (starts.get(record.job) ?? 0) + 1)
    const end = ends.get(`${attemptKey}#${record.pid}`) ?? deaths.get(record.pid)
    if (end === undefined || end < record.at) open.push(`${record.job} attempt ${record.attempt} in ${record.pid}`)
    else if (end > record.at) intervals.push({ job: record.job, grp: record.grp, start: record.at, end })
  }
  report('attempts that started twice', twice)
  report('runs that neither returned nor died with their process', open)
  report(
    'jobs with more handler starts than counted attempts (JOB-04)',
    [...starts]
      .filter(([job, count]) => count > (jobs.get(job)?.attempts ?? 0))
      .map(([job, count]) => `${job}: ${count} starts, ${jobs.get(job)?.attempts} attempts`),
  )
  return intervals
}

/**
 * Each step function ran once per job, except where a kill fell inside an
 * earlier run of it (after it started, before its answer was kept), and no
 * step function started again once its answer was kept (JOB-06). Answers the
 * number of reruns.
 */
function checkSteps(
  log: readonly SoakLogRecord[],
  deaths: ReadonlyMap<number, number>,
  report: (what: string, cases: string[]) => void,
): number {
  const starts = new Map<string, Array<{ pid: number; at: number; attempt: number }>>()
  const kept = new Set<string>()
  const afterKept: string[] = []
  for (const record of log) {
    if (record.t === 'kept') kept.add(`${record.job}/${record.name}`)
    if (record.t !== 'step') continue
    const key = `${record.job}/${record.name}`
    if (kept.has(key)) afterKept.push(`${key} attempt ${record.attempt}`)
    const list = starts.get(key) ?? []
    list.push({ pid: record.pid, at: record.at, attempt: record.attempt })
    starts.set(key, list)
  }
  const unexplained: string[] = []
  let reruns = 0
  for (const [key, list] of starts) {
    reruns += list.length - 1
    for (const earlier of list.slice(0, -1)) {
      const death = deaths.get(earlier.pid)
      if (death === undefined || death < earlier.at)
        unexplained.push(`${key} attempt ${earlier.attempt} in ${earlier.pid}, which was not killed after it started`)
    }
  }
  report('step functions started again after their answer was kept (JOB-06)', afterKept)
  report('step functions that ran again with no kill inside the earlier run', unexplained)
  return reruns
}

/** The most intervals open at once, overall and within one group; an end and a start at the same millisecond do not overlap. */
function maxConcurrent(intervals: readonly RunInterval[]): { global: number; perGroup: number } {
  const events = intervals.flatMap((run) => [
    { at: run.start, delta: 1, grp: run.grp },
    { at: run.end, delta: -1, grp: run.grp },
  ])
  events.sort((a, b) => a.at - b.at || a.delta - b.delta)
  let global = 0
  let maxGlobal = 0
  let maxGroup = 0
  const groups = new Map<string, number>()
  for (const event of events) {
    global += event.delta
    maxGlobal = Math.max(maxGlobal, global)
    if (event.grp !== null) {
      const inGroup = (groups.get(event.grp) ?? 0) + event.delta
      groups.set(event.grp, inGroup)
      maxGroup = Math.max(maxGroup, inGroup)
    }
  }
  return { global: maxGlobal, perGroup: maxGroup }
}

/** Whether a job's stored result (JSON text, as each dialect writes it back) is `{ total }`. */
function hasTotal(result: string | null, total: number): boolean {
  try {
    const parsed = JSON.parse(result ?? 'null') as { total?: unknown } | null
    return parsed !== null && Object.keys(parsed).length === 1 && parsed.total === total
  } catch {
    return false
  }
}

function numberOf(id: string): number {
  return Number(id.slice('job-'.length))
}
