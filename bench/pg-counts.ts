/**
 * Counts on PostgreSQL: what the counting triggers cost, and what a read of the counts costs.
 *
 *   npx tsx bench/pg-counts.ts [triggers|drain|counts|all]
 *
 * Against DATABASE_URL's server (default postgres://postgres@127.0.0.1:5432/postgres), in a database of its
 * own, migrated as a user would, dropped at the end.
 * - triggers: µs per claim statement and per end statement, on batches of 16 jobs, with and without the
 *   triggers (the engine's own statements, run alternately in rounds).
 * - drain: 20,000 jobs drained by one worker with 16 slots, with and without the triggers.
 * - counts: queueCounts at 1,000,000 jobs, with few (10) and many (10,000) changes not folded yet, and the
 *   count over the jobs it replaces.
 */
import type { NodePgDatabase } from 'drizzle-orm/node-postgres'
import type pg from 'pg'
import { defineQueue, enqueue, enqueueMany, queueCounts, work } from '../src/index.js'
import { endsAsJson, SQL } from '../src/dialect/pg/statements.js'
import { withPgDatabase } from './lib/pg-database.js'

const what = process.argv[2] ?? 'all'

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

function withDatabase(run: (pool: pg.Pool, db: NodePgDatabase) => Promise<void>): Promise<void> {
  return withPgDatabase(20, run)
}

/** Runs the engine's statement with its parameters, by name. */
function query(client: pg.PoolClient, statement: { text: string; params: readonly string[] }, params: Record<string, unknown>) {
  return client.query(
    statement.text,
    statement.params.map((name) => params[name]),
  )
}

/** Installs the triggers as a writer does: the first enqueue. */
async function install(db: NodePgDatabase) {
  await enqueue(db, defineQueue('install'), null)
}

const dropTriggers = `drop trigger jobs_job_counts_insert_v1 on jobs_job; drop trigger jobs_job_counts_update_v1 on jobs_job; drop trigger jobs_job_counts_delete_v1 on jobs_job`

async function triggerCost(): Promise<void> {
  await withDatabase(async (pool, db) => {
    await install(db)
    const client = await pool.connect()
    const rounds = 8
    const batches = 200
    const times = { with: { claim: [] as number[], end: [] as number[] }, without: { claim: [] as number[], end: [] as number[] } }
    try {
      for (let round = 0; round < rounds * 2; round++) {
        const mode = round % 2 === 0 ? 'with' : 'without'
        if (mode === 'without') await client.query(dropTriggers)
        await client.query('truncate jobs_job cascade')
        await client.query(`insert into jobs_job (queue, value) select 'bench', 'null' from generate_series(1, ${batches * 16})`)
        const { rows } = await client.query('select seq::float8 as seq from jobs_job order by seq')
        const seqs = rows.map((row: { seq: number }) => row.seq)
        let claim = 0
        let end = 0
        for (let b = 0; b < batches; b++) {
          const batch = seqs.slice(b * 16, b * 16 + 16)
          await client.query('begin')
          let started = performance.now()
          await query(client, SQL.flushClaim, {
            queue: 'bench',
            owner: 'me',
            now: Date.now() + 60_000,
            notify: 0,
            total: null,
            setWaiters: 0,
            waiters: null,
            limit: batch.length,
            window: batch.length,
            passOver: '[]',
            skipAbandoned: 0,
            only: null,
            perGroup: null,
            groupRoom: null,
            otherRoom: null,
            leaseUntil: null,
            channel: null,
          })
          claim += performance.now() - started
          await client.query('commit')
          const ends = endsAsJson(
            batch.map((seq) => ({
              seq,
              attempt: 1,
              transition: {
                state: 'done',
                runAt: null,
                finishedAt: Date.now(),
                result: '1',
                error: null,
                errorStack: null,
                refund: 0,
                abandoned: 0,
                waitsFor: null,
                signals: null,
              },
            })),
          )
          await client.query('begin')
          started = performance.now()
          await query(client, SQL.jobEndMany, { owner: 'me', expiredBy: null, ends })
          end += performance.now() - started
          await client.query('commit')
        }
        times[mode].claim.push((claim / batches) * 1000)
        times[mode].end.push((end / batches) * 1000)
        if (mode === 'without') await reinstall(client)
      }
    } finally {
      client.release()
    }
    // The same statements in a loop on the server, timed there: what the triggers add, without the round trips.
    const server = { with: [] as number[], without: [] as number[] }
    const client2 = await pool.connect()
    try {
      for (let round = 0; round < rounds * 2; round++) {
        const mode = round % 2 === 0 ? 'with' : 'without'
        if (mode === 'without') await client2.query(dropTriggers)
        await client2.query('truncate jobs_job cascade')
        await client2.query(`insert into jobs_job (queue, value) select 'bench', 'null' from generate_series(1, ${batches * 16})`)
        await client2.query(`do $$
          declare started timestamptz; first bigint := (select min(seq) from jobs_job);
          begin
            started := clock_timestamp();
            for b in 0..${batches - 1} loop
              update jobs_job set state = 'running', attempts = attempts + 1 where seq between first + b * 16 and first + b * 16 + 15 and state in ('waiting', 'scheduled');
              update jobs_job set state = 'done', finished_at = now() where seq between first + b * 16 and first + b * 16 + 15 and state = 'running';
            end loop;
            perform set_config('bench.us', (extract(epoch from clock_timestamp() - started) * 1e6 / ${batches * 2})::text, false);
          end $$`)
        const { rows } = await client2.query(`select current_setting('bench.us')::float8 as us`)
        server[mode].push(rows[0].us)
        if (mode === 'without') await reinstall(client2)
      }
    } finally {
      client2.release()
    }
    console.log(
      `on the server, per statement (a claim's or an end's update of 16 jobs), median of ${rounds} rounds: with triggers ${median(server.with).toFixed(0)} µs, without ${median(server.without).toFixed(0)} µs`,
    )
    const show = (mode: 'with' | 'without') =>
      `claim ${median(times[mode].claim).toFixed(0)} µs, end ${median(times[mode].end).toFixed(0)} µs`
    console.log(
      `per statement on a batch of 16 (median of ${rounds} rounds of ${batches} batches): with triggers ${show('with')}; without ${show('without')}`,
    )
  })
}

