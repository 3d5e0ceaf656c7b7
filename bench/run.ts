/**
 * `npm run bench`: every figure of the issue "Speed where users feel it"
 * (and those of issue 4 it keeps) for drizzle-jobs, plainjob 0.0.14,
 * liteque 0.8.0, BullMQ 6.7.6 on Redis and the hand-written floor, in one
 * run, each measurement in a fresh process on fresh files (BullMQ: a fresh
 * private Redis server), repeated and reported as medians. Prints a
 * Markdown table and writes it with the machine's description to
 * bench/RESULTS.md.
 *
 *   npm run bench                       the whole run (about 15 minutes)
 *   npm run bench -- --docs             also rewrite the last run in docs/benchmarks.md
 *   npm run bench -- --only process,scale --subjects drizzle-jobs,floor --reps 1
 *                                       a part of it, printed only
 *   BENCH_SMALL=1 npm run bench -- …    every count small, to check that rows run
 * Stages: enqueue, process, processes, telemetry, limit, watch, pickup, scale, floor.
 * BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=prof" profiles every child.
 *   npm run bench -- --pg [--only …] [--subjects …] [--reps n]
 *                                       the PostgreSQL benchmark instead (bench/pg/run.ts)
 *   npm run bench -- --drivers [--reps n]
 *                                       each driver instead: better-sqlite3, node-postgres, postgres.js,
 *                                       PGlite (bench/drivers.ts)
 */
import { execFileSync } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { ROOT, runTask, spawnTask, type Child } from './lib/child.js'
import { nowMs } from './lib/clock.js'
import { runDir } from './lib/files.js'
import { lastRunSection, spliceLastRun } from './lib/docs.js'
import { ensureLiteque } from './lib/install.js'
import { REDIS_DURABILITY, REDIS_PACKAGE, redisServerPath, startRedis, type RedisServer } from './lib/redis.js'
import { HEADINGS, renderRuns, renderTable, Results, SUBJECTS, type RenderOptions, type Subject } from './lib/report.js'
import type {
  ConcurrencyResult,
  DebounceResult,
  EnqueueAppResult,
  EnqueueBatchResult,
  FillResult,
  InfoResult,
  PickupResult,
  ProcessesResult,
  ProcessResult,
  ScaleResult,
  WatchedResult,
} from './lib/tasks.js'
import { CONFIGURATIONS, COUNTS, METHOD, ROWS, SIDE_UNITS, SMALL } from './rows.js'

// `--pg`: the PostgreSQL benchmark, drizzle-jobs beside graphile-worker and pg-boss (bench/pg/run.ts).
if (process.argv.includes('--pg')) {
  await import('./pg/run.js')
  process.exit()
}

// `--drivers`: drizzle-jobs on each driver it supports, side by side (bench/drivers.ts).
if (process.argv.includes('--drivers')) {
  const { runDrivers } = await import('./drivers.js')
  await runDrivers()
  process.exit()
}

const STAGES = ['enqueue', 'process', 'processes', 'telemetry', 'limit', 'watch', 'pickup', 'scale', 'floor'] as const
type Stage = (typeof STAGES)[number]

const MODULES: Record<Subject, string> = {
  'drizzle-jobs': resolve(ROOT, 'bench/subjects/drizzle-jobs.ts'),
  plainjob: resolve(ROOT, 'bench/subjects/plainjob.ts'),
  liteque: resolve(ROOT, 'bench/liteque/liteque.ts'),
  bullmq: resolve(ROOT, 'bench/subjects/bullmq.ts'),
  floor: resolve(ROOT, 'bench/subjects/floor.ts'),
}

const { values: flags } = parseArgs({
  options: {
    only: { type: 'string' },
    subjects: { type: 'string' },
    reps: { type: 'string', default: '3' },
    docs: { type: 'boolean', default: false },
  },
})
const reps = Number(flags.reps)
if (!Number.isInteger(reps) || reps < 1) throw new Error('--reps: a whole number of at least 1')
const stages = new Set<Stage>(flags.only ? (flags.only.split(',') as Stage[]) : STAGES)
for (const stage of stages) if (!STAGES.includes(stage)) throw new Error(`--only: unknown stage '${stage}' (known: ${STAGES.join(', ')})`)
const requested = flags.subjects ? (flags.subjects.split(',') as Subject[]) : [...SUBJECTS]
for (const subject of requested)
  if (!SUBJECTS.includes(subject)) throw new Error(`--subjects: unknown '${subject}' (known: ${SUBJECTS.join(', ')})`)
