/**
 * Counts on PostgreSQL (src/dialect/pg/counts.ts): kept by triggers for every writer, folded by the workers'
 * maintenance, read as the queue's row plus what is not folded. Checked exactly, in one statement (one
 * snapshot) that compares them with the jobs themselves, while workers claim and end, folds run beside
 * each other, and another program writes plain SQL.
 */
import { describe, expect, test } from 'vitest'
import { ask } from '../../src/dialect/index.js'
import { pgConnectionOf } from '../helpers/pg.js'
import { defineQueue, enqueue, enqueueMany, isJobsError, queueCounts, work, type Worker } from '../../src/index.js'
import { eachFreshPgDb } from '../helpers/pg.js'
import { waitFor } from '../helpers/wait.js'

const t = eachFreshPgDb()
const STATES = ['waiting', 'scheduled', 'running', 'done', 'failed', 'canceled'] as const

/**
 * Per queue and state, the kept count (row plus unfolded) and the count of the jobs, read in one statement:
 * answers the pairs that differ.
 */
async function mismatches(): Promise<unknown[]> {
  const { rows } =
    await t.pool.query(`with names as (select name from jobs_queue union select queue from jobs_job union select queue from jobs_count),
      kept as (select n.name, ${STATES.map((s) => `coalesce(q.${s}, 0) + coalesce((select sum(${s}) from jobs_count c where c.queue = n.name), 0) as ${s}`).join(', ')}
               from names n left join jobs_queue q on q.name = n.name),
      actual as (select n.name, ${STATES.map((s) => `(select count(*) from jobs_job j where j.queue = n.name and j.state = '${s}') as ${s}`).join(', ')} from names n)
    select k.name, ${STATES.map((s) => `k.${s} as kept_${s}, a.${s} as actual_${s}`).join(', ')}
    from kept k join actual a on a.name = k.name
    where ${STATES.map((s) => `k.${s} <> a.${s}`).join(' or ')}`)
  return rows
}

