/**
 * What each command does, given its parsed arguments and an open database:
 * it answers the text a person reads, where every stored or given name and
 * error is {@link printable}, and the value `--json` prints.
 */
import { cancel, retryJob } from '../admin/jobs.js'
import { inspectJob, listJobs, type JobDetail, type JobEvent, type JobRecord } from '../admin/list.js'
import { prune } from '../admin/prune.js'
import { pauseQueue, queueCounts, resumeQueue } from '../admin/queues.js'
import { endedBetween, oldestDueMs } from '../admin/stats.js'
import { listSchedules } from '../admin/schedules.js'
import { toMs } from '../duration.js'
import { isJobsError } from '../errors.js'
import { STATES, type EndedState, type JobState, type JobWait } from '../types.js'
import { CliError, EXIT, usageError } from './exit.js'
import { json, moment, number, oneLine, printable, printableLines, relative, span, table } from './format.js'
import type { OpenDatabase } from './open.js'

export interface Args {
  positionals: string[]
  queue?: string
  state?: string[]
  group?: string
  id?: string
  limit?: string
  cursor?: string
  'older-than'?: string
}

export interface Output {
  text: string
  json: unknown
}

const RATE_WINDOW_MS = 60_000

/** `status`: each queue with its counts, what ended in the last minute, and how long its oldest due job has waited. */
export async function status(open: OpenDatabase, args: Args): Promise<Output> {
  const now = Date.now()
  const all = args.queue === undefined ? await queueCounts(open.db) : [await queueCounts(open.db, args.queue)]
  const queues = []
  for (const counts of all) {
    queues.push({
      ...counts,
      donePerMinute: await endedBetween(open.connection, counts.queue, 'done', now - RATE_WINDOW_MS, now + 1),
      failedPerMinute: await endedBetween(open.connection, counts.queue, 'failed', now - RATE_WINDOW_MS, now + 1),
      oldestDueMs: await oldestDueMs(open.connection, counts.queue, now),
    })
  }
  const rows = queues.map((q) => [
    q.queue,
    q.paused ? 'paused' : 'active',
    String(q.waiting),
    String(q.scheduled),
    String(q.running),
    String(q.done),
    String(q.failed),
    String(q.canceled),
    String(q.donePerMinute),
    String(q.failedPerMinute),
    q.oldestDueMs === null ? '-' : span(q.oldestDueMs),
  ])
  const header = [
    'queue',
    'status',
    'waiting',
    'scheduled',
    'running',
    'done',
    'failed',
    'canceled',
    'done/min',
    'failed/min',
    'oldest due',
  ]
  return {
    text: queues.length === 0 ? 'no queue yet: no job has been added to this database' : table(header, rows),
    json: { at: new Date(now), queues },
  }
}

/** `list`: one page of jobs, with the cursor of the next. */
export async function list(open: OpenDatabase, args: Args): Promise<Output> {
  const state = oneState(args.state)
  const limit = args.limit === undefined ? undefined : wholeNumber(args.limit, '--limit')
  const page = await listJobs(open.db, {
    ...(args.queue === undefined ? {} : { queue: args.queue }),
    ...(state === undefined ? {} : { state }),
    ...(args.group === undefined ? {} : { group: args.group }),
    ...(args.id === undefined ? {} : { id: args.id }),
    ...(limit === undefined ? {} : { limit }),
    ...(args.cursor === undefined ? {} : { cursor: args.cursor }),
  })
  const now = Date.now()
  const rows = page.jobs.map((job) => [
    job.queue,
    job.id,
    job.state,
    job.group ?? '',
    `${number(job.attempt, job.malformed?.attempts)}/${number(job.attempts, job.malformed?.max_attempts)}`,
    when(job, now),
    oneLine(job.error, 60),
  ])
  const lines = [page.jobs.length === 0 ? 'no job matches' : table(['queue', 'id', 'state', 'group', 'attempt', 'when', 'error'], rows)]
  if (page.next) lines.push('', `more: add --cursor ${page.next}`)
  return { text: lines.join('\n'), json: page }
}

function when(job: JobRecord, now: number): string {
  if (job.finishedAt || job.malformed?.finished_at) return `ended ${relative(job.finishedAt, now, job.malformed?.finished_at)}`
  if (job.state === 'running') return 'running'
  if (job.waitsFor) return waitNote(job.waitsFor, now)
  return `${job.runAt && job.runAt.getTime() > now ? 'runs' : 'due'} ${relative(job.runAt, now, job.malformed?.run_at)}`
}

/**
 * What a parked run waits for, and until when (`at`: the time as `relative` or `moment` write it): "sleeping ('nap'),
 * wakes in 59m 59s", "waiting for event 'paid', times out in 2h 00m", "waiting for event 'paid', no timeout".
 */
function waitNote(wait: JobWait, now: number, at: (date: Date, now: number) => string = relative): string {
  const what = wait.kind === 'sleep' ? `sleeping (${quoted(wait.step)})` : `waiting for event ${quoted(wait.name)}`
  if (wait.until === null) return `${what}, no timeout`
  const due = wait.until.getTime() <= now ? 'due' : wait.kind === 'sleep' ? 'wakes' : 'times out'
  return `${what}, ${due} ${at(wait.until, now)}`
}

