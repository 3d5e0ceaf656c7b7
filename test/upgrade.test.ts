/**
 * Apps upgrade as a user would, on both dialects, and every job ends exactly once.
 *
 * From jobs_worker to jobs_lease (the version before named the workers' rows jobs_worker; this one renames it and adds
 * `host` and `pid`): an app whose own migrations folder ends at the version before (the project's, snapshots and all),
 * with the triggers that version's engine installed and jobs waiting, scheduled, done, and running under three workers
 * of that version: one that the upgrade stops first (as docs/operating.md says), one left running through it, and one
 * that had crashed. The app takes the new schema, runs `drizzle-kit generate` exactly as docs/operating.md says to
 * without a terminal (its one question, whether jobs_lease is new or jobs_worker renamed, answered: renamed), runs
 * the migration it wrote, and starts the new version's worker. The stopped worker's run ended once, by it; the
 * worker left running keeps its lease through the rename until its row expires (it can renew no more: jobs_worker is
 * gone), then its run is taken back and runs again, and its late end changes nothing; the crashed worker's run is
 * taken back at once; the others run once.
 *
 * From one lease row per job (two versions back): the database holds the tables and triggers of that version, with
 * jobs waiting, scheduled, running under a lease row of a worker that was stopped, and done. It applies the
 * migrations from there and starts the new version's workers: the waiting and scheduled jobs run once, the one that
 * was running has no worker after the migration and is taken back as an abandoned run and runs once more, the done
 * one is left as it was, the counters agree with the rows, and the table protocol's trigger (whose old version wrote
 * the jobs_lease of one row per job) still fails a careless write.
 */
import { execFileSync, spawn } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { stripVTControlCharacters } from 'node:util'
import { join, resolve } from 'node:path'
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3'
import { migrate as migrateSqlite } from 'drizzle-orm/better-sqlite3/migrator'
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator'
import { afterEach, expect, test } from 'vitest'
import { defineQueue, queueCounts, work, type Worker } from '../src/index.js'
import { MIGRATIONS, openDb, removeTempDirs, tempDir } from './helpers/db.js'
import { freshPgDb, PG_MIGRATIONS, type TestPgDb } from './helpers/pg.js'
import { waitFor } from './helpers/wait.js'

const ROOT = resolve(import.meta.dirname, '..')
const DRIZZLE_KIT = join(ROOT, 'node_modules', '.bin', 'drizzle-kit')
const FIXTURES = resolve(import.meta.dirname, 'fixtures', 'upgrade')
/** The migration that renames jobs_worker to jobs_lease, and the one before that brought one lease row per worker, in each dialect's folder. */
const RENAME_TAG = 'jobs_lease'
/** The migration after the rename: the column of a job's trace context. */
const TRACE_TAG = 'trace_context'
/** The migration of jobs that wait (parked runs, events, unique keys, debounce), later still. */
const WAIT_TAG = 'jobs_that_wait'
const PER_WORKER_TAG = 'lease_per_worker'
/** A worker of the version of one lease row per job, which was stopped (or crashed) while it ran a job. */
const OLD_OWNER = 'old-host/4242/1/0123456789ab/1'
/**
 * Workers of the version before the rename: one that the upgrade stops first, one left running through it, one that
 * crashed. Their host is not this one, so no worker here takes their processes for gone.
 */
const STOPPED = 'old-host/4242/1/0123456789ab/1'
const LIVE = 'old-host/4243/1/0123456789ab/1'
const CRASHED = 'old-host/4244/1/0123456789ab/1'
/** This process's workers' host, as their rows name it (with the pid namespace after an `@`, where Linux shows one). */
const THIS_HOST = expect.stringMatching(new RegExp(`^${hostname().replaceAll('.', '\\.')}(@|$)`))

const workers: Worker[] = []
const pgDbs: TestPgDb[] = []
const apps: string[] = []

afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop()))
  await Promise.all(pgDbs.splice(0).map((db) => db.drop()))
  for (const app of apps.splice(0)) rmSync(app, { recursive: true, force: true })
  removeTempDirs()
})

/**
 * A copy of a migrations folder holding only the migrations before `tag`: the tables an app had before it, and the
 * snapshot drizzle-kit generate starts from (the later migrations' files are gone).
 */
