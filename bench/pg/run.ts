/**
 * `npm run bench -- --pg`: drizzle-jobs on PostgreSQL beside graphile-worker 0.17.3 and pg-boss 10.4.2
 * (each installed in its own folder under bench/pg-peers/ on first use) and BullMQ 6.7.6 on its PostgreSQL
 * backend (from the root's node_modules), all on one server (see bench/pg/lib.ts for which), with the same
 * job counts, the same no-op handler, the same concurrency and the server's durability settings
 * (synchronous_commit on). Each measurement runs in a fresh database (a copy of a template filled
 * beforehand, untimed) and a fresh process, repeated `--reps` times (default 3) and reported as medians.
 * Prints a Markdown table with ratios and the targets, and (for a whole run) writes it with the machine's
 * description to bench/RESULTS-pg.md.
 *
 * Every drain runs twice: on a copy of the template as its fill left it ("fresh", no table with
 * statistics) and on a copy of it after `VACUUM ANALYZE` ("analyzed"); bench/pg/templates.ts says how
 * no other statistics get in, and checks it.
 *
 *   npm run bench -- --pg                                   the whole run
 *   npm run bench -- --pg --only drain,pickup --subjects drizzle-jobs,graphile-worker --reps 1
 *   BENCH_SMALL=1 npm run bench -- --pg                     every count small, to check that rows run
 * Stages: drain, processes, telemetry, pickup, enqueue, scale.
 * BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=prof" profiles every child.
 */
import { writeFileSync } from 'node:fs'
import os from 'node:os'
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { ROOT } from '../lib/child.js'
import { nowMs } from '../lib/clock.js'
import { ensurePgPeer, PG_PEER_DIRS } from '../lib/install.js'
import { formatValue, Results } from '../lib/report.js'
import type { EnqueueAppResult, EnqueueBatchResult, PickupResult, ProcessesResult, ProcessResult, ScaleResult } from '../lib/tasks.js'
import { benchServer, dropAll, serverDescription } from './lib.js'
import { DRAIN_STATES, PG_COUNTS, PG_HEADINGS, PG_ROWS, PG_SUBJECTS, renderPgTable, SMALL, type PgSubject } from './rows.js'
import { pgCopies } from './templates.js'

const STAGES = ['drain', 'processes', 'telemetry', 'pickup', 'enqueue', 'scale'] as const
type Stage = (typeof STAGES)[number]

const MODULES: Record<PgSubject, string> = {
  'drizzle-jobs': resolve(ROOT, 'bench/subjects/drizzle-jobs-pg.ts'),
  'graphile-worker': resolve(ROOT, 'bench/pg-peers/graphile-worker/graphile-worker.ts'),
  'pg-boss': resolve(ROOT, 'bench/pg-peers/pg-boss/pg-boss.ts'),
  bullmq: resolve(ROOT, 'bench/subjects/bullmq-pg.ts'),
}

const { values: flags } = parseArgs({
  options: {
    pg: { type: 'boolean', default: true },
    only: { type: 'string' },
    subjects: { type: 'string' },
    reps: { type: 'string', default: '3' },
  },
})
const reps = Number(flags.reps)
if (!Number.isInteger(reps) || reps < 1) throw new Error('--reps: a whole number of at least 1')
const stages = new Set<Stage>(flags.only ? (flags.only.split(',') as Stage[]) : STAGES)
for (const stage of stages) if (!STAGES.includes(stage)) throw new Error(`--only: unknown stage '${stage}' (known: ${STAGES.join(', ')})`)
const subjects = flags.subjects ? (flags.subjects.split(',') as PgSubject[]) : [...PG_SUBJECTS]
for (const subject of subjects)
  if (!PG_SUBJECTS.includes(subject)) throw new Error(`--subjects: unknown '${subject}' (known: ${PG_SUBJECTS.join(', ')})`)
const complete = !flags.only && !flags.subjects && reps >= 3 && !SMALL
const command = `npm run bench -- --pg${flags.only ? ` --only ${flags.only}` : ''}${flags.subjects ? ` --subjects ${flags.subjects}` : ''} --reps ${reps}`