const complete = !flags.only && !flags.subjects && reps >= 3 && !SMALL

/** BullMQ needs Debian's redis-server; without it its cells say n/a and why. */
const redisBinary = requested.includes('bullmq') ? redisServerPath() : null
const unavailable: Partial<Record<Subject, string>> = {}
if (requested.includes('bullmq') && !redisBinary) {
  unavailable.bullmq = `redis-server was not found: install Debian's ${REDIS_PACKAGE} package (\`apt-get install ${REDIS_PACKAGE}\`) to measure BullMQ`
}
/** The subjects measured in this run. */
const subjects = requested.filter((subject) => unavailable[subject] === undefined)
/** Why a subject was left out of one row in this run, by row key. */
const skipped: Record<string, Partial<Record<Subject, string>>> = {}

const started = nowMs()
const startedAt = new Date()
const loadBefore = os.loadavg()
const results = new Results()
const errors: string[] = []
const dir = runDir()

function log(line: string): void {
  const seconds = ((nowMs() - started) / 1000).toFixed(0).padStart(4)
  console.log(`[${seconds} s] ${line}`)
}

/** The subjects of this run among `wanted`, in an order that turns with the run number. */
function turn(wanted: readonly Subject[], rep: number): Subject[] {
  const chosen = wanted.filter((subject) => subjects.includes(subject))
  const shift = rep % Math.max(1, chosen.length)
  return [...chosen.slice(shift), ...chosen.slice(0, shift)]
}

let redisServers = 0

/** A fresh private Redis server for one BullMQ measurement (loading `from`, a template folder, when given). */
function freshRedis(from?: string): Promise<RedisServer> {
  return startRedis(redisBinary as string, { dir: join(dir, `redis-${++redisServers}`), ...(from === undefined ? {} : { from }) })
}

/**
 * Runs one task in a child; a failure is logged and kept for the notes, and the run goes on. A BullMQ task
 * gets a fresh Redis server of its own (from `redisFrom`, a template folder, when given), stopped after it.
 */
async function measure<T>(
  subject: Subject,
  task: string,
  args: object,
  what: string,
  timeoutMs?: number,
  redisFrom?: string,
): Promise<T | undefined> {
  let server: RedisServer | undefined
  try {
    if (subject === 'bullmq') server = await freshRedis(redisFrom)
    const taskArgs = { dir, ...args, ...(server ? { redisPort: server.port } : {}) }
    return await runTask<T>(MODULES[subject], task, taskArgs, timeoutMs === undefined ? {} : { timeoutMs })
  } catch (error) {
    const message = `${HEADINGS[subject]}, ${what}: ${(error as Error).message.split('\n').slice(0, 6).join(' / ')}`
    errors.push(message)
    log(`ERROR ${message}`)
    return undefined
  } finally {
    await server?.stop()
  }
}

function show(value: number, unit: string): string {
  return `${unit === 'ms' ? value.toFixed(3) : Math.round(value).toLocaleString('en-US')} ${unit}`
}

