/**
 * An app upgrades to one lease row per worker as a user would: its database holds the tables of the version
 * before (its drizzle-kit migrations, and the triggers that version's engine installed), with jobs waiting,
 * scheduled, running under a lease row of a worker that was stopped, and done. It applies the drizzle-kit
 * migration from there and starts the new version's workers. Every job then ends exactly once: the waiting and
 * scheduled ones run once, the one that was running has no worker after the migration and is taken back as an
 * abandoned run and runs once more, the done one is left as it was, the counters agree with the rows, and the
 * table protocol's trigger (whose old version wrote the jobs_lease of one row per job) still fails a careless write.
 */
import { cpSync, readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3'
import { migrate as migrateSqlite } from 'drizzle-orm/better-sqlite3/migrator'
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator'
import { afterEach, expect, test } from 'vitest'
import { defineQueue, queueCounts, work, type Worker } from '../src/index.js'
import { MIGRATIONS, openDb, removeTempDirs, tempDir } from './helpers/db.js'
import { freshPgDb, PG_MIGRATIONS, type TestPgDb } from './helpers/pg.js'
import { waitFor } from './helpers/wait.js'

const FIXTURES = resolve(import.meta.dirname, 'fixtures', 'upgrade')
/** The migration that brings one lease row per worker, in each dialect's folder. */
const UPGRADE_TAG = 'lease_per_worker'
/** A worker of the version before, which was stopped (or crashed) while it ran a job. */
const OLD_OWNER = 'old-host/4242/1/0123456789ab/1'

const workers: Worker[] = []
const pgDbs: TestPgDb[] = []

afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop()))
  await Promise.all(pgDbs.splice(0).map((db) => db.drop()))
  removeTempDirs()
})

/** A copy of a migrations folder holding only the migrations before `tag`: the tables an app had before it. */
function migrationsBefore(folder: string, tag: string): string {
  const copy = join(tempDir('drizzle-jobs-migrations-'), 'migrations')
  cpSync(folder, copy, { recursive: true })
  const journalFile = join(copy, 'meta', '_journal.json')
  const journal = JSON.parse(readFileSync(journalFile, 'utf8')) as { entries: { tag: string }[] }
  const at = journal.entries.findIndex((entry) => entry.tag.endsWith(`_${tag}`))
  expect(at, `the migration ${tag} in ${folder}`).toBeGreaterThan(0)
  journal.entries = journal.entries.slice(0, at)
  writeFileSync(journalFile, JSON.stringify(journal))
  return copy
}

/** The queue the upgraded workers run: a short backoff, so that the run taken back runs again at once. */
const upgraded = defineQueue<{ n: number }>('upgraded', { backoff: { initial: '10ms', max: '10ms' } })

/** Runs every due job of the queue with a new version's worker; answers each run as `id@attempt`. */
function runEveryJob(db: Parameters<typeof work>[0]): string[] {
  const ran: string[] = []
  workers.push(work(db as never, upgraded, (_value, run) => void ran.push(`${run.id}@${run.attempt}`), { pollInterval: '20ms' }))
  return ran
}

test('upgrade [sqlite] from one lease row per job: after the drizzle-kit migration every job ends exactly once, the running one taken back as abandoned', async () => {
  const file = join(tempDir(), 'app.db')
  const { client, db } = openDb(file)
  try {
    migrateSqlite(db, { migrationsFolder: migrationsBefore(MIGRATIONS, UPGRADE_TAG) })
    // What the version before left: its engine's triggers, and its jobs written as its engine wrote them.
    client.exec(readFileSync(join(FIXTURES, 'sqlite-engine-before.sql'), 'utf8'))
    const now = Date.now()
    const add = client.prepare(`insert into jobs_job (queue, id, value, state, attempts, run_at, created_at, finished_at, result)
      values ('upgraded', ?, ?, ?, ?, ?, ?, ?, ?)`)
    add.run('w1', '{"n":1}', 'waiting', 0, now, now, null, null)
    add.run('w2', '{"n":2}', 'waiting', 0, now, now, null, null)
    add.run('s1', '{"n":3}', 'scheduled', 0, now + 200, now, null, null)
    add.run('r1', '{"n":4}', 'running', 1, now, now, null, null)
    add.run('d1', '{"n":5}', 'done', 1, now, now, now, '{"old":true}')
    add.run('bad', '{"n":6}', 'scheduled', 0, now + 3_600_000, now, null, null)
    client
      .prepare(`insert into jobs_lease (job, queue, grp, owner, attempt, expires_at)
        select seq, queue, grp, ?, 1, ? from jobs_job where id = 'r1'`)
      .run(OLD_OWNER, now + 60_000)

    // An app coming from this version without running the next one drops that version's protocol trigger first, as
    // docs/operating.md says: the trigger names the jobs_lease that the next migration drops, and SQLite refuses to
    // rename jobs_worker while a trigger names a table that is gone ('error in trigger jobs_job_protocol_v1').
    client.exec('drop trigger if exists jobs_job_protocol_v1')
    migrateSqlite(drizzleSqlite({ client }), { migrationsFolder: MIGRATIONS })
    expect(client.prepare(`select owner from jobs_job where id = 'r1'`).pluck().get()).toBeNull()

    const ran = runEveryJob(db)
    const state = (id: string) => client.prepare(`select state from jobs_job where id = ?`).pluck().get(id)
    await waitFor(() => ['w1', 'w2', 's1', 'r1'].every((id) => state(id) === 'done'), 'every job the upgrade found to end', 10_000)
    expect([...ran].sort()).toEqual(['r1@2', 's1@1', 'w1@1', 'w2@1'])
    expect(client.prepare(`select state, attempts, result from jobs_job where id = 'd1'`).get()).toEqual({
      state: 'done',
      attempts: 1,
      result: '{"old":true}',
    })
    expect(client.prepare(`select error from jobs_job where id = 'r1'`).pluck().get()).toBeNull()

    // The table protocol's trigger is the new version's: a careless write fails the job, and the write itself lands.
    client.prepare(`update jobs_job set run_at = 'soon' where id = 'bad'`).run()
    expect(client.prepare(`select state, error from jobs_job where id = 'bad'`).get()).toMatchObject({
      state: 'failed',
      error: expect.stringContaining('run_at'),
    })
    await Promise.all(workers.splice(0).map((worker) => worker.stop()))
    expect(queueCounts(db, 'upgraded')).toMatchObject({ waiting: 0, scheduled: 0, running: 0, done: 5, failed: 1 })
    expect(client.prepare(`select count(*) from jobs_job where owner is not null`).pluck().get()).toBe(0)
    expect(client.prepare(`select count(*) from jobs_lease`).pluck().get()).toBe(0)
  } finally {
    client.close()
  }
})

