/**
 * Faults on a real PostgreSQL server, each done for real to a worker running jobs in this process: its
 * connections ended by pg_terminate_backend, the server restarted under it (on a private cluster of its
 * own, so that the other files on the run's server see nothing of it), its claims of a limited queue
 * waiting on the queue's row, locked by the test, past its pool's statement_timeout, and its listening
 * connection ended just before its LISTEN is sent.
 *
 * The worker must not crash (no uncaught error, no unhandled rejection), must hand nothing to `onError`
 * (each fault is one the engine retries: a lost connection, a server that is restarting, a statement
 * canceled by its timeout), must give back every client it took from its pool, and must end every job
 * done, each run recorded by its handler in an app table matching the attempts the job counted.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { drizzle } from 'drizzle-orm/node-postgres'
import pg from 'pg'
import { afterEach, beforeEach, expect, test } from 'vitest'
import { defineQueue, enqueueMany, work, type Worker } from '../../src/index.js'
import { isPgBusy } from '../../src/dialect/pg/connection.js'
import { startPrivateCluster } from '../helpers/pg-global.js'
import { eachFreshPgDb, freshPgDb, type TestPgDb } from '../helpers/pg.js'
import { waitFor } from '../helpers/wait.js'

const t = eachFreshPgDb()

/** The worker's connections carry this name, so that the test ends them and never its own. */
const WORKER_APP = 'drizzle-jobs-faults-worker'

/** What a test saw go wrong in this process: errors nobody caught, promises nobody handled. */
const uncaught: unknown[] = []
const onUncaught = (error: unknown) => void uncaught.push(error)
const workers: Worker[] = []
const pools: pg.Pool[] = []

beforeEach(() => {
  uncaught.length = 0
  process.on('uncaughtException', onUncaught)
  process.on('unhandledRejection', onUncaught)
})

afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
  await Promise.all(pools.splice(0).map((pool) => pool.end()))
  process.off('uncaughtException', onUncaught)
  process.off('unhandledRejection', onUncaught)
})

/**
 * The worker's own pool on `url`, as an app makes it (idle clients' errors listened to), with its connections
 * named WORKER_APP; `refused()` counts the connections it failed to make (the server away).
 */
function workerPool(url: string, config: pg.PoolConfig = {}) {
  const pool = new pg.Pool({ connectionString: url, application_name: WORKER_APP, max: 10, ...config })
  pool.on('error', () => {})
  pools.push(pool)
  let refused = 0
  const connect = pool.connect.bind(pool) as (callback?: (error: Error | undefined, ...rest: unknown[]) => void) => unknown
  // pg-pool's own query() connects through this property too, with a callback.
  Reflect.set(pool, 'connect', (callback?: (error: Error | undefined, ...rest: unknown[]) => void) => {
    if (callback) {
      return connect((error, ...rest) => {
        if (error) refused++
        callback(error, ...rest)
      })
    }
    const made = connect() as Promise<pg.PoolClient>
    made.catch(() => refused++)
    return made
  })
  return { pool, db: drizzle(pool), refused: () => refused }
}

/**
 * Hands every query a client of `pool` is asked to `around`, with the client, the query's text and how to send
 * it: for a test that acts just before a statement is sent, or looks at how it ended.
 */
function aroundQueries(pool: pg.Pool, around: (client: pg.PoolClient, text: string | undefined, send: () => unknown) => unknown): void {
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown
    Reflect.set(client, 'query', (...args: unknown[]) => {
      const first: unknown = args[0]
      const text = typeof first === 'string' ? first : (first as { text?: string } | undefined)?.text
      return around(client as pg.PoolClient, text, () => query(...args))
    })
  })
}

/** Whether `probe` holds at some look within `ms`: for a fault that must not happen, watched for a bounded time. */
async function seenWithin(probe: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = performance.now() + ms
  while (performance.now() < deadline) {
    if (await probe()) return true
    await sleep(20)
  }
  return false
}

const RUNS_TABLE = 'create table fault_run (job text not null, attempt integer not null, primary key (job, attempt))'

/**
 * A handler's record of its run, in the app's table: tried again while the connection is lost or the server
 * restarts (up to 30 s), so that every run is recorded whatever the fault.
 */