function migrationsBefore(folder: string, tag: string, into = join(tempDir('drizzle-jobs-migrations-'), 'migrations')): string {
  cpSync(folder, into, { recursive: true })
  const journalFile = join(into, 'meta', '_journal.json')
  const journal = JSON.parse(readFileSync(journalFile, 'utf8')) as { entries: { tag: string }[] }
  const at = journal.entries.findIndex((entry) => entry.tag.endsWith(`_${tag}`))
  expect(at, `the migration ${tag} in ${folder}`).toBeGreaterThan(0)
  for (const { tag: later } of journal.entries.slice(at)) {
    rmSync(join(into, `${later}.sql`))
    rmSync(join(into, 'meta', `${later.slice(0, later.indexOf('_'))}_snapshot.json`))
  }
  journal.entries = journal.entries.slice(0, at)
  writeFileSync(journalFile, JSON.stringify(journal))
  return into
}

/** The SQL of the project's migration `tag` in `folder`, as drizzle-kit wrote it. */
function migrationSql(folder: string, tag: string): string {
  const file = readdirSync(folder).find((name) => name.endsWith(`_${tag}.sql`))
  expect(file, `the migration ${tag} in ${folder}`).toBeDefined()
  return readFileSync(join(folder, file!), 'utf8')
}

/** The statements of a migration, sorted: drizzle-kit writes one migration for the changes of several releases. */
function statementsOf(sql: string): string[] {
  return sql
    .split('--> statement-breakpoint')
    .map((statement) => statement.trim())
    .filter(Boolean)
    .sort()
}

/** The statements of the project's migrations from the rename on, sorted. */
function statementsSince(folder: string): string[] {
  return statementsOf([RENAME_TAG, TRACE_TAG, WAIT_TAG].map((tag) => migrationSql(folder, tag)).join('--> statement-breakpoint'))
}

/**
 * An app on the tables of the version before the rename: inside the repository (drizzle-kit and drizzle-orm resolve
 * from its node_modules), its migrations folder `drizzle/` ending at that version, its drizzle-kit config taking the
 * new version's schema, as `export * from 'drizzle-jobs/schema'` does once the package is upgraded.
 */
function appBeforeRename(dialect: 'sqlite' | 'postgresql'): { app: string; migrations: string } {
  mkdirSync(join(ROOT, '.tmp'), { recursive: true })
  const app = mkdtempSync(join(ROOT, '.tmp', 'upgrading-app-'))
  apps.push(app)
  const migrations = migrationsBefore(dialect === 'sqlite' ? MIGRATIONS : PG_MIGRATIONS, RENAME_TAG, join(app, 'drizzle'))
  const schema = join(ROOT, 'src', 'schema', dialect === 'sqlite' ? 'index.ts' : 'pg.ts')
  writeFileSync(
    join(app, 'drizzle.config.ts'),
    `import { defineConfig } from 'drizzle-kit'
export default defineConfig({ dialect: '${dialect}', schema: ${JSON.stringify(schema)}, out: './drizzle' })
`,
  )
  return { app, migrations }
}

/**
 * Runs drizzle-kit generate in `app` as docs/operating.md says to without a terminal, with the project's drizzle-kit
 * for `npx drizzle-kit`: under util-linux's `script`, in a terminal made raw, answering each of its two questions as
 * it is asked: jobs_event is a table created (Enter, the first choice), and jobs_lease is jobs_worker renamed (↓,
 * Enter: the second choice). A key sent before its question would be read by the one before, so each waits for its
 * question. A second run, with no terminal and no keys, finds nothing to do: the snapshot it wrote is the new
 * schema's. Answers the SQL it wrote.
 */
