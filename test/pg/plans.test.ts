/**
 * The engine's PostgreSQL statements walk the index that serves them, on a table of thousands of jobs: none
 * reads all of jobs_job, and those that answer jobs in an order read them in that order, without sorting.
 * Each statement is planned as the drivers run it, prepared with parameters, both as a custom plan (the
 * first runs of a prepared statement) and as the generic plan PostgreSQL may keep for it afterwards.
 */
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { PgStatement } from '../../src/dialect/pg/statement.js'
import type { PgValue } from '../../src/dialect/pg/driver.js'
import { ADMIN_SQL } from '../../src/dialect/pg/admin.js'
import { READ_SQL } from '../../src/dialect/pg/read.js'
import { endsAsJson, SQL } from '../../src/dialect/pg/statements.js'
import type { JobEnd, RunEndParams } from '../../src/dialect/rows.js'
import { freshPgDb, type TestPgDb } from '../helpers/pg.js'
import { NOW, newJob } from './jobs.js'

let database: TestPgDb
beforeAll(async () => {
  database = await freshPgDb()
  const { pool } = database
  // 100,000 jobs in two queues, in every state, most of them ended as in a queue that keeps them a while;
  // the running ones run by four workers, one of which has no row, and keep steps.
  await pool.query(
    `insert into jobs_job (queue, id, value, state, priority, run_at, finished_at, grp)
    select case when g % 5 = 0 then 'q2' else 'q1' end, 'job-' || g, '{}', s.state, g % 3,
      to_timestamp(($1::float8 - 10000000 + g * 100) / 1000),
      case when s.state in ('done', 'failed', 'canceled') then to_timestamp(($1::float8 - g) / 1000) end, 'group-' || (g % 20)
    from generate_series(1, 100000) g,
      lateral (select case when g % 100 < 10 then 'waiting' when g % 100 < 15 then 'scheduled' when g % 100 < 16 then 'running'
                           when g % 100 < 86 then 'done' when g % 100 < 96 then 'failed' else 'canceled' end as state) s`,
    [NOW],
  )
  await pool.query(`update jobs_job set owner = 'owner-' || (seq % 4), attempts = 1 where state = 'running'`)
  await pool.query(`insert into jobs_lease (owner, expires_at) values ('owner-0', now()), ('owner-1', now()), ('owner-2', now())`)
  await pool.query(`insert into jobs_step (job, name, answer) select seq, 'step', '1' from jobs_job where state = 'running'`)
  await pool.query(`insert into jobs_queue (name, concurrency) values ('q1', 10), ('q2', null)`)
  await pool.query(`analyze`)
})
afterAll(async () => {
  await database?.drop()
})

/** A statement and the parameters it is planned with. */
// biome-ignore lint/suspicious/noExplicitAny: statements of every parameter shape
type Planned = [PgStatement<any, unknown>, Record<string, PgValue>]

const window = { queue: 'q1', now: NOW, limit: 16 }
const end = { state: 'done', runAt: null, finishedAt: NOW, result: '{}', error: null, errorStack: null, refund: 0, abandoned: 0 }
/** One end of a run, as a flush writes it. */
const ENDS = endsAsJson([{ transition: end as RunEndParams, seq: 4, attempt: 1 }] satisfies JobEnd[])
const claim = {
  queue: 'q1',
  owner: 'o',
  now: NOW,
  limit: 16,
  window: 16,
  notify: 1,
  total: 10,
  passOver: '[4, 6]',
  skipAbandoned: 1,
  only: null,
  perGroup: null,
  groupRoom: null,
  otherRoom: null,
  setWaiters: 1,
  waiters: '{"o":1}',
  leaseUntil: NOW,
  channel: null,
}
const seqs = JSON.stringify([2, 4, 6, 8, 10, 12, 14, 16])
const page = { queue: 'q1', state: 'waiting', grp: null, limit: 51, k1: 1, k2: NOW - 5_000_000, k3: 50_000 }

/**
 * Statements that take a page of jobs in an order (claims, listings): read in index order, never sorted in
 * full. An incremental sort, which sorts only jobs that tie on the index's last column, is fine: the scheduled
 * and ended indexes end with run_at and finished_at, without seq.
 */