async function recordRun(pool: pg.Pool, job: string, attempt: number): Promise<void> {
  const deadline = performance.now() + 30_000
  for (;;) {
    try {
      await pool.query('insert into fault_run (job, attempt) values ($1, $2) on conflict do nothing', [job, attempt])
      return
    } catch (error) {
      if (!isPgBusy(error) || performance.now() > deadline) throw error
      await sleep(20)
    }
  }
}

/** A queue, a handler that records its run and takes ~100 ms, and a worker on it that keeps what reaches onError. */
function startWorker(db: ReturnType<typeof drizzle>, pool: pg.Pool, name: string, options: { concurrency?: number } = {}) {
  const queue = defineQueue<{ n: number }>(name, { attempts: 5, backoff: { initial: 10, max: 50 }, concurrency: options.concurrency })
  const started = new Set<string>()
  const errors: unknown[] = []
  const worker = work(
    db,
    queue,
    async (_value, run) => {
      await recordRun(pool, run.id, run.attempt)
      started.add(run.id)
      await sleep(100)
    },
    { slots: 5, onError: (error) => void errors.push(error) },
  )
  workers.push(worker)
  return { queue, worker, started, errors }
}

/** Ends every server connection of the worker's pool on `database`; answers how many it ended. */
async function terminateWorkerConnections(database: TestPgDb): Promise<number> {
  const { rows } = await database.pool.query<{ ended: boolean }>(
    `select pg_terminate_backend(pid) as ended from pg_stat_activity
      where datname = current_database() and application_name = $1 and pid <> pg_backend_pid()`,
    [WORKER_APP],
  )
  return rows.filter((row) => row.ended).length
}

/** Every job of `queue` with its state and attempts, and the runs its handler recorded. */
async function outcomes(database: TestPgDb, queue: string) {
  const { rows } = await database.pool.query<{ id: string; state: string; attempts: number; runs: number[] }>(
    `select j.id, j.state, j.attempts, coalesce(array_agg(r.attempt order by r.attempt) filter (where r.attempt is not null), '{}') as runs
       from jobs_job j left join fault_run r on r.job = j.id
      where j.queue = $1 group by j.id, j.state, j.attempts order by j.id`,
    [queue],
  )
  return rows
}

async function allDone(database: TestPgDb, queue: string, jobs: number, timeoutMs: number): Promise<void> {
  await waitFor(
    async () => {
      const { rows } = await database.pool.query<{ n: number }>(
        `select count(*)::int as n from jobs_job where queue = $1 and state = 'done'`,
        [queue],
      )
      return rows[0]!.n === jobs
    },
    `all ${jobs} jobs to be done`,
    timeoutMs,
  )
}

/**
 * The end of every fault test: every job done, each run recorded once per attempt counted (1..attempts),
 * no job left naming a worker, nothing uncaught or surfaced, and every client of the worker's pool given back once the
 * worker stopped.
 */
async function expectEveryJobDoneOnce(
  database: TestPgDb,
  queue: string,
  jobs: number,
  worker: Worker,
  pool: pg.Pool,
  errors: unknown[],
): Promise<void> {
  await worker.stop()
  const rows = await outcomes(database, queue)
  expect(rows).toHaveLength(jobs)
  expect(rows.filter((row) => row.state !== 'done')).toEqual([])
  // A job runs again only when its end could not be written before its lease ran out (30 s): no fault here lasts that long.
  expect(rows.filter((row) => row.attempts !== 1 || row.runs.join() !== '1')).toEqual([])
  expect(Number((await database.pool.query('select count(*) as n from jobs_job where owner is not null')).rows[0].n)).toBe(0)
  expect(errors).toEqual([])
  expect(uncaught).toEqual([])
  await waitFor(
    () => pool.totalCount === pool.idleCount,
    `the worker's pool to hold no client out (${pool.totalCount - pool.idleCount} out)`,
    5_000,
  )
}