async function enqueueStage(): Promise<void> {
  for (let rep = 0; rep < reps; rep++) {
    for (const subject of turn(['drizzle-jobs', 'plainjob', 'floor'], rep)) {
      const r = await measure<EnqueueAppResult>(
        subject,
        'enqueue-app',
        { count: COUNTS.appTransactions, warmup: COUNTS.appWarmup, appOnlyFirst: rep % 2 === 0 },
        'enqueue-app',
      )
      if (!r) continue
      results.add('enqueue-app', subject, { value: r.txPerSec })
      results.add('enqueue-app-only', subject, { value: r.appOnlyTxPerSec })
      const addedUs = 1e6 / r.txPerSec - 1e6 / r.appOnlyTxPerSec
      results.add('enqueue-overhead', subject, { value: addedUs })
      log(
        `enqueue-app ${subject}: ${show(r.txPerSec, 'tx/s')} with the job, ${show(r.appOnlyTxPerSec, 'tx/s')} without: the job adds ${addedUs.toFixed(1)} µs a transaction`,
      )
    }
    await debounceStage()
    for (const subject of turn(['drizzle-jobs', 'plainjob', 'bullmq', 'floor'], rep)) {
      const r = await measure<EnqueueBatchResult>(
        subject,
        'enqueue-batch',
        { count: COUNTS.batchTotal, batch: COUNTS.batchSize, warmupBatches: 10 },
        'enqueue-batch',
      )
      if (!r) continue
      results.add('enqueue-batch', subject, { value: r.jobsPerSec })
      log(`enqueue-batch ${subject}: ${show(r.jobsPerSec, 'jobs/s')}`)
    }
  }
}

/** The debounce row: bursts of debounced adds, each in a transaction of its own, beside as many plain adds. */
async function debounceStage(): Promise<void> {
  if (!subjects.includes('drizzle-jobs')) return
  const r = await measure<DebounceResult>(
    'drizzle-jobs',
    'debounce',
    { count: COUNTS.debounceAdds, burst: COUNTS.debounceBurst },
    'debounce',
  )
  if (!r) return
  results.add('debounce', 'drizzle-jobs', { value: r.debouncedPerSec })
  results.add('debounce-plain', 'drizzle-jobs', { value: r.plainPerSec })
  log(`debounce: ${show(r.debouncedPerSec, 'adds/s')} debounced into ${r.jobs} jobs, ${show(r.plainPerSec, 'adds/s')} plain`)
}

const templates = new Map<Subject, { warm: string; drain: string }>()

async function fillTemplates(wanted: readonly Subject[]): Promise<void> {
  for (const subject of wanted) {
    if (templates.has(subject) || !subjects.includes(subject)) continue
    const warm = await measure<FillResult>(subject, 'fill', { count: COUNTS.warmJobs, name: 'warm-template' }, 'fill')
    const drain = await measure<FillResult>(subject, 'fill', { count: COUNTS.drain, name: 'drain-template' }, 'fill')
    if (warm && drain) templates.set(subject, { warm: warm.template, drain: drain.template })
  }
}

/** A drain's arguments: a template to copy (BullMQ fills its fresh server itself). */
function drainArgs(subject: Subject, slots: number): object | undefined {
  if (subject === 'bullmq') return { count: COUNTS.drain, slots }
  const template = templates.get(subject)
  if (!template) return undefined
  return {
    template: template.drain,
    warmTemplate: template.warm,
    count: COUNTS.drain,
    slots,
    ...(subject === 'liteque' ? { capMs: COUNTS.litequeCapMs } : {}),
  }
}

async function processStage(): Promise<void> {
  await fillTemplates(['drizzle-jobs', 'plainjob', 'liteque', 'floor'])
  for (let rep = 0; rep < reps; rep++) {
    for (const slots of COUNTS.slots) {
      for (const subject of turn(['drizzle-jobs', 'plainjob', 'liteque', 'bullmq'], rep)) {
        const args = drainArgs(subject, slots)
        const r = args && (await measure<ProcessResult>(subject, 'process', args, `process slots ${slots}`))
        if (!r) continue
        results.add(`process-${slots}`, subject, { value: r.jobsPerSec, capped: r.capped })
        log(
          `process slots ${slots} ${subject}: ${show(r.jobsPerSec, 'jobs/s')} (${r.done} in ${r.elapsedMs.toFixed(0)} ms${r.capped ? ', capped' : ''})`,
        )
      }
    }
    // The same drain by a batch handler (of the slots' size), beside the handler per job above.
    const batchArgs = drainArgs('drizzle-jobs', COUNTS.batchSlots)
    const batched =
      batchArgs && (await measure<ProcessResult>('drizzle-jobs', 'process', { ...batchArgs, batch: COUNTS.batchSlots }, 'batch drain'))
    if (batched) {
      results.add('process-batch', 'drizzle-jobs', { value: batched.jobsPerSec })
      log(`process batch ${COUNTS.batchSlots} drizzle-jobs: ${show(batched.jobsPerSec, 'jobs/s')}`)
    }
    for (const mode of ['batched', 'per-step'] as const) {
      const args = drainArgs('floor', 1)
      const r = args && (await measure<ProcessResult>('floor', 'process', { ...args, mode }, `floor drain ${mode}`))
      if (!r) continue
      results.add(`floor-drain-${mode}`, 'floor', { value: r.jobsPerSec })
      log(`floor drain ${mode}: ${show(r.jobsPerSec, 'jobs/s')}`)
    }
  }
}