test('upgrade [postgres] from one lease row per job: after the drizzle-kit migration every job ends exactly once, the running one taken back as abandoned', async () => {
  const t = await freshPgDb({ migrate: false })
  pgDbs.push(t)
  await migratePg(t.db, { migrationsFolder: migrationsBefore(PG_MIGRATIONS, UPGRADE_TAG) })
  // What the version before left: its engine's triggers and counters, and its jobs written as its engine wrote them.
  await t.pool.query(readFileSync(join(FIXTURES, 'pg-engine-before.sql'), 'utf8'))
  await t.pool.query(`insert into jobs_job (queue, id, value, state, attempts, run_at, finished_at, result) values
    ('upgraded', 'w1', '{"n":1}', 'waiting', 0, now(), null, null),
    ('upgraded', 'w2', '{"n":2}', 'waiting', 0, now(), null, null),
    ('upgraded', 's1', '{"n":3}', 'scheduled', 0, now() + interval '200 milliseconds', null, null),
    ('upgraded', 'r1', '{"n":4}', 'running', 1, now(), null, null),
    ('upgraded', 'd1', '{"n":5}', 'done', 1, now(), now(), '{"old":true}'),
    ('upgraded', 'bad', '{"n":6}', 'scheduled', 0, now() + interval '1 hour', null, null)`)
  await t.pool.query(
    `insert into jobs_lease (job, queue, grp, owner, attempt, expires_at)
     select seq, queue, grp, $1, 1, now() + interval '1 minute' from jobs_job where id = 'r1'`,
    [OLD_OWNER],
  )

  await migratePg(t.db, { migrationsFolder: PG_MIGRATIONS })
  const one = async <T>(sql: string, ...params: unknown[]): Promise<T> => (await t.pool.query(sql, params)).rows[0] as T
  expect(await one(`select owner from jobs_job where id = 'r1'`)).toEqual({ owner: null })

  const ran = runEveryJob(t.db)
  const done = async () =>
    Number((await one<{ n: string }>(`select count(*) as n from jobs_job where id in ('w1', 'w2', 's1', 'r1') and state = 'done'`)).n)
  await waitFor(async () => (await done()) === 4, 'every job the upgrade found to end', 10_000)
  expect([...ran].sort()).toEqual(['r1@2', 's1@1', 'w1@1', 'w2@1'])
  expect(await one(`select state, attempts, result from jobs_job where id = 'd1'`)).toEqual({
    state: 'done',
    attempts: 1,
    result: { old: true },
  })

  // The table protocol's trigger is the new version's: a careless write fails the job, and the write itself lands.
  await t.pool.query(`update jobs_job set max_attempts = 0 where id = 'bad'`)
  expect(await one(`select state, error from jobs_job where id = 'bad'`)).toMatchObject({
    state: 'failed',
    error: expect.stringContaining('max_attempts'),
  })
  await Promise.all(workers.splice(0).map((worker) => worker.stop()))
  expect(await queueCounts(t.db, 'upgraded')).toMatchObject({ waiting: 0, scheduled: 0, running: 0, done: 5, failed: 1 })
  expect(await one(`select count(*)::int as n from jobs_job where owner is not null`)).toEqual({ n: 0 })
  expect(await one(`select count(*)::int as n from jobs_lease`)).toEqual({ n: 0 })
})