const ORDERED: Record<string, Planned> = {
  flush: [
    SQL.flush,
    {
      queue: 'q2',
      owner: 'o',
      now: NOW,
      ends: ENDS,
      limit: 16,
      passOver: '[4, 6]',
      leaseUntil: NOW,
      host: null,
      pid: null,
      channel: null,
    },
  ],
  flushClaim: [SQL.flushClaim, claim],
  flushClaimGrouped: [SQL.flushClaim, { ...claim, window: 80, perGroup: 1, groupRoom: '{"group-1":0,"group-2":1}', otherRoom: 2 }],
  listWaiting: [ADMIN_SQL.listWaiting, page],
  listScheduled: [ADMIN_SQL.listScheduled, { ...page, state: 'scheduled', k1: NOW - 5_000_000, k2: 50_000 }],
  listEnded: [ADMIN_SQL.listEnded, { ...page, state: 'done', k1: Infinity, k2: '9223372036854775807' }],
  listNewestOfQueue: [ADMIN_SQL.listNewest, { ...page, state: null, k1: 50_000 }],
  listNewest: [ADMIN_SQL.listNewest, { ...page, queue: null, state: null, k1: 50_000 }],
}

/** Statements that touch a few jobs: looked up by key or index, never a walk of the table. */
const LOOK_UPS: Record<string, Planned> = {
  addJob: [SQL.addJob, { ...newJob('q1', 'new'), maxWaiting: 100 }],
  // The holder of a unique key through jobs_job_unique, of a debounce id through jobs_job_debounce.
  addUniqueJob: [
    SQL.addUniqueJob,
    { ...newJob('q1', 'new'), maxWaiting: 100, uniqueKey: 'k', uniqueStates: ',waiting,scheduled,running,done,' },
  ],
  addDebouncedJob: [SQL.addDebouncedJob, { ...newJob('q1', 'new'), maxWaiting: 100, debounceKey: 'd' }],
  jobHolder: [SQL.jobHolder, { queue: 'q1', id: 'job-2', uniqueKey: 'k' }],
  // Running jobs are found through jobs_job_running, few (at most the queue's concurrency), and sorted.
  listRunning: [ADMIN_SQL.listRunning, { ...page, state: 'running', k1: '9223372036854775807' }],
  jobExists: [SQL.jobExists, { queue: 'q1', id: 'job-2' }],
  // A job that must run alone is claimed by its key.
  flushClaimOnly: [SQL.flushClaim, { ...claim, limit: 1, window: 1, only: 2 }],
  queueGetClaimable: [SQL.queueGetClaimable, { queue: 'q1' }],
  jobEndMany: [
    SQL.jobEndMany,
    {
      owner: 'owner-0',
      expiredBy: NOW,
      ends: endsAsJson([
        { transition: end as RunEndParams, seq: 4, attempt: 1 },
        { transition: { ...end, state: 'scheduled', runAt: NOW + 1_000, finishedAt: null } as RunEndParams, seq: 12, attempt: 1 },
      ] satisfies JobEnd[]),
    },
  ],
  endUnleased: [SQL.endUnleased, { ...end, seq: 4 }],
  deleteSteps: [SQL.deleteSteps, { seqs }],
  writeStep: [SQL.writeStep, { seq: 4, owner: 'owner-0', attempt: 1, name: 'step', answer: '1' }],
  // The counts of runs under way, for limits, and the runs of a worker: through jobs_job_running.
  claimPolicy: [SQL.claimPolicy, { queue: 'q1', now: NOW, owner: 'owner-0', ends: ENDS, notify: 1 }],
  workerRenew: [SQL.workerRenew, { owner: 'owner-0', expiresAt: NOW, channel: null }],
  heldRuns: [SQL.heldRuns, { owner: 'owner-0' }],
  workerExpired: [SQL.workerExpired, { now: NOW }],
  workerDeleteExpired: [SQL.workerDeleteExpired, { now: NOW }],
  leaseRenewIfHeld: [SQL.leaseRenewIfHeld, { seq: 4, owner: 'owner-0', attempt: 1, expiresAt: NOW }],
  runningOwners: [SQL.runningOwners, { queue: 'q1' }],
  abandonedLeases: [SQL.abandonedLeases, { queue: 'q1', self: 'owner-0', now: NOW, deadOwners: '["owner-1"]', limit: 100 }],
  unleasedCount: [SQL.unleasedCount, { queue: 'q1' }],
  unleasedRuns: [SQL.unleasedRuns, { queue: 'q1', limit: 100 }],
  jobLease: [ADMIN_SQL.jobLease, { seq: 4 }],
  jobState: [SQL.jobState, { seq: 4 }],
  firstPrunable: [SQL.firstPrunable, { queue: 'q1', state: 'done', before: NOW }],
  pruneEnded: [SQL.pruneEnded, { queue: 'q1', state: 'done', before: NOW, limit: 500 }],
  jobById: [READ_SQL.jobById, { queue: 'q1', id: 'job-2' }],
  jobsBySeq: [READ_SQL.jobsBySeq, { seqs }],
  placesInLine: [READ_SQL.placesInLine, { ...window, limit: 10_000, seqs }],
  countAhead: [READ_SQL.countAhead, { ...window, priority: 1, runAt: NOW - 5_000_000, seq: 50_000, limit: 10_000 }],
  findJob: [ADMIN_SQL.findJob, { queue: 'q1', id: 'job-2' }],
  jobRecord: [ADMIN_SQL.jobRecord, { queue: 'q1', id: 'job-2' }],
  cancelJob: [ADMIN_SQL.cancelJob, { seq: 2, now: NOW }],
  retryJob: [ADMIN_SQL.retryJob, { seq: 2, now: NOW }],
  endedBetween: [ADMIN_SQL.endedBetween, { queue: 'q1', state: 'done', since: NOW - 10_000, until: NOW }],
  earliestRunnable: [ADMIN_SQL.earliestRunnable, { queue: 'q1' }],
}

