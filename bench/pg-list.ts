/**
 * The operating reads on PostgreSQL at 1,000,000 jobs: queueCounts, and one page of listJobs in each listing
 * order (waiting, scheduled, running, ended, newest), with and without a group filter, first pages and a page
 * deep in the listing.
 *
 *   npx tsx bench/pg-list.ts [JOBS]
 *
 * Against DATABASE_URL's server (default postgres://postgres@127.0.0.1:5432/postgres), in a database of its
 * own, migrated as a user would, filled with one `insert … select generate_series`, analyzed, and dropped at
 * the end. Prints the median and p95 of 200 calls of each (after 20 to warm up), and with --explain the plan
 * of each listing's statement as the driver runs it.
 */
import { defineQueue, enqueue, listJobs, queueCounts, type ListJobsOptions } from '../src/index.js'
import { withPgDatabase } from './lib/pg-database.js'

const jobs = Number(process.argv.find((arg) => /^\d+$/.test(arg)) ?? 1_000_000)
const explain = process.argv.includes('--explain')
const CALLS = 200
const WARM_UP = 20
/** Groups, spread over the jobs by a hash of their number (so over every state and priority alike): a group holds one job in this many. */
const GROUPS = 100
/** Calls of a listing whose group has no job in it, which walks the whole listing: its worst case. */
const WORST_CASE_CALLS = 5

const sorted = (values: number[]) => [...values].sort((a, b) => a - b)
const median = (values: number[]) => sorted(values)[Math.floor(values.length / 2)]!
const p95 = (values: number[]) => sorted(values)[Math.floor(values.length * 0.95)]!