async function processesStage(): Promise<void> {
  await fillTemplates(['drizzle-jobs', 'plainjob', 'liteque', 'floor'])
  for (let rep = 0; rep < reps; rep++) {
    for (const procs of COUNTS.procs) {
      for (const subject of turn(['drizzle-jobs', 'plainjob', 'liteque', 'bullmq', 'floor'], rep)) {
        const args = drainArgs(subject, COUNTS.procSlots)
        const r = args && (await measure<ProcessesResult>(subject, 'processes', { ...args, procs }, `${procs} processes`))
        if (!r) continue
        results.add(`processes-${procs}`, subject, { value: r.jobsPerSec, capped: r.capped })
        results.add(`processes-${procs}-max`, subject, { value: r.maxConcurrent })
        log(
          `${procs} processes ${subject}: ${show(r.jobsPerSec, 'jobs/s')}, max ${r.maxConcurrent} running, per process ${r.perProcess.join('/')}${r.capped ? ', capped' : ''}`,
        )
      }
    }
  }
}

/**
 * The telemetry rows: drizzle-jobs' drain (slots 16) of jobs that each carry a request's trace context, with
 * OpenTelemetry absent, installed with no SDK, and recording every run, alternating, each in a fresh process.
 */
async function telemetryStage(): Promise<void> {
  await fillTemplates(['drizzle-jobs'])
  const args = drainArgs('drizzle-jobs', COUNTS.telemetrySlots)
  if (!args) return
  const modes = ['absent', 'api', 'sdk', 'sampled'] as const
  for (let rep = 0; rep < reps; rep++) {
    for (const mode of [...modes.slice(rep % modes.length), ...modes.slice(0, rep % modes.length)]) {
      const r = await measure<ProcessResult>('drizzle-jobs', 'process', { ...args, telemetry: mode }, `telemetry ${mode}`)
      if (!r) continue
      results.add(`telemetry-${mode}`, 'drizzle-jobs', { value: r.jobsPerSec })
      log(`telemetry ${mode}: ${show(r.jobsPerSec, 'jobs/s')}`)
    }
  }
}

/**
 * Runs one task of several subjects side by side, started together: each child says `ready` once its
 * workers are, and all get `go` at once, so that none is measured while another is starting up. For
 * measurements that mostly sleep. A failure is logged and kept for the notes, as in `measure`.
 */
async function measureSideBySide<T>(
  subjectsTogether: readonly Subject[],
  task: string,
  args: object,
  what: string,
): Promise<Map<Subject, T>> {
  const answers = new Map<Subject, T>()
  const servers: RedisServer[] = []
  const fail = (subject: Subject, error: unknown): void => {
    const message = `${HEADINGS[subject]}, ${what}: ${(error as Error).message.split('\n').slice(0, 6).join(' / ')}`
    errors.push(message)
    log(`ERROR ${message}`)
  }
  try {
    const started: Array<{ subject: Subject; child: Child }> = []
    for (const subject of subjectsTogether) {
      try {
        const server = subject === 'bullmq' ? await freshRedis() : undefined
        if (server) servers.push(server)
        started.push({ subject, child: spawnTask(MODULES[subject], task, { dir, ...args, ...(server ? { redisPort: server.port } : {}) }) })
      } catch (error) {
        fail(subject, error)
      }
    }
    const ready = await Promise.allSettled(started.map(({ child }) => child.receive('ready', 600_000)))
    started.forEach(({ child }, i) => {
      if (ready[i]?.status === 'fulfilled') child.send({ type: 'go' })
    })
    await Promise.all(
      started.map(async ({ subject, child }) => {
        try {
          answers.set(subject, (await child.result) as T)
        } catch (error) {
          fail(subject, error)
        }
      }),
    )
  } finally {
    for (const server of servers) await server.stop()
  }
  return answers
}