async function generateWithoutTerminal(app: string): Promise<string> {
  const folder = join(app, 'drizzle')
  const before = new Set(readdirSync(folder))
  const child = spawn('script', ['-qec', `stty raw -echo; ${DRIZZLE_KIT} generate`, '/dev/null'], { cwd: app })
  const questions = [
    { asked: /Is jobs_event table created or renamed/, keys: '\r', answered: false },
    { asked: /Is jobs_lease table created or renamed/, keys: '\u001b[B\r', answered: false },
  ]
  let printed = ''
  child.stdout.on('data', (chunk: Buffer) => {
    printed += chunk.toString()
    const text = stripVTControlCharacters(printed)
    for (const question of questions) {
      if (question.answered || !question.asked.test(text)) continue
      question.answered = true
      child.stdin.write(question.keys)
    }
  })
  const exit = await new Promise<number | null>((resolveExit, rejectExit) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      rejectExit(new Error(`drizzle-kit generate did not finish in 60 s; it printed:\n${printed}`))
    }, 60_000)
    child.on('exit', (code) => {
      clearTimeout(timer)
      resolveExit(code)
    })
  })
  expect(exit, printed).toBe(0)
  expect(
    questions.filter((question) => !question.answered),
    'the questions drizzle-kit did not ask',
  ).toEqual([])
  expect(printed).toMatch(/jobs_worker › jobs_lease .*table will be renamed/)
  const written = readdirSync(folder).filter((file) => !before.has(file) && file.endsWith('.sql'))
  expect(written).toHaveLength(1)
  const again = execFileSync(DRIZZLE_KIT, ['generate'], { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  expect(again).toMatch(/No schema changes/)
  return readFileSync(join(folder, written[0]!), 'utf8')
}

/** The queue the upgraded workers run: a short backoff, so that a run taken back runs again at once. */
const upgraded = defineQueue<{ n: number }>('upgraded', { backoff: { initial: '10ms', max: '10ms' } })

/** Runs every due job of the queue with a new version's worker; answers each run as `id@attempt`, and when each job's last run started. */
function runEveryJob(db: Parameters<typeof work>[0]): { ran: string[]; startedAt: Map<string, number> } {
  const ran: string[] = []
  const startedAt = new Map<string, number>()
  const handler = (_value: { n: number }, run: { id: string; attempt: number }) => {
    startedAt.set(run.id, Date.now())
    ran.push(`${run.id}@${run.attempt}`)
  }
  workers.push(work(db as never, upgraded, handler, { pollInterval: '20ms' }))
  return { ran, startedAt }
}

test('upgrade [sqlite] from jobs_worker to jobs_lease as an app upgrades (stop, the new schema, drizzle-kit generate without a terminal, migrate, start): every job ends exactly once, a worker left running keeps its lease until its row expires', async () => {
  const { app, migrations } = appBeforeRename('sqlite')
  const { client, db } = openDb(join(app, 'app.db'))
  try {
    migrateSqlite(db, { migrationsFolder: migrations })
    // What the version before left: its engine's triggers, its workers' rows and its jobs, written as its engine wrote them.
    client.exec(readFileSync(join(FIXTURES, 'sqlite-engine-jobs-worker.sql'), 'utf8'))
    const now = Date.now()
    const add = client.prepare(`insert into jobs_job (queue, id, value, state, attempts, owner, run_at, created_at, finished_at, result)
      values ('upgraded', ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
    add.run('w1', '{"n":1}', 'waiting', 0, null, now, now, null, null)
    add.run('w2', '{"n":2}', 'waiting', 0, null, now, now, null, null)
    add.run('s1', '{"n":3}', 'scheduled', 0, null, now + 200, now, null, null)
    add.run('r1', '{"n":4}', 'running', 1, STOPPED, now, now, null, null)
    add.run('r2', '{"n":5}', 'running', 1, LIVE, now, now, null, null)
    add.run('r3', '{"n":6}', 'running', 1, CRASHED, now, now, null, null)
    add.run('d1', '{"n":7}', 'done', 1, null, now, now, now, '{"old":true}')
    // The version before's protocol (its docs/tables.md): a worker renews its row, ends a run fenced by it.
    const renew = (owner: string, until: number) =>
      client
        .prepare(
          `insert into jobs_worker (owner, expires_at) values (?, ?) on conflict (owner) do update set expires_at = excluded.expires_at`,
        )
        .run(owner, until)
    const end = (id: string, owner: string) =>
      client
        .prepare(`update jobs_job set state = 'done', finished_at = ?, result = ?, error = null, owner = null
          where queue = 'upgraded' and id = ? and state = 'running' and owner = ? and attempts = 1`)
        .run(Date.now(), JSON.stringify({ by: owner }), id, owner).changes
    renew(STOPPED, now + 30_000)
    renew(LIVE, now + 30_000)
    renew(CRASHED, now - 1_000)

    // 1. Stop the workers: the one stopped ends its run, then deletes its row, as stop() of the version before does.
    expect(end('r1', STOPPED)).toBe(1)
    client.prepare(`delete from jobs_worker where owner = ?`).run(STOPPED)
    // 2. The new schema, and drizzle-kit generate: the rename and the later changes, as the project's own migrations have them.
    expect(statementsOf(await generateWithoutTerminal(app))).toEqual(statementsSince(MIGRATIONS))
    // The worker left running renews its row as the migration begins.
    const liveUntil = Date.now() + 2_000
    renew(LIVE, liveUntil)
    // 3. drizzle-kit migrate: the rows are kept, and the leases with them.
    migrateSqlite(drizzleSqlite({ client }), { migrationsFolder: migrations })
    expect(client.prepare(`select owner, host, pid, expires_at as expiresAt from jobs_lease order by owner`).all()).toEqual([
      { owner: LIVE, host: null, pid: null, expiresAt: liveUntil },
      { owner: CRASHED, host: null, pid: null, expiresAt: now - 1_000 },
    ])
    expect(() => renew(LIVE, Date.now() + 30_000)).toThrow(/no such table: jobs_worker/)

    // 4. Start the new version.
    const { ran, startedAt } = runEveryJob(db)
    const state = (id: string) => client.prepare(`select state from jobs_job where id = ?`).pluck().get(id)
    await waitFor(() => ['w1', 'w2', 's1', 'r2', 'r3'].every((id) => state(id) === 'done'), 'every job the upgrade found to end', 20_000)
    expect([...ran].sort()).toEqual(['r2@2', 'r3@2', 's1@1', 'w1@1', 'w2@1'])
    expect(startedAt.get('r2'), 'the run left running was taken back only once its row expired').toBeGreaterThanOrEqual(liveUntil)
    // The run left running ends late: fenced by its attempt, its end changes nothing.
    expect(end('r2', LIVE)).toBe(0)
    expect(client.prepare(`select id, attempts, result from jobs_job where id in ('r1', 'r2', 'd1') order by id`).all()).toEqual([
      { id: 'd1', attempts: 1, result: '{"old":true}' },
      { id: 'r1', attempts: 1, result: JSON.stringify({ by: STOPPED }) },
      { id: 'r2', attempts: 2, result: null },
    ])
    expect(client.prepare(`select host, pid from jobs_lease where host is not null`).all()).toEqual([{ host: THIS_HOST, pid: process.pid }])
    await Promise.all(workers.splice(0).map((worker) => worker.stop()))
    expect(queueCounts(db, 'upgraded')).toMatchObject({ waiting: 0, scheduled: 0, running: 0, done: 7, failed: 0 })
    expect(client.prepare(`select count(*) from jobs_job where owner is not null`).pluck().get()).toBe(0)
    expect(client.prepare(`select count(*) from jobs_lease where host is not null`).pluck().get()).toBe(0)
  } finally {
    client.close()
  }
})

test('upgrade [postgres] from jobs_worker to jobs_lease as an app upgrades (stop, the new schema, drizzle-kit generate without a terminal, migrate, start): every job ends exactly once, a worker left running keeps its lease until its row expires', async () => {
  const { app, migrations } = appBeforeRename('postgresql')
  const t = await freshPgDb({ migrate: false })
  pgDbs.push(t)
  const query = async <T>(sql: string, ...params: unknown[]): Promise<T[]> => (await t.pool.query(sql, params)).rows as T[]
  await migratePg(t.db, { migrationsFolder: migrations })
  // What the version before left: its engine's triggers, its workers' rows and its jobs, written as its engine wrote them.
  await t.pool.query(readFileSync(join(FIXTURES, 'pg-engine-jobs-worker.sql'), 'utf8'))
  await query(
    `insert into jobs_job (queue, id, value, state, attempts, owner, run_at, finished_at, result) values
    ('upgraded', 'w1', '{"n":1}', 'waiting', 0, null, now(), null, null),
    ('upgraded', 'w2', '{"n":2}', 'waiting', 0, null, now(), null, null),
    ('upgraded', 's1', '{"n":3}', 'scheduled', 0, null, now() + interval '200 milliseconds', null, null),
    ('upgraded', 'r1', '{"n":4}', 'running', 1, $1, now(), null, null),
    ('upgraded', 'r2', '{"n":5}', 'running', 1, $2, now(), null, null),
    ('upgraded', 'r3', '{"n":6}', 'running', 1, $3, now(), null, null),
    ('upgraded', 'd1', '{"n":7}', 'done', 1, null, now(), now(), '{"old":true}')`,
    STOPPED,
    LIVE,
    CRASHED,
  )
  // The version before's protocol (its docs/postgres.md): a worker renews its row, ends a run fenced by it.
  const renew = (owner: string, until: number) =>
    query(
      `insert into jobs_worker (owner, expires_at) values ($1, to_timestamp($2::float8 / 1000))
       on conflict (owner) do update set expires_at = excluded.expires_at`,
      owner,
      until,
    )
  const end = async (id: string, owner: string) =>
    (
      await t.pool.query(
        `update jobs_job set state = 'done', finished_at = now(), result = $3::jsonb, error = null, owner = null
         where queue = 'upgraded' and id = $1 and state = 'running' and owner = $2 and attempts = 1`,
        [id, owner, JSON.stringify({ by: owner })],
      )
    ).rowCount
  const now = Date.now()
  await renew(STOPPED, now + 30_000)
  await renew(LIVE, now + 30_000)
  await renew(CRASHED, now - 1_000)

  // 1. Stop the workers: the one stopped ends its run, then deletes its row, as stop() of the version before does.
  expect(await end('r1', STOPPED)).toBe(1)
  await query(`delete from jobs_worker where owner = $1`, STOPPED)
  // 2. The new schema, and drizzle-kit generate: the rename and the later changes, as the project's own migrations have them.
  expect(statementsOf(await generateWithoutTerminal(app))).toEqual(statementsSince(PG_MIGRATIONS))
  // The worker left running renews its row as the migration begins.
  const liveUntil = Date.now() + 2_000
  await renew(LIVE, liveUntil)
  // 3. drizzle-kit migrate: the rows are kept, and the leases with them.
  await migratePg(t.db, { migrationsFolder: migrations })
  expect(
    await query(
      `select owner, host, pid, round(extract(epoch from expires_at) * 1000)::float8 as "expiresAt" from jobs_lease order by owner`,
    ),
  ).toEqual([
    { owner: LIVE, host: null, pid: null, expiresAt: liveUntil },
    { owner: CRASHED, host: null, pid: null, expiresAt: now - 1_000 },
  ])
  await expect(renew(LIVE, Date.now() + 30_000)).rejects.toThrow(/relation "jobs_worker" does not exist/)

  // 4. Start the new version.
  const { ran, startedAt } = runEveryJob(t.db)
  const done = async () =>
    (
      await query<{ n: number }>(`select count(*)::int as n from jobs_job where id in ('w1', 'w2', 's1', 'r2', 'r3') and state = 'done'`)
    )[0]!.n
  await waitFor(async () => (await done()) === 5, 'every job the upgrade found to end', 20_000)
  expect([...ran].sort()).toEqual(['r2@2', 'r3@2', 's1@1', 'w1@1', 'w2@1'])
  expect(startedAt.get('r2'), 'the run left running was taken back only once its row expired').toBeGreaterThanOrEqual(liveUntil)
  // The run left running ends late: fenced by its attempt, its end changes nothing.
  expect(await end('r2', LIVE)).toBe(0)
  expect(await query(`select id, attempts, result from jobs_job where id in ('r1', 'r2', 'd1') order by id`)).toEqual([
    { id: 'd1', attempts: 1, result: { old: true } },
    { id: 'r1', attempts: 1, result: { by: STOPPED } },
    { id: 'r2', attempts: 2, result: null },
  ])
  expect(await query(`select host, pid from jobs_lease where host is not null`)).toEqual([{ host: THIS_HOST, pid: process.pid }])
  await Promise.all(workers.splice(0).map((worker) => worker.stop()))
  expect(await queueCounts(t.db, 'upgraded')).toMatchObject({ waiting: 0, scheduled: 0, running: 0, done: 7, failed: 0 })
  expect(await query(`select count(*)::int as n from jobs_job where owner is not null`)).toEqual([{ n: 0 }])
  expect(await query(`select count(*)::int as n from jobs_lease where host is not null`)).toEqual([{ n: 0 }])
})

test('upgrade [sqlite] from one lease row per job: after the drizzle-kit migration every job ends exactly once, the running one taken back as abandoned', async () => {
  const file = join(tempDir(), 'app.db')
  const { client, db } = openDb(file)
  try {
    migrateSqlite(db, { migrationsFolder: migrationsBefore(MIGRATIONS, PER_WORKER_TAG) })
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

    const { ran } = runEveryJob(db)
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
  await migratePg(t.db, { migrationsFolder: migrationsBefore(PG_MIGRATIONS, PER_WORKER_TAG) })
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

  const { ran } = runEveryJob(t.db)
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