await withPgDatabase(4, async (pool, db) => {
  // The first add installs the counting triggers, as an app's first enqueue does: the fill below is counted.
  await enqueue(db, defineQueue('install'), null)
  let started = performance.now()
  // Nine jobs in ten in queue 'big', the rest in 'other'; in 'big', by g % 20: 8 waiting, 2 scheduled, 7 done,
  // 2 failed, 1 canceled; priorities 0 to 3; due times spread over the last day, scheduled ones over the next.
  await pool.query(
    `insert into jobs_job (queue, id, grp, value, state, priority, attempts, run_at, created_at, finished_at, error)
    select case when g % 10 = 0 then 'other' else 'big' end, 'job-' || g, 'chat:' || abs(hashint4(g) % ${GROUPS}), jsonb_build_object('n', g), s.state, g % 4,
      case when s.state in ('waiting', 'scheduled') then 0 else 1 end,
      case when s.state = 'scheduled' then now() + (g % 86400) * interval '1 second' else now() - (g % 86400) * interval '1 second' end,
      now() - interval '2 days' + g * interval '1 ms',
      case when s.state in ('done', 'failed', 'canceled') then now() - (g % 86400) * interval '1 second' end,
      case when s.state = 'failed' then 'the model is down' end
    from generate_series(1, $1::int) g,
      lateral (select case when g % 20 < 8 then 'waiting' when g % 20 < 10 then 'scheduled' when g % 20 < 17 then 'done'
                           when g % 20 < 19 then 'failed' else 'canceled' end as state) s`,
    [jobs],
  )
  // 16 runs under way for one worker, with its live row, as a worker with 16 slots holds them.
  await pool.query(`update jobs_job set state = 'running', attempts = 1, owner = 'bench'
    where seq in (select seq from jobs_job where queue = 'big' and state = 'waiting' order by seq limit 16)`)
  await pool.query(`insert into jobs_lease (owner, expires_at) values ('bench', now() + interval '30 seconds')`)
  const filled = performance.now() - started
  started = performance.now()
  await pool.query('analyze')
  console.log(
    `filled ${jobs.toLocaleString('en')} jobs in ${(filled / 1000).toFixed(1)} s, analyzed in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  )

  /** A page deep in a listing: the cursor after `pages` pages of 50. */
  const deep = async (options: ListJobsOptions, pages: number): Promise<ListJobsOptions> => {
    let cursor: string | undefined
    for (let i = 0; i < pages; i++) cursor = (await listJobs(db, { ...options, limit: 1_000, cursor })).next ?? undefined
    return { ...options, ...(cursor ? { cursor } : {}) }
  }

  const group = 'chat:7'
  const calls: [string, () => Promise<unknown>, number?][] = [
    ["queueCounts(db, 'big')", () => queueCounts(db, 'big')],
    ['queueCounts(db), every queue', () => queueCounts(db)],
  ]
  const listings: [string, ListJobsOptions][] = [
    ['waiting', { queue: 'big', state: 'waiting' }],
    ['waiting, page 200', await deep({ queue: 'big', state: 'waiting' }, 200)],
    ['scheduled', { queue: 'big', state: 'scheduled' }],
    ['running', { queue: 'big', state: 'running' }],
    ['done (ended)', { queue: 'big', state: 'done' }],
    ['failed (ended)', { queue: 'big', state: 'failed' }],
    ['failed, page 50', await deep({ queue: 'big', state: 'failed' }, 50)],
    ['newest of a queue', { queue: 'big' }],
    ['newest of every queue', {}],
    ['newest, page 200', await deep({ queue: 'big' }, 200)],
    [`waiting, group ${group}`, { queue: 'big', state: 'waiting', group }],
    [`scheduled, group ${group}`, { queue: 'big', state: 'scheduled', group }],
    [`done, group ${group}`, { queue: 'big', state: 'done', group }],
    [`newest, group ${group}`, { queue: 'big', group }],
    ['by id', { id: 'job-123457' }],
  ]
  for (const [label, options] of listings) calls.push([`listJobs ${label}`, () => listJobs(db, { limit: 50, ...options })])
  // A group with no job walks the listing's whole index: what a group filter costs at worst.
  calls.push([
    `listJobs waiting, a group with no job (worst case, ${WORST_CASE_CALLS} calls)`,
    () => listJobs(db, { queue: 'big', state: 'waiting', group: 'nobody', limit: 50 }),
    WORST_CASE_CALLS,
  ])

  console.log(`\nmedian and p95 of ${CALLS} calls each (after ${WARM_UP}), ${jobs.toLocaleString('en')} jobs, pages of 50`)
  const width = Math.max(...calls.map(([label]) => label.length))
  console.log(`${'call'.padEnd(width)}  median ms  p95 ms`)
  for (const [label, call, count = CALLS] of calls) {
    for (let i = 0; i < Math.min(WARM_UP, count); i++) await call()
    const samples: number[] = []
    for (let i = 0; i < count; i++) {
      const at = performance.now()
      await call()
      samples.push(performance.now() - at)
    }
    console.log(`${label.padEnd(width)}  ${median(samples).toFixed(2).padStart(9)}  ${p95(samples).toFixed(2).padStart(6)}`)
  }

  if (explain) {
    const { ADMIN_SQL } = await import('../src/dialect/pg/admin.js')
    const client = await pool.connect()
    try {
      const page = { queue: 'big', grp: group, limit: 51 }
      const plans: [string, { text: string; params: readonly string[] }, Record<string, unknown>][] = [
        [
          'listWaiting, group',
          ADMIN_SQL.listWaiting,
          { ...page, state: 'waiting', k1: '-9223372036854775808', k2: -Infinity, k3: '-9223372036854775808' },
        ],
        [
          'listScheduled, group',
          ADMIN_SQL.listScheduled,
          { ...page, state: 'scheduled', k1: -Infinity, k2: '-9223372036854775808', k3: null },
        ],
        ['listEnded, group', ADMIN_SQL.listEnded, { ...page, state: 'done', k1: Infinity, k2: '9223372036854775807', k3: null }],
        ['listNewest, group', ADMIN_SQL.listNewest, { ...page, state: null, k1: '9223372036854775807', k2: null, k3: null }],
      ]
      for (const [label, statement, params] of plans) {
        const { rows } = await client.query(
          `explain (analyze, buffers) ${statement.text}`,
          statement.params.map((key) => params[key]),
        )
        console.log(`\n${label}\n${rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n')}`)
      }
    } finally {
      client.release()
    }
  }
})