const started = nowMs()
const startedAt = new Date()
const loadBefore = os.loadavg()
const results = new Results<PgSubject>()
const errors: string[] = []

function log(line: string): void {
  const seconds = ((nowMs() - started) / 1000).toFixed(0).padStart(4)
  console.log(`[${seconds} s] ${line}`)
}

for (const subject of subjects) if (subject in PG_PEER_DIRS) ensurePgPeer(subject as keyof typeof PG_PEER_DIRS, log)
const server = await benchServer()
log(`server: ${server.source} (${await serverDescription(server.url)})`)

/** The subjects of this run among `wanted`, in an order that turns with the run number. */
function turn(wanted: readonly PgSubject[], rep: number): PgSubject[] {
  const chosen = wanted.filter((subject) => subjects.includes(subject))
  const shift = rep % Math.max(1, chosen.length)
  return [...chosen.slice(shift), ...chosen.slice(0, shift)]
}

function fail(subject: PgSubject, what: string, error: unknown): void {
  const message = `${PG_HEADINGS[subject]}, ${what}: ${(error as Error).message.split('\n').slice(0, 6).join(' / ')}`
  errors.push(message)
  log(`ERROR ${message}`)
}

const { measure, remarks } = pgCopies({ server: server.url, modules: MODULES, log, fail })

const rate = (value: number, unit: string): string => `${formatValue(value, unit === 'ms' ? 'ms' : 'jobs/s')} ${unit}`

/** The cap of a drain: pg-boss's poll interval bounds its rate, the others stop after `drainCapMs`. */
const capOf = (subject: PgSubject): number => (subject === 'pg-boss' ? PG_COUNTS.bossCapMs : PG_COUNTS.drainCapMs)

async function drainStage(): Promise<void> {
  for (let rep = 0; rep < reps; rep++) {
    for (const slots of PG_COUNTS.slots) {
      for (const state of DRAIN_STATES) {
        for (const subject of turn(PG_SUBJECTS, rep)) {
          const r = await measure<ProcessResult>(
            subject,
            state,
            'process',
            { count: PG_COUNTS.drain, slots, capMs: capOf(subject) },
            `drain at concurrency ${slots}`,
          )
          if (!r) continue
          results.add(`drain-${slots}-${state}`, subject, { value: r.jobsPerSec, capped: r.capped })
          log(
            `drain concurrency ${slots}, ${state}, ${subject}: ${rate(r.jobsPerSec, 'jobs/s')} (${r.done} in ${r.elapsedMs.toFixed(0)} ms${r.capped ? ', capped' : ''})`,
          )
        }
      }
    }
  }
}

/**
 * The telemetry rows: drizzle-jobs' drain (concurrency 16, analyzed) of jobs that each carry a request's trace
 * context, with OpenTelemetry absent, installed with no SDK, and recording every run, alternating.
 */
async function telemetryStage(): Promise<void> {
  const modes = ['absent', 'api', 'sdk', 'sampled'] as const
  for (let rep = 0; rep < reps; rep++) {
    for (const mode of [...modes.slice(rep % modes.length), ...modes.slice(0, rep % modes.length)]) {
      const args = { count: PG_COUNTS.drain, slots: PG_COUNTS.telemetrySlots, capMs: PG_COUNTS.drainCapMs, telemetry: mode }
      const r = await measure<ProcessResult>('drizzle-jobs', 'analyzed', 'process', args, `telemetry ${mode}`)
      if (!r) continue
      results.add(`telemetry-${mode}`, 'drizzle-jobs', { value: r.jobsPerSec, capped: r.capped })
      log(`telemetry ${mode}: ${rate(r.jobsPerSec, 'jobs/s')}`)
    }
  }
}