/** `show ID`: one job in full. */
export async function show(open: OpenDatabase, args: Args): Promise<Output> {
  const { queue, id } = await jobArgument(open, args, 'show')
  const job = await inspectJob(open.db, queue, id)
  if (!job) throw notFound(queue, id)
  return { text: describeJob(job, Date.now()), json: job }
}

function describeJob(job: JobDetail, now: number): string {
  const lines = [
    `job        ${printable(job.id)}`,
    `queue      ${printable(job.queue)}`,
    `state      ${printable(job.state)}`,
    `group      ${job.group === null ? '-' : printable(job.group)}`,
    `priority   ${number(job.priority, job.malformed?.priority)}`,
    `attempts   ${number(job.attempt, job.malformed?.attempts)} of ${number(job.attempts, job.malformed?.max_attempts)}`,
    `added      ${moment(job.createdAt, now, job.malformed?.created_at)}`,
  ]
  const wait = job.waitsFor
  if (wait) lines.push(`parked     ${waitNote(wait, now, moment)}`)
  lines.push(
    `run at     ${wait?.kind === 'event' && wait.until === null ? 'when the event is sent' : moment(job.runAt, now, job.malformed?.run_at)}`,
    `ended      ${moment(job.finishedAt, now, job.malformed?.finished_at)}`,
  )
  if (job.lease) {
    const { attempt, owner, expiresAt } = job.lease
    lines.push(
      `lease      attempt ${number(attempt, job.malformed?.['lease.attempt'])} by ${printable(owner)}, expires ${relative(expiresAt, now, job.malformed?.['lease.expires_at'])}`,
    )
  }
  if (job.traceId !== null) lines.push(`trace      ${job.traceId}`)
  lines.push('', 'value', indent(json(job.value)))
  if (job.result !== null) lines.push('', 'result', indent(json(job.result)))
  if (job.error !== null) lines.push('', 'error', indent(printableLines(job.errorStack ?? job.error)))
  if (job.steps.length > 0) {
    lines.push('', 'steps')
    for (const step of job.steps) lines.push(`  ${printable(step.name)}: ${oneLine(json(step.answer, 0), 100)}`)
  }
  if (job.events.length > 0) {
    lines.push('', 'events')
    for (const event of job.events) lines.push(`  ${printable(event.name)}: ${eventNote(event, now)}`)
  }
  return lines.join('\n')
}

/** An event of the job: "sent 5s ago: {"ok":true}", "waiting since 1m ago, times out in 59m", "timed out 2s ago". */
function eventNote(event: JobEvent, now: number): string {
  const at = relative(event.at, now)
  if (event.state === 'sent') return `sent ${at}: ${oneLine(json(event.payload, 0), 100)}`
  if (event.state === 'timed_out') return `timed out ${at}`
  if (event.state !== 'waiting') return `${printable(event.state)} ${at}`
  return `waiting since ${at}, ${event.deadline === null ? 'no timeout' : `times out ${relative(event.deadline, now)}`}`
}

function quoted(name: string): string {
  return `'${printable(name)}'`
}

function indent(text: string): string {
  return text.replace(/^/gm, '  ')
}

/** `schedules`: each recurring schedule with its next slot, its last slot and the state of that slot's job. */
export async function schedules(open: OpenDatabase, args: Args): Promise<Output> {
  if (args.positionals.length > 0)
    throw usageError(`schedules takes no argument (got ${args.positionals.join(' ')}); name a queue with --queue`)
  const found = await listSchedules(open.db, args.queue)
  const now = Date.now()
  const rows = found.map((s) => [
    printable(s.queue),
    printable(s.name),
    printable(s.cron),
    printable(s.tz),
    relative(Number.isNaN(s.nextAt.getTime()) ? null : s.nextAt, now, s.malformed?.next_at),
    s.lastSlot === null ? '-' : relative(Number.isNaN(s.lastSlot.getTime()) ? null : s.lastSlot, now, s.malformed?.last_slot),
    s.lastJob === null ? '-' : (s.lastJob.state ?? 'pruned'),
  ])
  return {
    text: found.length === 0 ? 'no schedule yet' : table(['queue', 'name', 'cron', 'tz', 'next slot', 'last slot', 'last job'], rows),
    json: { at: new Date(now), schedules: found },
  }
}

/** `retry ID`: a failed or canceled job runs again with fresh attempts. */
export async function retry(open: OpenDatabase, args: Args): Promise<Output> {
  const { queue, id } = await jobArgument(open, args, 'retry')
  if (!(await retryJob(open.db, queue, id))) {
    throw new CliError(
      EXIT.REFUSED,
      `job '${id}' of queue '${queue}' is ${await stateOf(open, queue, id)}: only failed or canceled jobs can be retried; nothing changed`,
      'refused',
    )
  }
  return { text: `job ${quoted(id)} of queue ${quoted(queue)} is waiting again, with fresh attempts`, json: { queue, id, retried: true } }
}