let prepared = 0

function literal(value: PgValue): string {
  if (value === null) return 'null'
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : `'${value}'`
  if (typeof value === 'boolean') return String(value)
  return pg.escapeLiteral(value)
}

/** A node of a plan, as EXPLAIN (FORMAT JSON) gives it. */
interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Index Name'?: string
  Plans?: PlanNode[]
}

/** The plan of `statement` with `params`, prepared as a driver prepares it, custom or generic. */
async function planOf([statement, params]: Planned, mode: 'force_custom_plan' | 'force_generic_plan'): Promise<PlanNode> {
  const client = await database.pool.connect()
  try {
    const name = `planned_${++prepared}`
    await client.query(`set plan_cache_mode = ${mode}`)
    await client.query(`prepare ${name} as ${statement.text}`)
    // EXECUTE takes its arguments as literals: a utility statement has no bound parameters.
    const values = statement.params.map((param) => literal(params[param] ?? null))
    const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
      `explain (format json, costs off) execute ${name}${values.length > 0 ? `(${values.join(', ')})` : ''}`,
    )
    await client.query(`deallocate ${name}`)
    await client.query(`reset plan_cache_mode`)
    return rows[0]!['QUERY PLAN'][0].Plan
  } finally {
    client.release()
  }
}

/** Every node of a plan, its subplans included. */
function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)]
}

const readsJobs = (node: PlanNode) => nodes(node).some((inner) => inner['Relation Name'] === 'jobs_job')

/** The plan's scans of all of jobs_job. */
const jobsTableScans = (plan: PlanNode) =>
  nodes(plan).filter((node) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] === 'jobs_job')

/** The plan's full sorts of jobs read from jobs_job (an incremental sort is another node type). */
const jobsSorts = (plan: PlanNode) => nodes(plan).filter((node) => node['Node Type'] === 'Sort' && readsJobs(node))

/** Statements that read a queue's running jobs: through jobs_job_running, whatever else the queue holds. */
const RUNNING: Record<string, Planned> = {
  queueGetClaimable: LOOK_UPS.queueGetClaimable!,
  claimPolicy: LOOK_UPS.claimPolicy!,
  flushClaim: ORDERED.flushClaim!,
  flushClaimGrouped: ORDERED.flushClaimGrouped!,
  workerRenew: LOOK_UPS.workerRenew!,
  heldRuns: LOOK_UPS.heldRuns!,
  workerExpired: LOOK_UPS.workerExpired!,
  workerDeleteExpired: LOOK_UPS.workerDeleteExpired!,
  runningOwners: LOOK_UPS.runningOwners!,
  abandonedLeases: LOOK_UPS.abandonedLeases!,
  unleasedCount: LOOK_UPS.unleasedCount!,
  unleasedRuns: LOOK_UPS.unleasedRuns!,
  listRunning: LOOK_UPS.listRunning!,
}

/** The indexes a plan reads. */
const indexesRead = (plan: PlanNode) => new Set(nodes(plan).flatMap((node) => (node['Index Name'] ? [node['Index Name']] : [])))

describe.each(['force_custom_plan', 'force_generic_plan'] as const)('%s', (mode) => {
  test.each(Object.entries(RUNNING))('%s finds the running jobs through jobs_job_running', async (_name, planned) => {
    const plan = await planOf(planned, mode)
    expect(indexesRead(plan), JSON.stringify(plan)).toContain('jobs_job_running')
    expect(jobsTableScans(plan), JSON.stringify(plan)).toEqual([])
  })

  test.each(Object.entries(ORDERED))('%s walks its index in order, without a sort', async (_name, planned) => {
    const plan = await planOf(planned, mode)
    expect(jobsTableScans(plan), JSON.stringify(plan)).toEqual([])
    expect(jobsSorts(plan), JSON.stringify(plan)).toEqual([])
  })

  test.each(Object.entries(LOOK_UPS))('%s reads no more of jobs_job than it needs', async (_name, planned) => {
    const plan = await planOf(planned, mode)
    expect(jobsTableScans(plan), JSON.stringify(plan)).toEqual([])
  })
})