async function processesStage(): Promise<void> {
  for (let rep = 0; rep < reps; rep++) {
    for (const state of DRAIN_STATES) {
      for (const subject of turn(PG_SUBJECTS, rep)) {
        const args = { count: PG_COUNTS.drain, slots: PG_COUNTS.procSlots, procs: PG_COUNTS.procs, capMs: capOf(subject) }
        const r = await measure<ProcessesResult>(subject, state, 'processes', args, `${PG_COUNTS.procs} processes`)
        if (!r) continue
        results.add(`processes-${PG_COUNTS.procs}-${state}`, subject, {
          value: r.jobsPerSec,
          capped: r.capped,
          detail: `per process ${r.perProcess.join('/')}`,
        })
        log(
          `${PG_COUNTS.procs} processes, ${state}, ${subject}: ${rate(r.jobsPerSec, 'jobs/s')}, max ${r.maxConcurrent} running, per process ${r.perProcess.join('/')}${r.capped ? ', capped' : ''}`,
        )
      }
    }
  }
}

async function pickupStage(): Promise<void> {
  const modes: Array<{ subject: PgSubject; listen: boolean }> = [
    { subject: 'drizzle-jobs', listen: true },
    { subject: 'drizzle-jobs', listen: false },
    { subject: 'graphile-worker', listen: true },
    { subject: 'pg-boss', listen: false },
    { subject: 'bullmq', listen: true },
  ]
  for (let rep = 0; rep < reps; rep++) {
    for (const { subject, listen } of modes) {
      if (!subjects.includes(subject)) continue
      for (const otherProcess of [false, true]) {
        const boss = subject === 'pg-boss'
        const args = {
          samples: boss ? PG_COUNTS.bossPickupSamples : PG_COUNTS.pickupSamples,
          warmup: boss ? 1 : 5,
          gapMaxMs: boss ? PG_COUNTS.bossPickupGapMs : PG_COUNTS.pickupGapMs,
          otherProcess,
          listen,
        }
        const where = otherProcess ? 'other' : 'same'
        const r = await measure<PickupResult>(subject, 'schema', 'pickup', args, `pickup ${where} ${listen ? 'listen' : 'poll'}`)
        if (!r) continue
        const key = `pickup-${where}-${listen ? 'listen' : 'poll'}`
        results.add(key, subject, { value: r.medianMs })
        results.add(`${key}-p99`, subject, { value: r.p99Ms })
        log(
          `pickup ${where} process, ${listen ? 'LISTEN' : 'polling'}, ${subject}: median ${r.medianMs.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms (${r.samples} samples)`,
        )
      }
    }
  }
}

/** Whether the row `key` is measured for `subject` (it is unless the row says why not). */
function measured(key: string, subject: PgSubject): boolean {
  return !PG_ROWS.find((row) => row.key === key)?.na?.[subject]
}

async function enqueueStage(): Promise<void> {
  for (let rep = 0; rep < reps; rep++) {
    for (const subject of turn(PG_SUBJECTS, rep)) {
      if (!measured('enqueue-app', subject)) continue
      const r = await measure<EnqueueAppResult>(
        subject,
        'schema',
        'enqueue-app',
        { count: PG_COUNTS.appTransactions, warmup: PG_COUNTS.appWarmup, appOnlyFirst: rep % 2 === 0 },
        'enqueue-app',
      )
      if (!r) continue
      results.add('enqueue-app', subject, { value: r.txPerSec })
      results.add('enqueue-app-only', subject, { value: r.appOnlyTxPerSec })
      const addedUs = 1e6 / r.txPerSec - 1e6 / r.appOnlyTxPerSec
      results.add('enqueue-overhead', subject, { value: addedUs })
      log(
        `enqueue-app ${subject}: ${rate(r.txPerSec, 'tx/s')} with the job, ${rate(r.appOnlyTxPerSec, 'tx/s')} without: the job adds ${addedUs.toFixed(1)} µs a transaction`,
      )
    }
    for (const subject of turn(PG_SUBJECTS, rep)) {
      const r = await measure<EnqueueBatchResult>(
        subject,
        'schema',
        'enqueue-batch',
        { count: PG_COUNTS.batchTotal, batch: PG_COUNTS.batchSize, warmupBatches: 5 },
        'enqueue-batch',
      )
      if (!r) continue
      results.add('enqueue-batch', subject, { value: r.jobsPerSec })
      log(`enqueue-batch ${subject}: ${rate(r.jobsPerSec, 'jobs/s')}`)
    }
  }
}