test('JOB-05 [postgres] a worker whose every connection is ended by pg_terminate_backend, three times while it runs jobs, does not crash, surfaces nothing and ends every job done once', async () => {
  await t.pool.query(RUNS_TABLE)
  const { pool, db } = workerPool(t.url)
  const { queue, worker, started, errors } = startWorker(db, pool, 'terminated')
  await enqueueMany(
    t.db,
    queue,
    Array.from({ length: 50 }, (_, n) => ({ value: { n }, id: `job-${String(n).padStart(2, '0')}` })),
  )
  for (const after of [5, 20, 35]) {
    await waitFor(() => started.size >= after, `${after} jobs to start`, 10_000)
    expect(await terminateWorkerConnections(t)).toBeGreaterThan(0)
  }
  await allDone(t, queue.name, 50, 20_000)
  await expectEveryJobDoneOnce(t, queue.name, 50, worker, pool, errors)
})

test('JOB-05 [postgres] a server restarted under a worker (pg_ctl restart -m fast) with jobs in flight, then stopped while it idles and another worker starts: both carry on, and every job ends done once', async () => {
  const cluster = await startPrivateCluster()
  if (!('url' in cluster)) throw new Error(cluster.unavailable)
  let database: TestPgDb | undefined
  try {
    database = await freshPgDb({ server: cluster.url })
    await database.pool.query(RUNS_TABLE)
    const jobs = (count: number) => Array.from({ length: count }, (_, n) => ({ value: { n }, id: `job-${String(n).padStart(2, '0')}` }))
    const first = workerPool(database.url)
    const busy = startWorker(first.db, first.pool, 'restarted')
    await enqueueMany(database.db, busy.queue, jobs(30))
    await waitFor(() => busy.started.size >= 10, '10 jobs to start', 10_000)
    await cluster.restart()
    await allDone(database, busy.queue.name, 30, 30_000)

    // The first worker idles now, looking for work with nothing else to write; the second starts while the server is away.
    await cluster.down()
    const second = workerPool(database.url)
    const late = startWorker(second.db, second.pool, 'started-while-down')
    await waitFor(() => first.refused() >= 3 && second.refused() >= 1, 'both workers to find the server away', 10_000)
    await cluster.up()
    await enqueueMany(database.db, late.queue, jobs(10))
    await allDone(database, late.queue.name, 10, 30_000)
    expect(busy.started.size).toBe(30)
    await expectEveryJobDoneOnce(database, busy.queue.name, 30, busy.worker, first.pool, busy.errors)
    await expectEveryJobDoneOnce(database, late.queue.name, 10, late.worker, second.pool, late.errors)
  } finally {
    await Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 1_000 })))
    await Promise.all(pools.splice(0).map((pool) => pool.end()))
    await database?.drop()
    cluster.stop()
  }
})

test("JOB-07 [postgres] claims that wait on a limited queue's row, locked by another transaction, past the pool's statement_timeout are retried: nothing surfaces, and the jobs run once the lock is released", async () => {
  await t.pool.query(RUNS_TABLE)
  const { pool, db } = workerPool(t.url, { options: '-c statement_timeout=100' })
  let canceled = 0
  // Counts the statements the server canceled for their timeout (57014), leaving each one's failure to its caller.
  aroundQueries(pool, (_client, _text, send) => {
    const answer = send()
    if (answer instanceof Promise) answer.catch((error: { code?: string }) => void (error?.code === '57014' && canceled++))
    return answer
  })
  const { queue, worker, started, errors } = startWorker(db, pool, 'limited-locked', { concurrency: 2 })
  await waitFor(
    async () => (await t.pool.query(`select concurrency from jobs_queue where name = $1`, [queue.name])).rows[0]?.concurrency === 2,
    'the worker to store its limits',
  )
  const locker = await t.pool.connect()
  try {
    await locker.query('begin')
    await locker.query('select 1 from jobs_queue where name = $1 for update', [queue.name])
    await enqueueMany(
      t.db,
      queue,
      Array.from({ length: 10 }, (_, n) => ({ value: { n }, id: `job-${n}` })),
    )
    await waitFor(() => canceled >= 3, 'three claims to be canceled by their statement_timeout', 10_000)
    expect(started.size).toBe(0)
    await locker.query('commit')
  } finally {
    locker.release()
  }
  await allDone(t, queue.name, 10, 20_000)
  await expectEveryJobDoneOnce(t, queue.name, 10, worker, pool, errors)
})