/**
 * The concurrency row: drizzle-jobs and BullMQ (the peers with a limit across processes), side by side,
 * each on a fresh file or server: their handlers sleep, so neither needs the machine to itself.
 */
async function limitStage(): Promise<void> {
  await fillTemplates(['drizzle-jobs'])
  const warm = templates.get('drizzle-jobs')?.warm
  const args = {
    procs: COUNTS.limitProcs,
    limit: COUNTS.limit,
    slots: COUNTS.limit,
    count: COUNTS.limitJobs,
    handlerMs: COUNTS.limitHandlerMs,
    ...(warm === undefined ? {} : { warmTemplate: warm }),
  }
  for (let rep = 0; rep < reps; rep++) {
    const together = turn(['drizzle-jobs', 'bullmq'], rep).filter((subject) => subject !== 'drizzle-jobs' || warm !== undefined)
    const answers = await measureSideBySide<ConcurrencyResult>(together, 'concurrency', args, 'concurrency across processes')
    for (const [subject, r] of answers) {
      const shares = r.perProcess.map((handled) => handled / COUNTS.limitJobs)
      const atOnce = Math.max(r.maxHandlers, r.maxRunning)
      const detail = `at most ${atOnce} at once; per process ${shares.map((share) => `${(share * 100).toFixed(0)}%`).join('/')}`
      results.add('limit', subject, { value: r.elapsedMs / 1000, detail })
      results.add('limit-at-once', subject, { value: atOnce })
      results.add('limit-share-min', subject, { value: Math.min(...shares) })
      results.add('limit-share-max', subject, { value: Math.max(...shares) })
      log(
        `concurrency ${subject}: ${(r.elapsedMs / 1000).toFixed(2)} s, ${r.maxHandlers} handlers and ${r.maxRunning} running at most at once, per process ${r.perProcess.join('/')}`,
      )
    }
  }
}

async function watchStage(): Promise<void> {
  if (!subjects.includes('drizzle-jobs')) return
  await fillTemplates(['drizzle-jobs'])
  const warm = templates.get('drizzle-jobs')?.warm
  if (warm === undefined) return
  for (let rep = 0; rep < reps; rep++) {
    const args = { warmTemplate: warm, count: COUNTS.watchedJobs, slots: COUNTS.watchedSlots, watchedFirst: rep % 2 === 0 }
    const r = await measure<WatchedResult>('drizzle-jobs', 'watched', args, 'watched drain')
    if (!r) continue
    results.add('watch-unwatched', 'drizzle-jobs', { value: r.unwatchedJobsPerSec })
    results.add('watch-watched', 'drizzle-jobs', { value: r.watchedJobsPerSec })
    results.add('watch-snapshots', 'drizzle-jobs', { value: r.snapshotsPerJob })
    log(
      `watched drain: ${show(r.watchedJobsPerSec, 'jobs/s')} watched, ${show(r.unwatchedJobsPerSec, 'jobs/s')} unwatched, ${r.snapshotsPerJob.toFixed(1)} snapshots per job`,
    )
  }
}

