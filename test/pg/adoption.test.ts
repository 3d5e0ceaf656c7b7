/**
 * Adoption on PostgreSQL: an existing Drizzle app merges the queue's tables into its schema with
 * `export * from 'drizzle-jobs/pg/schema'` beside its own pgTable, runs `drizzle-kit generate` and
 * `drizzle-kit migrate` against its database, and finds the queue's tables there next to its own; on a server,
 * and on PGlite (drizzle-kit's `driver: 'pglite'`). The package is resolved by name, through package.json's
 * exports, from the built dist/.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { PGlite } from '@electric-sql/pglite'
import { sql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/pglite'
import { defineQueue, enqueue, getJob, work } from '../../src/index.js'
import { freshPgDb, type TestPgDb } from '../helpers/pg.js'
import { waitFor } from '../helpers/wait.js'

const ROOT = resolve(import.meta.dirname, '../..')
const BIN = join(ROOT, 'node_modules', '.bin')
mkdirSync(join(ROOT, '.tmp'), { recursive: true })
// Inside the repository, so the apps resolve drizzle-orm, drizzle-kit, pg and PGlite from its node_modules.
const app = mkdtempSync(join(ROOT, '.tmp', 'adopting-pg-app-'))
const pgliteApp = mkdtempSync(join(ROOT, '.tmp', 'adopting-pglite-app-'))
let database: TestPgDb
beforeAll(async () => {
  // The app's database starts empty: its own migrations make every table.
  database = await freshPgDb({ migrate: false })
})
afterAll(async () => {
  rmSync(app, { recursive: true, force: true })
  rmSync(pgliteApp, { recursive: true, force: true })
  await database?.drop()
})

function write(path: string, text: string, dir = app): void {
  mkdirSync(resolve(dir, path, '..'), { recursive: true })
  writeFileSync(join(dir, path), text)
}

/** Runs a command of node_modules/.bin in the app; when it fails, the error carries what it printed. */
function run(command: string, args: string[], dir = app): string {
  try {
    return execFileSync(join(BIN, command), args, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string }
    throw new Error(`${[command, ...args].join(' ')} failed:\n${stdout ?? ''}${stderr ?? ''}`)
  }
}

test('an existing Drizzle app on PostgreSQL adopts the queue with export *, drizzle-kit generate and migrate', async () => {
  write('package.json', JSON.stringify({ name: 'adopting-pg-app', type: 'module', private: true }))
  mkdirSync(join(app, 'node_modules'))
  symlinkSync(ROOT, join(app, 'node_modules', 'drizzle-jobs'), 'dir')
  write(
    'src/db/schema.ts',
    `
import { integer, pgTable, serial, text } from 'drizzle-orm/pg-core'
export * from 'drizzle-jobs/pg/schema'
export const messages = pgTable('messages', {
  id: serial('id').primaryKey(),
  text: text('text').notNull(),
  replyTo: integer('reply_to'),
})
`,
  )
  write(
    'drizzle.config.ts',
    `
import { defineConfig } from 'drizzle-kit'
export default defineConfig({ dialect: 'postgresql', schema: './src/db/schema.ts', out: './drizzle', dbCredentials: { url: ${JSON.stringify(database.url)} } })
`,
  )

  run('drizzle-kit', ['generate'])
  const migrations = readdirSync(join(app, 'drizzle')).filter((file) => file.endsWith('.sql'))
  expect(migrations).toHaveLength(1)
  const sql = readFileSync(join(app, 'drizzle', migrations[0]!), 'utf8')
  for (const table of ['jobs_queue', 'jobs_job', 'jobs_step', 'jobs_event', 'jobs_lease', 'jobs_schedule', 'jobs_count', 'messages'])
    expect(sql).toContain(`CREATE TABLE "${table}"`)
  expect(sql).toContain("WHERE state in ('waiting', 'scheduled')")

  run('drizzle-kit', ['migrate'])
  const tables = await database.pool.query<{ table_name: string }>(
    `select table_name from information_schema.tables where table_schema = 'public' order by table_name`,
  )
  expect(tables.rows.map((row) => row.table_name)).toEqual([
    'jobs_count',
    'jobs_event',
    'jobs_job',
    'jobs_lease',
    'jobs_queue',
    'jobs_schedule',
    'jobs_step',
    'messages',
  ])
  // The app's row and the job that follows it up commit in one transaction, in plain SQL.
  await database.pool.query(`
    begin;
    insert into messages (text) values ('hello');
    insert into jobs_job (queue, id, value) values ('replies', 'reply:1', '{"messageId":1}');
    commit;
  `)
  const job = await database.pool.query(`select queue, id, value, state from jobs_job`)
  expect(job.rows).toEqual([{ queue: 'replies', id: 'reply:1', value: { messageId: 1 }, state: 'waiting' }])

  // A second generate finds nothing to do: the schema the package ships is stable.
  expect(run('drizzle-kit', ['generate'])).toMatch(/No schema changes/)
})

test("an existing Drizzle app on PGlite adopts the queue with drizzle-kit's pglite driver, then adds a job with its row and runs it", async () => {
  write('package.json', JSON.stringify({ name: 'adopting-pglite-app', type: 'module', private: true }), pgliteApp)
  mkdirSync(join(pgliteApp, 'node_modules'))
  symlinkSync(ROOT, join(pgliteApp, 'node_modules', 'drizzle-jobs'), 'dir')
  write(
    'src/db/schema.ts',
    `
import { pgTable, serial, text } from 'drizzle-orm/pg-core'
export * from 'drizzle-jobs/pg/schema'
export const messages = pgTable('messages', { id: serial('id').primaryKey(), text: text('text').notNull() })
`,
    pgliteApp,
  )
  write(
    'drizzle.config.ts',
    `
import { defineConfig } from 'drizzle-kit'
export default defineConfig({ dialect: 'postgresql', driver: 'pglite', schema: './src/db/schema.ts', out: './drizzle', dbCredentials: { url: './data' } })
`,
    pgliteApp,
  )
  run('drizzle-kit', ['generate'], pgliteApp)
  run('drizzle-kit', ['migrate'], pgliteApp)

  const client = new PGlite(join(pgliteApp, 'data'))
  try {
    const db = drizzle({ client })
    const replies = defineQueue<{ messageId: number }, { reply: string }>('replies')
    await db.transaction(async (tx) => {
      const [message] = await tx.execute<{ id: number }>(sql`insert into messages (text) values ('hello') returning id`).then((r) => r.rows)
      await enqueue(tx, replies, { messageId: message!.id }, { id: `reply:${message!.id}` })
    })
    const worker = work(db, replies, (value) => ({ reply: `to ${value.messageId}` }))
    try {
      await waitFor(async () => (await getJob(db, replies, 'reply:1'))?.state === 'done', 'the job to run')
    } finally {
      await worker.stop()
    }
    expect((await getJob(db, replies, 'reply:1'))?.result).toEqual({ reply: 'to 1' })
  } finally {
    await client.close()
  }
})