test('JOB-20 [postgres] a listening connection ended just before its LISTEN is sent is made anew once: one listening connection, and no client kept out of the pool', async () => {
  const { pool, db } = workerPool(t.url)
  let listens = 0
  aroundQueries(pool, (client, text, send) => {
    if (!text?.startsWith('listen') || ++listens !== 2) return send()
    // The LISTEN made after the first listening connection was ended: the server ends this one too, just before it is sent.
    return new Promise((resolve, reject) => {
      client.once('end', () => (send() as Promise<unknown>).then(resolve, reject))
      void t.pool.query('select pg_terminate_backend($1)', [Reflect.get(client, 'processID')])
    })
  })
  const { worker } = startWorker(db, pool, 'relistened')
  const listening = async () =>
    (
      await t.pool.query<{ pid: number }>(
        `select pid from pg_stat_activity where datname = current_database() and application_name = $1 and query ilike 'listen%'`,
        [WORKER_APP],
      )
    ).rows.map((row) => row.pid)
  const [first] = await waitFor(async () => {
    const pids = await listening()
    return pids.length > 0 && pids
  }, 'the worker to listen')
  await t.pool.query('select pg_terminate_backend($1)', [first])
  await waitFor(async () => listens >= 3 && (await listening()).some((pid) => pid !== first), 'a new listening connection')
  // A second one, if the lost client were made anew twice, would come 200 ms after the loss (the backoff's second step).
  expect(await seenWithin(async () => (await listening()).length > 1, 1_000)).toBe(false)
  await worker.stop()
  await waitFor(
    () => pool.totalCount === pool.idleCount,
    `the worker's pool to hold no client out (${pool.totalCount - pool.idleCount} out)`,
    5_000,
  )
  expect(uncaught).toEqual([])
})

/**
 * Ends the backend of `client` and sends the query once the client saw its connection end: the query then fails
 * as one sent on a lost connection does. Answers what the query's caller awaits (nothing for a callback).
 */
function sendAfterTermination(database: TestPgDb, client: pg.PoolClient, send: () => unknown): unknown {
  const answer = new Promise((resolve, reject) => {
    client.once('end', () => {
      const sent = send()
      if (sent instanceof Promise) sent.then(resolve, reject)
      else resolve(undefined)
    })
  })
  void database.pool.query('select pg_terminate_backend($1)', [Reflect.get(client, 'processID')])
  return answer
}

test('JOB-06 [postgres] step reads and writes whose connection is ended by pg_terminate_backend are tried again on another connection: the handler gets each answer, never the error, each step function runs once, and nothing surfaces', async () => {
  await t.pool.query(RUNS_TABLE)
  const { pool, db } = workerPool(t.url)
  let ended = { read: 0, write: 0 }
  aroundQueries(pool, (client, text, send) => {
    const kind = text?.startsWith('select answer::text as answer from jobs_step')
      ? 'read'
      : text?.includes('insert into jobs_step')
        ? 'write'
        : null
    if (kind === null || ended[kind] >= 3) return send()
    ended = { ...ended, [kind]: ended[kind] + 1 }
    return sendAfterTermination(t, client, send)
  })
  const queue = defineQueue<{ n: number }>('steps-terminated', { attempts: 5, backoff: { initial: 10, max: 50 } })
  const calls = new Map<string, number>()
  const handlerErrors: unknown[] = []
  const errors: unknown[] = []
  const worker = work(
    db,
    queue,
    async ({ n }, run) => {
      try {
        let total = 0
        for (const name of ['first', 'second']) {
          total += await run.step(name, () => {
            calls.set(`${run.id}/${name}`, (calls.get(`${run.id}/${name}`) ?? 0) + 1)
            return n
          })
        }
        await recordRun(pool, run.id, run.attempt)
        return { total }
      } catch (error) {
        handlerErrors.push(error)
        throw error
      }
    },
    { slots: 3, onError: (error) => void errors.push(error) },
  )
  workers.push(worker)
  await enqueueMany(
    t.db,
    queue,
    Array.from({ length: 10 }, (_, n) => ({ value: { n }, id: `job-${n}` })),
  )
  await allDone(t, queue.name, 10, 20_000)
  expect(ended).toEqual({ read: 3, write: 3 })
  expect(handlerErrors).toEqual([])
  expect([...calls].filter(([, count]) => count !== 1)).toEqual([])
  expect(calls.size).toBe(20)
  await expectEveryJobDoneOnce(t, queue.name, 10, worker, pool, errors)
  expect(Number((await t.pool.query('select count(*) as n from jobs_step')).rows[0].n)).toBe(0)
})