async function pickupStage(): Promise<void> {
  const record = (subject: Subject, where: 'same' | 'other', r: PickupResult | undefined): void => {
    if (!r) return
    results.add(`pickup-${where}-median`, subject, { value: r.medianMs })
    results.add(`pickup-${where}-p99`, subject, { value: r.p99Ms })
    log(`pickup ${where} process ${subject}: median ${show(r.medianMs, 'ms')}, p99 ${show(r.p99Ms, 'ms')} (${r.samples} samples)`)
  }
  // drizzle-jobs and BullMQ start a job within milliseconds: their series run alone, one after the other.
  for (let rep = 0; rep < reps; rep++) {
    for (const subject of turn(['drizzle-jobs', 'bullmq'], rep)) {
      for (const where of rep % 2 === 0 ? (['same', 'other'] as const) : (['other', 'same'] as const)) {
        const args = { samples: COUNTS.pickupSamples, warmup: 5, gapMaxMs: COUNTS.pickupGapMs, otherProcess: where === 'other' }
        record(subject, where, await measure<PickupResult>(subject, 'pickup', args, `pickup ${where}`))
      }
    }
  }
  const peers = (['plainjob', 'liteque'] as const).filter((peer) => subjects.includes(peer))
  for (let rep = 0; rep < reps && peers.length > 0; rep++) {
    log(`pickup, peers side by side (round ${rep + 1} of ${reps}, about ${COUNTS.peerPickupSamples} s)`)
    await Promise.all(
      peers.flatMap((peer) =>
        (['same', 'other'] as const).map(async (where) => {
          const args = { samples: COUNTS.peerPickupSamples, warmup: 1, gapMaxMs: COUNTS.peerPickupGapMs, otherProcess: where === 'other' }
          record(peer, where, await measure<PickupResult>(peer, 'pickup', args, `pickup ${where}`))
        }),
      ),
    )
  }
}

async function scaleStage(): Promise<void> {
  await fillTemplates(['drizzle-jobs', 'plainjob', 'liteque', 'floor'])
  const big = new Map<Subject, FillResult>()
  for (const subject of ['drizzle-jobs', 'plainjob', 'liteque', 'floor'] as const) {
    if (!subjects.includes(subject)) continue
    const r = await measure<FillResult>(
      subject,
      'fill',
      { count: COUNTS.scaleWaiting, name: 'scale-template' },
      'fill the scale template',
      600_000,
    )
    if (!r) continue
    big.set(subject, r)
    log(`scale: ${subject} filled ${COUNTS.scaleWaiting.toLocaleString('en-US')} waiting in ${(r.ms / 1000).toFixed(1)} s`)
  }
  const bullmqTemplate = subjects.includes('bullmq') ? await fillBullmqTemplate() : undefined
  for (let rep = 0; rep < reps; rep++) {
    for (const subject of turn(['drizzle-jobs', 'plainjob', 'liteque', 'bullmq', 'floor'], rep)) {
      if (subject === 'bullmq') {
        if (!bullmqTemplate) continue
        const args = { count: COUNTS.scaleDrain, slots: COUNTS.scaleSlots, aheadSamples: 0 }
        const r = await measure<ScaleResult>('bullmq', 'scale', args, 'scale', undefined, bullmqTemplate)
        if (!r) continue
        results.add('scale-process', subject, { value: r.jobsPerSec })
        log(`scale ${subject}: ${show(r.jobsPerSec, 'jobs/s')} (${r.done} in ${r.elapsedMs.toFixed(0)} ms)`)
        continue
      }
      const template = big.get(subject)
      const warm = templates.get(subject)
      if (!template || !warm) continue
      const args = {
        template: template.template,
        warmTemplate: warm.warm,
        count: COUNTS.scaleDrain,
        slots: COUNTS.scaleSlots,
        aheadSamples: 200,
        ...(template.lastId === undefined ? {} : { lastId: template.lastId }),
        ...(subject === 'liteque' ? { capMs: COUNTS.litequeCapMs } : {}),
      }
      const r = await measure<ScaleResult>(subject, 'scale', args, 'scale')
      if (!r) continue
      results.add('scale-process', subject, { value: r.jobsPerSec, capped: r.capped })
      if (r.aheadMedianMs !== undefined) results.add('scale-ahead', subject, { value: r.aheadMedianMs })
      const ahead =
        r.aheadMedianMs === undefined ? '' : `, ahead ${r.ahead} in ${show(r.aheadMedianMs, 'ms')} (p99 ${show(r.aheadP99Ms ?? NaN, 'ms')})`
      log(
        `scale ${subject}: ${show(r.jobsPerSec, 'jobs/s')} (${r.done} in ${r.elapsedMs.toFixed(0)} ms${r.capped ? ', capped' : ''})${ahead}`,
      )
    }
  }
  for (const template of big.values()) rmSync(template.template, { force: true })
  if (bullmqTemplate) rmSync(bullmqTemplate, { recursive: true, force: true })
}

