/**
 * What a job's two writes cost the PostgreSQL server, and what each part of the table adds to them: in a fresh
 * database on the benchmark's server, migrated and with the counting triggers installed as a worker's start
 * installs them, a queue of 40,000 waiting jobs is analyzed, then claimed and ended 500 at a time, each statement
 * under `EXPLAIN (ANALYZE, WAL)`, under each variant of the table:
 *
 * - as the migrations make it;
 * - without the counting trigger on updates (jobs_job_counts_update_v1);
 * - without the index of running jobs (jobs_job_running), or of ids (jobs_job_queue_id), or both and the trigger;
 * - with each end deleting its row instead of writing it done (as a queue that keeps no ended job would).
 *
 * The claim writes what the worker's claim writes (each row locked `for update skip locked` in claim order, then
 * `state`, `attempts` and `owner`); the end writes what a run's end writes (`state`, `finished_at`, `result`,
 * `error`, `error_stack`, `attempts`, `abandoned`, `owner`). Prints, per variant, the medians over 8 batches in each of 2
 * passes (after 2 batches not measured) of the server's time and WAL records and bytes per job. Each variant's change
 * is made and undone between measurements, in the database this run makes and drops.
 *
 *   npx tsx bench/pg/job-writes.ts
 */
import pg from 'pg'
import { runTask } from '../lib/child.js'
import { median } from '../lib/stats.js'
import { benchServer, createDatabase, databaseUrl, dropDatabase } from './lib.js'

const QUEUED = 40_000
const BATCH = 500
/** Batches measured per variant and pass, after WARM ones that are not. */
const BATCHES = 8
const WARM = 2
/** Passes over every variant, each variant's measurements pooled across them. */
const PASSES = 2

const CLAIM = `update jobs_job j set state = 'running', attempts = j.attempts + 1, owner = 'bench-worker'
  where j.seq in (select seq from jobs_job where queue = 'writes' and state = 'waiting'
    order by priority, run_at, seq limit ${BATCH} for update skip locked)`
/** The ends find their jobs by seq, as a worker's ends do (`seqs` is the claimed jobs' seqs, read beforehand). */
const END = (seqs: string) => `update jobs_job set state = 'done', finished_at = now(), result = '{"ok":true}', error = null,
  error_stack = null, attempts = attempts, abandoned = false, owner = null
  where seq = any('${seqs}'::bigint[]) and owner = 'bench-worker' and state = 'running'`
const END_BY_DELETE = (seqs: string) =>
  `delete from jobs_job where seq = any('${seqs}'::bigint[]) and owner = 'bench-worker' and state = 'running'`
const CLAIMED = `select coalesce(array_agg(seq), '{}')::text as seqs from jobs_job where queue = 'writes' and state = 'running' and owner = 'bench-worker'`

const RUNNING_INDEX = `create index jobs_job_running on jobs_job (queue, owner) where state = 'running'`
const ID_INDEX = 'create unique index jobs_job_queue_id on jobs_job (queue, id)'
const TRIGGER_OFF = 'alter table jobs_job disable trigger jobs_job_counts_update_v1'
const TRIGGER_ON = 'alter table jobs_job enable trigger jobs_job_counts_update_v1'

interface Variant {
  label: string
  change?: string
  undo?: string
  end?: (seqs: string) => string
}

const VARIANTS: Variant[] = [
  { label: 'as migrated' },
  { label: 'without the counting trigger on updates', change: TRIGGER_OFF, undo: TRIGGER_ON },
  { label: 'without jobs_job_running', change: 'drop index jobs_job_running', undo: RUNNING_INDEX },
  { label: 'without jobs_job_queue_id', change: 'drop index jobs_job_queue_id', undo: ID_INDEX },
  {
    label: 'without both indexes and the trigger',
    change: `drop index jobs_job_running; drop index jobs_job_queue_id; ${TRIGGER_OFF}`,
    undo: `${RUNNING_INDEX}; ${ID_INDEX}; ${TRIGGER_ON}`,
  },
  { label: 'as migrated, each end deleting its row', end: END_BY_DELETE },
]

interface Cost {
  ms: number
  records: number
  bytes: number
}

async function explained(client: pg.Client, sql: string): Promise<Cost> {
  const { rows } = await client.query<{ 'QUERY PLAN': string }>(`explain (analyze, wal, timing off, summary on) ${sql}`)
  const lines = rows.map((row) => row['QUERY PLAN'])
  const time = lines.find((line) => line.startsWith('Execution Time'))
  // The first WAL line is the top node's: the statement's whole WAL, triggers' writes aside.
  const wal = lines.find((line) => /WAL:/.test(line)) ?? ''
  return {
    ms: Number(time?.match(/[\d.]+/)?.[0] ?? Number.NaN),
    records: Number(wal.match(/records=(\d+)/)?.[1] ?? 0),
    bytes: Number(wal.match(/bytes=(\d+)/)?.[1] ?? 0),
  }
}

const perJob = (costs: Cost[], pick: (cost: Cost) => number, scale = 1) => (median(costs.map(pick)) * scale) / BATCH

const server = await benchServer()
const name = await createDatabase(server.url, 'writes')
const url = databaseUrl(server.url, name)
try {
  // Migrates, and installs the counting triggers as a worker's first write does.
  await runTask(new URL('../subjects/drizzle-jobs-pg.ts', import.meta.url).pathname, 'setup', { url })
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  console.log(
    `claim and end of ${BATCH} jobs at a time, on a queue of ${QUEUED.toLocaleString('en')} analyzed; medians of ${BATCHES * PASSES} batches, per job`,
  )
  console.log('| table | claim µs | claim WAL records | claim WAL bytes | end µs | end WAL records | end WAL bytes |')
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |')
  const claims = new Map<Variant, Cost[]>(VARIANTS.map((variant) => [variant, []]))
  const ends = new Map<Variant, Cost[]>(VARIANTS.map((variant) => [variant, []]))
  for (let pass = 0; pass < PASSES; pass++) {
    for (const variant of VARIANTS) {
      await client.query(`delete from jobs_job where queue = 'writes'`)
      await client.query(`insert into jobs_job (queue, id, value, state, priority, attempts, max_attempts, run_at, created_at)
        select 'writes', gen_random_uuid()::text, '{"n":1}', 'waiting', 0, 0, 3, now(), now() from generate_series(1, ${QUEUED})`)
      await client.query('vacuum analyze jobs_job')
      if (variant.change) await client.query(variant.change)
      try {
        for (let batch = 0; batch < WARM + BATCHES; batch++) {
          const claim = await explained(client, CLAIM)
          const { rows } = await client.query<{ seqs: string }>(CLAIMED)
          const end = await explained(client, (variant.end ?? END)(rows[0]!.seqs))
          if (batch < WARM) continue
          claims.get(variant)!.push(claim)
          ends.get(variant)!.push(end)
        }
      } finally {
        if (variant.undo) await client.query(variant.undo)
      }
    }
  }
  for (const variant of VARIANTS) {
    const cells = [claims.get(variant)!, ends.get(variant)!].flatMap((costs) => [
      perJob(costs, (cost) => cost.ms, 1000).toFixed(1),
      perJob(costs, (cost) => cost.records).toFixed(1),
      perJob(costs, (cost) => cost.bytes).toFixed(0),
    ])
    console.log(`| ${variant.label} | ${cells.join(' | ')} |`)
  }
  await client.end()
} finally {
  await dropDatabase(server.url, name)
  server.stop()
}
