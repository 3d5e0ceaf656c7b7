/**
 * `npm run bench`: every figure of issue 4 for drizzle-jobs, plainjob
 * 0.0.14, liteque 0.8.0 and the hand-written floor, in one run, each
 * measurement in a fresh process on fresh files, repeated and reported as
 * medians. Prints a Markdown table and writes it with the machine's
 * description to bench/RESULTS.md.
 *
 *   npm run bench                       the whole run (about 10 minutes)
 *   npm run bench -- --docs             also rewrite the last run in docs/benchmarks.md
 *   npm run bench -- --only process,scale --subjects drizzle-jobs,floor --reps 1
 *                                       a part of it, printed only
 * Stages: enqueue, process, processes, pickup, scale, floor.
 * BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=prof" profiles every child.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { ROOT, runTask } from './lib/child.js'
import { nowMs } from './lib/clock.js'
import { runDir } from './lib/files.js'
import { lastRunSection, spliceLastRun } from './lib/docs.js'
import { ensureLiteque } from './lib/install.js'
import { HEADINGS, renderRuns, renderTable, Results, SUBJECTS, type Subject } from './lib/report.js'
import type {
  EnqueueAppResult,
  EnqueueBatchResult,
  FillResult,
  InfoResult,
  PickupResult,
  ProcessesResult,
  ProcessResult,
  ScaleResult,
} from './lib/tasks.js'
import { CONFIGURATIONS, COUNTS, METHOD, ROWS } from './rows.js'

const STAGES = ['enqueue', 'process', 'processes', 'pickup', 'scale', 'floor'] as const
type Stage = (typeof STAGES)[number]

const MODULES: Record<Subject, string> = {
  'drizzle-jobs': resolve(ROOT, 'bench/subjects/drizzle-jobs.ts'),
  plainjob: resolve(ROOT, 'bench/subjects/plainjob.ts'),
  liteque: resolve(ROOT, 'bench/liteque/liteque.ts'),
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
const subjects = flags.subjects ? (flags.subjects.split(',') as Subject[]) : [...SUBJECTS]
for (const subject of subjects) if (!SUBJECTS.includes(subject)) throw new Error(`--subjects: unknown '${subject}' (known: ${SUBJECTS.join(', ')})`)
const complete = !flags.only && !flags.subjects && reps >= 3

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

/** Runs one task in a child; a failure is logged and kept for the notes, and the run goes on. */
async function measure<T>(subject: Subject, task: string, args: object, what: string, timeoutMs?: number): Promise<T | undefined> {
  try {
    return await runTask<T>(MODULES[subject], task, { dir, ...args }, timeoutMs === undefined ? {} : { timeoutMs })
  } catch (error) {
    const message = `${HEADINGS[subject]}, ${what}: ${(error as Error).message.split('\n').slice(0, 6).join(' / ')}`
    errors.push(message)
    log(`ERROR ${message}`)
    return undefined
  }
}

function show(value: number, unit: string): string {
  return `${unit === 'ms' ? value.toFixed(3) : Math.round(value).toLocaleString('en-US')} ${unit}`
}

async function enqueueStage(): Promise<void> {
  for (let rep = 0; rep < reps; rep++) {
    for (const subject of turn(['drizzle-jobs', 'plainjob', 'floor'], rep)) {
      const r = await measure<EnqueueAppResult>(subject, 'enqueue-app', { count: COUNTS.appTransactions, warmup: COUNTS.appWarmup, appOnlyFirst: rep % 2 === 0 }, 'enqueue-app')
      if (!r) continue
      results.add('enqueue-app', subject, { value: r.txPerSec })
      results.add('enqueue-app-only', subject, { value: r.appOnlyTxPerSec })
      results.add('enqueue-overhead', subject, { value: r.appOnlyTxPerSec / r.txPerSec - 1 })
      log(`enqueue-app ${subject}: ${show(r.txPerSec, 'tx/s')} with the job, ${show(r.appOnlyTxPerSec, 'tx/s')} without`)
    }
    for (const subject of turn(['drizzle-jobs', 'plainjob', 'floor'], rep)) {
      const r = await measure<EnqueueBatchResult>(subject, 'enqueue-batch', { count: COUNTS.batchTotal, batch: COUNTS.batchSize, warmupBatches: 10 }, 'enqueue-batch')
      if (!r) continue
      results.add('enqueue-batch', subject, { value: r.jobsPerSec })
      log(`enqueue-batch ${subject}: ${show(r.jobsPerSec, 'jobs/s')}`)
    }
  }
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

function drainArgs(subject: Subject, slots: number): object | undefined {
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
      for (const subject of turn(['drizzle-jobs', 'plainjob', 'liteque'], rep)) {
        const args = drainArgs(subject, slots)
        const r = args && (await measure<ProcessResult>(subject, 'process', args, `process slots ${slots}`))
        if (!r) continue
        results.add(`process-${slots}`, subject, { value: r.jobsPerSec, capped: r.capped })
        log(`process slots ${slots} ${subject}: ${show(r.jobsPerSec, 'jobs/s')} (${r.done} in ${r.elapsedMs.toFixed(0)} ms${r.capped ? ', capped' : ''})`)
      }
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
    for (const subject of turn(['drizzle-jobs', 'plainjob', 'liteque', 'floor'], rep)) {
      const args = drainArgs(subject, COUNTS.procSlots)
      const r = args && (await measure<ProcessesResult>(subject, 'processes', { ...args, procs: COUNTS.procs }, 'processes'))
      if (!r) continue
      results.add('processes', subject, { value: r.jobsPerSec, capped: r.capped })
      results.add('processes-max', subject, { value: r.maxConcurrent })
      log(`processes ${subject}: ${show(r.jobsPerSec, 'jobs/s')}, max ${r.maxConcurrent} running, per process ${r.perProcess.join('/')}${r.capped ? ', capped' : ''}`)
    }
  }
}