test('JOB-05 [postgres] a BEGIN whose connection is ended by pg_terminate_backend gives its client back to the pool, destroyed: the worker carries on, surfaces nothing and ends every job done once', async () => {
  await t.pool.query(RUNS_TABLE)
  const { pool, db } = workerPool(t.url)
  let ended = 0
  aroundQueries(pool, (client, text, send) => {
    if (!text?.startsWith('begin') || ended >= 3) return send()
    ended++
    return sendAfterTermination(t, client, send)
  })
  const { queue, worker, errors } = startWorker(db, pool, 'begin-terminated')
  await enqueueMany(
    t.db,
    queue,
    Array.from({ length: 20 }, (_, n) => ({ value: { n }, id: `job-${String(n).padStart(2, '0')}` })),
  )
  await allDone(t, queue.name, 20, 20_000)
  expect(ended).toBe(3)
  await expectEveryJobDoneOnce(t, queue.name, 20, worker, pool, errors)
})

test('JOB-05 [postgres] every client the engine takes from its pool has an error listener from the moment the pool hands it over: an error emitted then (a FATAL read in the same packet as the last answer) crashes nothing', async () => {
  await t.pool.query(RUNS_TABLE)
  const { pool, db } = workerPool(t.url)
  let handedOver = 0
  let unlistened = 0
  let emitted = 0
  const connect = pool.connect.bind(pool) as (callback: (error: Error | undefined, client?: pg.PoolClient, done?: unknown) => void) => void
  /** Right as the pool hands a client over, in the same tick: does anyone listen for its errors yet? If so, one is emitted. */
  const atHandOver = (client: pg.PoolClient) => {
    handedOver++
    if (client.listenerCount('error') === 0) return void unlistened++
    if (emitted++ % 5 === 0)
      client.emit('error', Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }))
  }
  Reflect.set(pool, 'connect', (callback?: (error: Error | undefined, client?: pg.PoolClient, done?: unknown) => void) => {
    if (callback) {
      return connect((error, client, done) => {
        callback(error, client, done)
        if (client) atHandOver(client)
      })
    }
    return new Promise((resolve, reject) =>
      connect((error, client) => {
        if (error || !client) return reject(error)
        resolve(client)
        atHandOver(client)
      }),
    )
  })
  const { queue, worker, errors } = startWorker(db, pool, 'handed-over')
  await enqueueMany(
    t.db,
    queue,
    Array.from({ length: 20 }, (_, n) => ({ value: { n }, id: `job-${String(n).padStart(2, '0')}` })),
  )
  await allDone(t, queue.name, 20, 20_000)
  expect(handedOver).toBeGreaterThan(20)
  expect(unlistened).toBe(0)
  await expectEveryJobDoneOnce(t, queue.name, 20, worker, pool, errors)
})

test("JOB-05 [postgres] an idle client of the worker's pool whose backend is ended emits its error on the pool: with no listener of the app's on the pool, the engine's keeps the process alive", async () => {
  const pool = new pg.Pool({ connectionString: t.url, application_name: WORKER_APP, max: 4 })
  pools.push(pool)
  const queue = defineQueue<{ n: number }>('idle-ended', { attempts: 3 })
  const errors: unknown[] = []
  const worker = work(drizzle(pool), queue, async () => {}, { onError: (error) => void errors.push(error) })
  workers.push(worker)
  await enqueueMany(
    t.db,
    queue,
    Array.from({ length: 5 }, (_, n) => ({ value: { n }, id: `job-${n}` })),
  )
  await allDone(t, queue.name, 5, 20_000)
  await waitFor(() => pool.idleCount > 0, 'an idle client in the pool')
  const idle = pool.idleCount
  expect(await terminateWorkerConnections(t)).toBeGreaterThan(0)
  await waitFor(() => pool.idleCount < idle || pool.totalCount < idle, 'the pool to let an ended client go', 5_000)
  await enqueueMany(t.db, queue, [{ value: { n: 5 }, id: 'job-5' }])
  await allDone(t, queue.name, 6, 20_000)
  expect(errors).toEqual([])
  expect(uncaught).toEqual([])
})