/** `cancel ID`: a job that has not ended ends canceled; a running one has its signal aborted. */
export async function cancelCommand(open: OpenDatabase, args: Args): Promise<Output> {
  const { queue, id } = await jobArgument(open, args, 'cancel')
  if (!(await cancel(open.db, queue, id))) {
    throw new CliError(
      EXIT.REFUSED,
      `job '${id}' of queue '${queue}' has already ended (${await stateOf(open, queue, id)}); nothing changed`,
      'refused',
    )
  }
  return { text: `job ${quoted(id)} of queue ${quoted(queue)} is canceled`, json: { queue, id, canceled: true } }
}

/** `pause QUEUE` and `resume QUEUE`. */
export async function pause(open: OpenDatabase, args: Args, paused: boolean): Promise<Output> {
  const queue = queueArgument(args, paused ? 'pause' : 'resume')
  if (paused) await pauseQueue(open.db, queue)
  else await resumeQueue(open.db, queue)
  return {
    text: paused
      ? `queue ${quoted(queue)} is paused: workers claim nothing more from it until it is resumed`
      : `queue ${quoted(queue)} is resumed`,
    json: { queue, paused },
  }
}

/** `prune --older-than DURATION`: deletes ended jobs that ended longer ago than that. */
export async function pruneCommand(open: OpenDatabase, args: Args): Promise<Output> {
  if (args.positionals.length > 0)
    throw usageError(`prune takes no argument (got ${args.positionals.join(' ')}); say what to delete with --older-than`)
  if (args['older-than'] === undefined)
    throw usageError('prune needs --older-than DURATION (for example 7d, 12h, 30m): jobs that ended longer ago than that are deleted')
  const olderThan = duration(args['older-than'], '--older-than')
  const states = (args.state ?? []).map((state) => {
    if (state !== 'done' && state !== 'failed' && state !== 'canceled')
      throw usageError(`--state for prune: expected done, failed or canceled, got '${state}'`)
    return state as EndedState
  })
  const before = Date.now() - olderThan
  const deleted = await prune(open.db, {
    before,
    ...(args.queue === undefined ? {} : { queue: args.queue }),
    ...(states.length > 0 ? { states } : {}),
  })
  return {
    text: `deleted ${deleted} job${deleted === 1 ? '' : 's'} that ended before ${new Date(before).toISOString()}`,
    json: { deleted, before: new Date(before) },
  }
}

/** The job an ID command acts on: in --queue, or in the one queue that holds that id. */
async function jobArgument(open: OpenDatabase, args: Args, command: string): Promise<{ queue: string; id: string }> {
  const [id, ...rest] = args.positionals
  if (id === undefined || id === '')
    throw usageError(`${command} needs the job's id: drizzle-jobs ${command} ID [--queue QUEUE] --db FILE|URL`)
  if (rest.length > 0) throw usageError(`${command} takes one id (got ${args.positionals.join(' ')})`)
  if (args.queue !== undefined) return { queue: args.queue, id }
  const holders = (await listJobs(open.db, { id })).jobs.map((job) => job.queue)
  if (holders.length === 0)
    throw new CliError(EXIT.NOT_FOUND, `no queue holds a job with id '${id}' (it may have been pruned)`, 'not_found')
  if (holders.length > 1)
    throw usageError(`queues ${holders.map((queue) => `'${queue}'`).join(', ')} each hold a job with id '${id}': say which with --queue`)
  return { queue: holders[0]!, id }
}

function queueArgument(args: Args, command: string): string {
  const named = [...args.positionals, ...(args.queue === undefined ? [] : [args.queue])]
  if (named.length !== 1 || named[0] === '') throw usageError(`${command} needs one queue: drizzle-jobs ${command} QUEUE --db FILE|URL`)
  return named[0]!
}

async function stateOf(open: OpenDatabase, queue: string, id: string): Promise<string> {
  return (await inspectJob(open.db, queue, id))?.state ?? 'gone'
}

function notFound(queue: string, id: string): CliError {
  return new CliError(EXIT.NOT_FOUND, `queue '${queue}' holds no job with id '${id}' (it may have been pruned)`, 'not_found')
}

function oneState(states: string[] | undefined): JobState | undefined {
  if (states === undefined || states.length === 0) return undefined
  if (states.length > 1) throw usageError('--state: give one state for list')
  const state = states[0] as JobState
  if (!STATES.includes(state)) throw usageError(`--state: expected one of ${STATES.join(', ')}, got '${state}'`)
  return state
}

function wholeNumber(text: string, option: string): number {
  if (!/^\d+$/.test(text)) throw usageError(`${option}: expected a whole number, got '${text}'`)
  return Number(text)
}

function duration(text: string, option: string): number {
  try {
    return toMs(/^\d+$/.test(text) ? Number(text) : text, option)
  } catch (error) {
    if (isJobsError(error)) throw usageError(error.message)
    throw error
  }
}