/**
 * BullMQ's scale template: a server filled with the waiting jobs by \`addBulk\`, its append-only file rewritten
 * into one compact base and the server stopped; each run then starts a server on a copy of its folder. Answers
 * the folder, or undefined (the row says why) when the fill does not fit the run's time.
 */
async function fillBullmqTemplate(): Promise<string | undefined> {
  const waiting = COUNTS.scaleWaiting.toLocaleString('en-US')
  const server = await freshRedis()
  try {
    const t0 = nowMs()
    await runTask<{ ms: number }>(
      MODULES.bullmq,
      'fill',
      { dir, redisPort: server.port, count: COUNTS.scaleWaiting },
      { timeoutMs: COUNTS.bullmqScaleFillMs },
    )
    await server.compact()
    await server.stop({ keep: true })
    log(`scale: bullmq filled ${waiting} waiting in ${((nowMs() - t0) / 1000).toFixed(1)} s (addBulk, then the append-only file rewritten)`)
    return server.dir
  } catch (error) {
    await server.stop()
    const reason = `filling ${waiting} waiting jobs with addBulk did not fit the run's time (${COUNTS.bullmqScaleFillMs / 1000} s): ${(error as Error).message.split('\n')[0]}`
    skipped['scale-process'] = { ...skipped['scale-process'], bullmq: reason }
    log(`scale: bullmq n/a, ${reason}`)
    return undefined
  }
}

async function floorStage(): Promise<void> {
  if (!subjects.includes('floor')) return
  for (let rep = 0; rep < reps; rep++) {
    for (const mode of rep % 2 === 0 ? (['per-step', 'batched'] as const) : (['batched', 'per-step'] as const)) {
      const r = await measure<ProcessResult>('floor', 'lifecycle', { count: COUNTS.drain, mode }, `lifecycle ${mode}`)
      if (!r) continue
      results.add(`floor-lifecycle-${mode}`, 'floor', { value: r.jobsPerSec })
      log(`floor lifecycle ${mode}: ${show(r.jobsPerSec, 'jobs/s')}`)
    }
  }
}

/** Which engine was measured: the commit, and whether src/ had changes not yet committed. */
function engineVersion(): string {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim()
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: ROOT, encoding: 'utf8' }).trim() !== ''
    return `src/ at commit ${commit}${dirty ? ' with uncommitted changes' : ''}`
  } catch {
    return 'src/ (not a git checkout)'
  }
}

function machine(infos: InfoResult[]): string {
  const cpus = os.cpus()
  const sqlite = infos.flatMap((info) => (info.sqlite ? [`${info.sqlite} (${info.name})`] : [])).join(', ')
  const bullmq = infos.find((info) => info.redis !== undefined)
  const driver = JSON.parse(readFileSync(resolve(ROOT, 'node_modules/better-sqlite3/package.json'), 'utf8')) as { version: string }
  return [
    `- CPU: ${cpus[0]?.model ?? 'unknown'}, ${cpus.length} logical cores`,
    `- memory: ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
    `- OS: ${os.type()} ${os.release()} (${os.arch()})`,
    `- Node ${process.version}; better-sqlite3 ${driver.version} (liteque: 11.9.1); drizzle-jobs: ${engineVersion()}, run by tsx`,
    ...(sqlite ? [`- SQLite: ${sqlite}`] : []),
    ...(bullmq
      ? [
          `- Redis: ${bullmq.redis} (BullMQ ${bullmq.version}), Debian's redis-server, a private server per measurement on a loopback port: ${REDIS_DURABILITY}`,
        ]
      : []),
    `- date: ${startedAt.toISOString()}; load average before ${loadBefore.map((load) => load.toFixed(2)).join(' ')}, after ${os
      .loadavg()
      .map((load) => load.toFixed(2))
      .join(' ')}`,
  ].join('\n')
}