describe('counts kept by triggers', () => {
  test('JOB-18 [postgres] counts stay exact under concurrent workers, folds and plain SQL of another program', {
    timeout: 180_000,
  }, async () => {
    const q = defineQueue<{ n: number }>('busy', { attempts: 2, backoff: { initial: 0, max: 0 } })
    const limited = defineQueue<{ n: number }>('limited', { concurrency: 2 })
    const workers: Worker[] = []
    let stop = false
    try {
      for (let i = 0; i < 3; i++) {
        workers.push(
          work(
            t.db,
            q,
            (value) => {
              if (value.n % 7 === 0) throw new Error('a failed attempt')
              return value.n
            },
            { slots: 4 },
          ),
        )
      }
      workers.push(work(t.db, limited, (value) => value.n, { slots: 4 }))
      const connection = pgConnectionOf(t.db)
      // Folds beside the workers' own, every 20 ms.
      const folder = (async () => {
        let folds = 0
        while (!stop) {
          for (const queue of ['busy', 'limited', 'plain'])
            folds += await connection.write((db) => ask(db.counts === 'apart' ? db.queueFoldCounts(queue) : 0))
          await new Promise((resolve) => setTimeout(resolve, 20))
        }
        return folds
      })()
      // Another program: inserts, cancels, retries and deletes with plain SQL, on the queues and on one no worker runs.
      const other = (async () => {
        for (let i = 0; i < 30 && !stop; i++) {
          await t.pool.query(`insert into jobs_job (queue, id, value) values ('busy', $1, '{"n": 1}'), ('plain', $1, '{"n": 2}')`, [
            `sql-${i}`,
          ])
          await t.pool.query(
            `update jobs_job set state = 'canceled', finished_at = now() where seq = (select seq from jobs_job where queue = 'busy' and state = 'waiting' order by seq desc limit 1)`,
          )
          await t.pool.query(
            `update jobs_job set state = 'waiting', attempts = 0 where queue = 'busy' and state in ('canceled', 'failed') and id like 'sql-%' and seq % 2 = 0`,
          )
          await t.pool.query(
            `delete from jobs_job where seq in (select seq from jobs_job where queue in ('busy', 'plain') and state in ('done', 'canceled') order by seq limit 2)`,
          )
          await new Promise((resolve) => setTimeout(resolve, 10))
        }
      })()
      const checks: unknown[][] = []
      for (let batch = 0; batch < 10; batch++) {
        await enqueueMany(
          t.db,
          q,
          Array.from({ length: 20 }, (_, n) => ({ value: { n: batch * 20 + n } })),
        )
        await enqueue(t.db, limited, { n: batch })
        checks.push(await mismatches())
      }
      await other
      await waitFor(
        async () => {
          const { rows } = await t.pool.query(
            `select count(*)::int as n from jobs_job where queue in ('busy', 'limited') and state in ('waiting', 'running')`,
          )
          return rows[0].n === 0
        },
        'the workers to run every job',
        120_000,
      )
      stop = true
      expect(await folder).toBeGreaterThan(0)
      checks.push(await mismatches())
      expect(checks.filter((found) => found.length > 0)).toEqual([])

      for (const queue of ['busy', 'limited', 'plain']) {
        const { rows } = await t.pool.query(`select state, count(*)::int as n from jobs_job where queue = $1 group by state`, [queue])
        const want = Object.fromEntries(STATES.map((state) => [state, rows.find((row) => row.state === state)?.n ?? 0]))
        expect(await queueCounts(t.db, queue)).toMatchObject({ queue, ...want })
      }
      // Folded to the last change: the rows hold the counts, and nothing is left apart.
      for (const queue of ['busy', 'limited', 'plain'])
        await connection.write((db) => ask(db.counts === 'apart' ? db.queueFoldCounts(queue) : 0))
      expect((await t.pool.query('select count(*)::int as n from jobs_count')).rows[0].n).toBe(0)
      expect(await mismatches()).toEqual([])
    } finally {
      stop = true
      await Promise.all(workers.map((worker) => worker.stop({ timeout: 5_000 })))
    }
  })

  test('JOB-18 [postgres] a writer installs the triggers and recounts the jobs written before them; a reader installs nothing', async () => {
    await t.pool.query(
      `insert into jobs_job (queue, id, value, state) values ('early', 'a', '1', 'waiting'), ('early', 'b', '1', 'done'), ('early', 'c', '1', 'failed')`,
    )
    const triggers = async () =>
      (
        await t.pool.query(
          `select count(*)::int as n from pg_trigger where tgrelid = 'jobs_job'::regclass and tgname like 'jobs_job_counts_%'`,
        )
      ).rows[0].n
    expect(await triggers()).toBe(0)
    // A reader answers (the counts are the writers' to install), and runs no DDL.
    expect(await queueCounts(t.db, 'early')).toMatchObject({ queue: 'early' })
    expect(await triggers()).toBe(0)
    const q = defineQueue('early')
    await enqueue(t.db, q, 2, { id: 'd' })
    expect(await triggers()).toBe(3)
    expect(await queueCounts(t.db, q)).toMatchObject({ waiting: 2, done: 1, failed: 1 })
    expect(await mismatches()).toEqual([])
  })

  test("JOB-18 [postgres] a database whose protocol trigger is an earlier version's gets this version's: the old one, which deleted jobs_lease rows, is dropped", async () => {
    const q = defineQueue('upgraded')
    await enqueue(t.db, q, 1, { id: 'a' })
    const protocolTriggers = async () =>
      (
        await t.pool.query(
          `select tgname from pg_trigger where tgrelid = 'jobs_job'::regclass and tgname like 'jobs_job_protocol_%' order by tgname`,
        )
      ).rows.map((row) => row.tgname)
    expect(await protocolTriggers()).toEqual(['jobs_job_protocol_v2'])
    // As the previous version left it: v1 in place of v2, its function deleting the lease of a job it fails.
    await t.pool.query(`
      drop trigger jobs_job_protocol_v2 on jobs_job;
      drop function jobs_job_protocol_v2();
      create function jobs_job_protocol_v1() returns trigger language plpgsql as $f$
      begin
        new.error := 'broken'; new.state := 'failed'; new.finished_at := now();
        if tg_op = 'UPDATE' then
          delete from jobs_lease where job = new.seq;
          delete from jobs_step where job = new.seq;
        end if;
        return new;
      end $f$;
      create trigger jobs_job_protocol_v1 before insert or update on jobs_job
        for each row when (new.state in ('waiting', 'scheduled') and new.attempts < 0) execute function jobs_job_protocol_v1();`)
    // A process of this version writes: it installs its trigger, and drops v1.
    await enqueue(t.postgresJs().db, q, 2, { id: 'b' })
    expect(await protocolTriggers()).toEqual(['jobs_job_protocol_v2'])
    expect((await t.pool.query(`select count(*)::int as n from pg_proc where proname = 'jobs_job_protocol_v1'`)).rows[0].n).toBe(0)
    // A running job put back broken by plain SQL is failed, naming no worker, where v1 would have failed the write.
    await t.pool.query(`update jobs_job set state = 'running', attempts = 1, owner = 'gone:1' where id = 'a'`)
    await t.pool.query(`update jobs_job set state = 'waiting', attempts = -1 where id = 'a'`)
    expect((await t.pool.query(`select state, owner, error from jobs_job where id = 'a'`)).rows).toEqual([
      {
        state: 'failed',
        owner: null,
        error: 'attempts holds -1, not a count of runs (a whole number from 0): the row breaks the table protocol',
      },
    ])
    expect(await mismatches()).toEqual([])
  })

  test('JOB-13 [postgres] maxWaiting is checked against the kept counts, whatever was written by plain SQL', async () => {
    const q = defineQueue('capped', { maxWaiting: 3 })
    await enqueue(t.db, q, 1)
    await t.pool.query(`insert into jobs_job (queue, value) values ('capped', '1'), ('capped', '2')`)
    const refused = await enqueue(t.db, q, 4).catch((error: unknown) => error)
    expect(isJobsError(refused, 'QUEUE_FULL'), String(refused)).toBe(true)
    await t.pool.query(`delete from jobs_job where queue = 'capped' and value = '2'`)
    expect((await enqueue(t.db, q, 5)).added).toBe(true)
    expect((await t.pool.query(`select count(*)::int as n from jobs_job where queue = 'capped'`)).rows[0].n).toBe(3)
  })
})