async function scaleStage(): Promise<void> {
  if (!subjects.includes('drizzle-jobs')) return
  for (let rep = 0; rep < reps; rep++) {
    const r = await measure<ScaleResult>(
      'drizzle-jobs',
      'scale',
      'scale',
      { count: PG_COUNTS.scaleDrain, slots: PG_COUNTS.scaleSlots, aheadSamples: PG_COUNTS.aheadSamples },
      'scale',
      1_800_000,
    )
    if (!r) continue
    results.add('scale-drain', 'drizzle-jobs', { value: r.jobsPerSec })
    if (r.aheadMedianMs !== undefined)
      results.add('scale-ahead', 'drizzle-jobs', {
        value: r.aheadMedianMs,
        detail: `ahead = ${r.ahead}, p99 ${r.aheadP99Ms?.toFixed(1)} ms`,
      })
    log(
      `scale: ${rate(r.jobsPerSec, 'jobs/s')} with ${PG_COUNTS.scaleWaiting.toLocaleString('en-US')} waiting; ahead ${r.ahead} in ${r.aheadMedianMs?.toFixed(2)} ms (median)`,
    )
  }
}

try {
  if (stages.has('drain')) await drainStage()
  if (stages.has('processes')) await processesStage()
  if (stages.has('telemetry')) await telemetryStage()
  if (stages.has('pickup')) await pickupStage()
  if (stages.has('enqueue')) await enqueueStage()
  if (stages.has('scale')) await scaleStage()
} finally {
  await dropAll(server.url)
  server.stop()
}

const loadAfter = os.loadavg()
const load = (values: number[]): string => values.map((value) => value.toFixed(2)).join(' / ')
const cpus = os.cpus()
const description = [
  `- \`${command}\`${SMALL ? ' (BENCH_SMALL=1)' : ''}, ${startedAt.toISOString()}, ${((nowMs() - started) / 60_000).toFixed(1)} minutes, ${reps} run(s) of each measurement, medians`,
  `- ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${os.type()} ${os.release()}, Node ${process.version}`,
  `- ${await serverDescription(server.url).catch(() => 'server gone')} — ${server.source}`,
  `- load average (1 / 5 / 15 min) before: ${load(loadBefore)}, after: ${load(loadAfter)} — the machine is shared with other work, so every figure carries its noise`,
].join('\n')
const rendered = renderPgTable(results, PG_ROWS)
const runs = [...results.rows()]
  .map(
    (key) =>
      `| \`${key}\` | ${PG_SUBJECTS.map((subject) =>
        results
          .samples(key, subject)
          .map(
            (sample) =>
              `${formatValue(sample.value, key.includes('pickup') || key.includes('ahead') ? 'ms' : key.includes('overhead') ? 'µs' : 'jobs/s')}${sample.capped ? '†' : ''}${sample.detail ? ` (${sample.detail})` : ''}`,
          )
          .join(', '),
      ).join(' | ')} |`,
  )
  .join('\n')
const output = [
  `# PostgreSQL benchmark: ${PG_SUBJECTS.map((subject) => PG_HEADINGS[subject]).join(', ')}`,
  '',
  description,
  '',
  rendered.table,
  '',
  ...rendered.footnotes.map((text, i) => `[${i + 1}] ${text}`),
  '',
  'Ratios are drizzle-jobs / the peer (for ms and µs rows, below 1× is drizzle-jobs faster).',
  '',
  '### Every run',
  '',
  `| figure | ${PG_SUBJECTS.map((subject) => PG_HEADINGS[subject]).join(' | ')} |`,
  `| --- | ${PG_SUBJECTS.map(() => '---').join(' | ')} |`,
  runs,
  '',
  ...(remarks.length > 0 ? ['### Statistics that appeared during a run', '', ...remarks.map((remark) => `- ${remark}`), ''] : []),
  ...(errors.length > 0 ? ['### Errors', '', ...errors.map((error) => `- ${error}`), ''] : []),
].join('\n')
console.log(`\n${output}`)
if (complete) {
  writeFileSync(resolve(ROOT, 'bench/RESULTS-pg.md'), output)
  log('written to bench/RESULTS-pg.md')
}
if (errors.length > 0) process.exitCode = 1