async function main(): Promise<void> {
  if (subjects.includes('liteque')) ensureLiteque(log)
  const infos: InfoResult[] = []
  for (const subject of subjects) {
    const info = await measure<InfoResult>(subject, 'info', {}, 'info')
    if (info) infos.push(info)
  }
  log(`files in ${dir}; ${reps} runs of each measurement; stages: ${[...stages].join(', ')}`)
  const run: Record<Stage, () => Promise<void>> = {
    enqueue: enqueueStage,
    process: processStage,
    processes: processesStage,
    telemetry: telemetryStage,
    limit: limitStage,
    watch: watchStage,
    pickup: pickupStage,
    scale: scaleStage,
    floor: floorStage,
  }
  try {
    for (const stage of STAGES) {
      if (!stages.has(stage)) continue
      const t0 = nowMs()
      await run[stage]()
      log(`stage ${stage} took ${((nowMs() - t0) / 1000).toFixed(0)} s`)
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }

  const cappedNote = (subject: Subject): string =>
    `${HEADINGS[subject]}: its drains stop after ${COUNTS.litequeCapMs / 1000} s (a full drain would not fit the run's time); the figure is the jobs done over that time.`
  const bullmq = infos.find((info) => info.redis !== undefined)
  const options: RenderOptions = {
    unavailable,
    skipped,
    headingNotes: bullmq
      ? {
          bullmq:
            `BullMQ ${bullmq.version} runs on a private Redis ${bullmq.redis} per measurement with its append-only file synced every second (${REDIS_DURABILITY}): ` +
            'the durability closest to SQLite in WAL with synchronous = NORMAL, where a crash of the machine may lose the last moments of commits and a crash of the process loses none.',
        }
      : {},
  }
  const rendered = renderTable(results, ROWS, cappedNote, options)
  const minutes = ((nowMs() - started) / 60_000).toFixed(1)
  const notes = [...rendered.footnotes.map((text, i) => `[${i + 1}] ${text}`), ...errors.map((text) => `Error: ${text}`)]
  const targets = rendered.targets.map(
    (target) =>
      `- ${target.met === undefined ? '…' : target.met ? 'met' : '**MISSED**'}: ${target.figure}, ${target.text} (${target.detail})`,
  )
  const description = machine(infos)
  const body = [rendered.table, '', ratioLegend(), '', ...notes.map((line) => `${line}  `)].join('\n')
  console.log(`\n${body}\n\nTargets:\n${targets.join('\n')}\n\nMachine:\n${description}\n\n${minutes} minutes in all.`)
  if (!complete) {
    console.log('\n(a partial run: bench/RESULTS.md and docs/benchmarks.md are left as they were)')
    return
  }
  const results_md = [
    '# Benchmark results',
    '',
    `Written by \`npm run bench\` (${minutes} minutes), ${reps} runs of each measurement, medians. drizzle-jobs is this checkout's \`src/\`, run by tsx.`,
    '',
    '## Machine',
    '',
    description,
    '',
    '## Figures',
    '',
    body,
    '',
    '## Targets',
    '',
    'Those of the issue "Speed where users feel it", and those of issue 4 it keeps (pickup, a million waiting, `ahead`).',
    '',
    ...targets,
    '',
    '## How each figure is measured',
    '',
    METHOD,
    '',
    '## Configurations',
    '',
    CONFIGURATIONS,
    '',
    '## Every run',
    '',
    '† the drain was stopped after its time cap.',
    '',
    renderRuns(results, ROWS, SIDE_UNITS),
    '',
  ].join('\n')
  writeFileSync(resolve(ROOT, 'bench/RESULTS.md'), results_md)
  log('wrote bench/RESULTS.md')
  if (flags.docs) {
    const table = renderTable(results, ROWS, cappedNote, { ...options, targetColumn: false }).table
    const docsBody = [table, '', ratioLegend(), '', ...notes.map((line) => `${line}  `)].join('\n')
    const file = resolve(ROOT, 'docs/benchmarks.md')
    const section = lastRunSection({ description, body: docsBody, method: METHOD, configurations: CONFIGURATIONS })
    writeFileSync(file, spliceLastRun(readFileSync(file, 'utf8'), section))
    log('rewrote the last run in docs/benchmarks.md')
  }
}

function ratioLegend(): string {
  return 'Ratios are drizzle-jobs / the other: above 1× is faster for throughput (tx/s, jobs/s), below 1× is faster for times (s, ms, µs).'
}

await main()