async function pickupStage(): Promise<void> {
  const record = (subject: Subject, where: 'same' | 'other', r: PickupResult | undefined): void => {
    if (!r) return
    results.add(`pickup-${where}-median`, subject, { value: r.medianMs })
    results.add(`pickup-${where}-p99`, subject, { value: r.p99Ms })
    log(`pickup ${where} process ${subject}: median ${show(r.medianMs, 'ms')}, p99 ${show(r.p99Ms, 'ms')} (${r.samples} samples)`)
  }
  if (subjects.includes('drizzle-jobs')) {
    for (let rep = 0; rep < reps; rep++) {
      for (const where of rep % 2 === 0 ? (['same', 'other'] as const) : (['other', 'same'] as const)) {
        const args = { samples: COUNTS.pickupSamples, warmup: 5, gapMaxMs: COUNTS.pickupGapMs, otherProcess: where === 'other' }
        record('drizzle-jobs', where, await measure<PickupResult>('drizzle-jobs', 'pickup', args, `pickup ${where}`))
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
    const r = await measure<FillResult>(subject, 'fill', { count: COUNTS.scaleWaiting, name: 'scale-template' }, 'fill 1,000,000', 600_000)
    if (!r) continue
    big.set(subject, r)
    log(`scale: ${subject} filled 1,000,000 waiting in ${(r.ms / 1000).toFixed(1)} s`)
  }
  for (let rep = 0; rep < reps; rep++) {
    for (const subject of turn(['drizzle-jobs', 'plainjob', 'liteque', 'floor'], rep)) {
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
      const ahead = r.aheadMedianMs === undefined ? '' : `, ahead ${r.ahead} in ${show(r.aheadMedianMs, 'ms')} (p99 ${show(r.aheadP99Ms ?? NaN, 'ms')})`
      log(`scale ${subject}: ${show(r.jobsPerSec, 'jobs/s')} (${r.done} in ${r.elapsedMs.toFixed(0)} ms${r.capped ? ', capped' : ''})${ahead}`)
    }
  }
  for (const template of big.values()) rmSync(template.template, { force: true })
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
  const sqlite = infos.map((info) => `${info.sqlite} (${info.name})`).join(', ')
  const driver = JSON.parse(readFileSync(resolve(ROOT, 'node_modules/better-sqlite3/package.json'), 'utf8')) as { version: string }
  return [
    `- CPU: ${cpus[0]?.model ?? 'unknown'}, ${cpus.length} logical cores`,
    `- memory: ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
    `- OS: ${os.type()} ${os.release()} (${os.arch()})`,
    `- Node ${process.version}; better-sqlite3 ${driver.version} (liteque: 11.9.1); drizzle-jobs: ${engineVersion()}, run by tsx`,
    `- SQLite: ${sqlite}`,
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
    pickup: pickupStage,
    scale: scaleStage,
    floor: floorStage,
  }
  for (const stage of STAGES) {
    if (!stages.has(stage)) continue
    const t0 = nowMs()
    await run[stage]()
    log(`stage ${stage} took ${((nowMs() - t0) / 1000).toFixed(0)} s`)
  }
  rmSync(dir, { recursive: true, force: true })

  const cappedNote = (subject: Subject): string =>
    `${HEADINGS[subject]}: its drains stop after ${COUNTS.litequeCapMs / 1000} s (a full drain would not fit the run's time); the figure is the jobs done over that time.`
  const rendered = renderTable(results, ROWS, cappedNote)
  const minutes = ((nowMs() - started) / 60_000).toFixed(1)
  const notes = [
    ...rendered.footnotes.map((text, i) => `[${i + 1}] ${text}`),
    ...errors.map((text) => `Error: ${text}`),
  ]
  const targets = rendered.targets.map((target) => `- ${target.met === undefined ? '…' : target.met ? 'met' : '**MISSED**'}: ${target.figure}, ${target.text} (${target.detail})`)
  const description = machine(infos)
  const body = [
    rendered.table,
    '',
    ratioLegend(),
    '',
    ...notes.map((line) => `${line}  `),
  ].join('\n')
  console.log(`\n${body}\n\nTargets (issue 4):\n${targets.join('\n')}\n\nMachine:\n${description}\n\n${minutes} minutes in all.`)
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
    '## Targets (issue 4)',
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
    renderRuns(results, ROWS),
    '',
  ].join('\n')
  writeFileSync(resolve(ROOT, 'bench/RESULTS.md'), results_md)
  log('wrote bench/RESULTS.md')
  if (flags.docs) {
    const table = renderTable(results, ROWS, cappedNote, { targetColumn: false }).table
    const docsBody = [table, '', ratioLegend(), '', ...notes.map((line) => `${line}  `)].join('\n')
    const file = resolve(ROOT, 'docs/benchmarks.md')
    const section = lastRunSection({ description, body: docsBody, method: METHOD, configurations: CONFIGURATIONS })
    writeFileSync(file, spliceLastRun(readFileSync(file, 'utf8'), section))
    log('rewrote the last run in docs/benchmarks.md')
  }
}

function ratioLegend(): string {
  return 'Ratios are drizzle-jobs / the other: above 1× is faster for throughput (tx/s, jobs/s), below 1× is faster for times (ms).'
}

await main()