/** Puts the triggers back after a round without them (a fresh connection would find them missing and install them). */
async function reinstall(client: pg.PoolClient) {
  const { INSTALL_COUNTERS } = await import('../src/dialect/pg/counts.js')
  await client.query(INSTALL_COUNTERS.text)
}

async function drain(): Promise<void> {
  const results: string[] = []
  for (const mode of ['with', 'without', 'with', 'without'] as const) {
    await withDatabase(async (pool, db) => {
      await install(db)
      if (mode === 'without') await pool.query(dropTriggers)
      const q = defineQueue<number>('drain')
      for (let i = 0; i < 20_000; i += 1_000)
        await enqueueMany(
          db,
          q,
          Array.from({ length: 1_000 }, (_, n) => ({ value: i + n })),
        )
      let done = 0
      const started = performance.now()
      let finished = 0
      const worker = work(
        db,
        q,
        () => {
          if (++done === 20_000) finished = performance.now()
        },
        { slots: 16 },
      )
      while (finished === 0) await new Promise((r) => setTimeout(r, 5))
      await worker.stop()
      results.push(`${mode} triggers: ${Math.round(20_000 / ((finished - started) / 1000))} jobs/s`)
      console.log(results.at(-1))
    })
  }
  console.log(`drain of 20,000 jobs, 1 worker, 16 slots: ${results.join('; ')}`)
}

async function counts(): Promise<void> {
  await withDatabase(async (pool, db) => {
    await install(db)
    await pool.query(`insert into jobs_job (queue, id, value, state) select 'big', 'j' || g, 'null',
      (array['waiting', 'scheduled', 'done', 'failed'])[1 + g % 4] from generate_series(1, 1000000) g`)
    await pool.query('vacuum analyze jobs_job')
    const fold = () =>
      pool.query(`with f as (delete from jobs_count where queue = 'big' returning *)
      update jobs_queue set waiting = waiting + (select coalesce(sum(waiting), 0) from f), scheduled = scheduled + (select coalesce(sum(scheduled), 0) from f),
        done = done + (select coalesce(sum(done), 0) from f), failed = failed + (select coalesce(sum(failed), 0) from f) where name = 'big'`)
    await fold()
    const time = async (label: string) => {
      for (let i = 0; i < 20; i++) await queueCounts(db, 'big')
      const samples: number[] = []
      for (let i = 0; i < 200; i++) {
        const started = performance.now()
        await queueCounts(db, 'big')
        samples.push(performance.now() - started)
      }
      console.log(
        `queueCounts at 1,000,000 jobs, ${label}: median ${median(samples).toFixed(2)} ms, max ${Math.max(...samples).toFixed(2)} ms`,
      )
    }
    const changes = async (n: number) =>
      pool.query(
        `do $$ begin for i in 1..${n} loop update jobs_job set state = 'waiting' where seq = i and state <> 'waiting'; update jobs_job set state = 'scheduled' where seq = i; end loop; end $$`,
      )
    await changes(5)
    await time(`${(await pool.query(`select count(*)::int as n from jobs_count`)).rows[0].n} changes not folded`)
    await fold()
    await changes(5_000)
    await time(`${(await pool.query(`select count(*)::int as n from jobs_count`)).rows[0].n} changes not folded`)
    const samples: number[] = []
    for (let i = 0; i < 5; i++) {
      const started = performance.now()
      await pool.query(
        `select count(*) filter (where state = 'waiting'), count(*) filter (where state = 'done') from jobs_job where queue = 'big'`,
      )
      samples.push(performance.now() - started)
    }
    console.log(`the count over the jobs it replaces: median ${median(samples).toFixed(0)} ms`)
    const started = performance.now()
    await fold()
    console.log(`one fold of those changes: ${(performance.now() - started).toFixed(1)} ms`)
  })
}

if (what === 'triggers' || what === 'all') await triggerCost()
if (what === 'drain' || what === 'all') await drain()
if (what === 'counts' || what === 'all') await counts()
