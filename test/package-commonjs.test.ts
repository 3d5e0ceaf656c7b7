/**
 * A CommonJS app loads the package: plain `require` of the main entry and of every subpath under `node`
 * (Node ≥ 20.19 loads ES modules with require), and `import` syntax in a TypeScript file that tsx runs as
 * CommonJS, with its types checked by tsc for such a project. The app resolves the package by name from its
 * node_modules, a link to this repository, so what it loads is the built dist/ through package.json's exports.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, beforeAll, expect, test } from 'vitest'

const ROOT = resolve(import.meta.dirname, '..')
const BIN = join(ROOT, 'node_modules', '.bin')
const MIGRATIONS = join(ROOT, 'drizzle')
mkdirSync(join(ROOT, '.tmp'), { recursive: true })
// Inside the repository, so the app resolves drizzle-orm and better-sqlite3 from its node_modules.
const app = mkdtempSync(join(ROOT, '.tmp', 'commonjs-app-'))
afterAll(() => rmSync(app, { recursive: true, force: true }))

beforeAll(() => {
  // What `npm init -y` writes, give or take: no "type" means CommonJS, and it is spelled out here.
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'commonjs-app', version: '1.0.0', type: 'commonjs', private: true }))
  mkdirSync(join(app, 'node_modules'))
  symlinkSync(ROOT, join(app, 'node_modules', 'drizzle-jobs'), 'dir')
})

/** Runs a command in the app; when it fails, the error carries what it printed (tsc prints its errors on stdout). */
function run(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string }
    throw new Error(`${[command, ...args].join(' ')} failed:\n${stdout ?? ''}${stderr ?? ''}`)
  }
}

function jobRow(file: string, id: string): { state: string; value: string; result: string | null } | undefined {
  const client = new Database(file, { readonly: true })
  try {
    return client.prepare('select state, value, result from jobs_job where queue = ? and id = ?').get('mail', id) as
      | { state: string; value: string; result: string | null }
      | undefined
  } finally {
    client.close()
  }
}

test('a CommonJS app requires the main entry and every subpath with plain node, and adds and runs a job on a SQLite file', () => {
  writeFileSync(
    join(app, 'main.js'),
    `
const Database = require('better-sqlite3')
const { drizzle } = require('drizzle-orm/better-sqlite3')
const { migrate } = require('drizzle-orm/better-sqlite3/migrator')
const { defineQueue, enqueue, getJob } = require('drizzle-jobs')
const schema = require('drizzle-jobs/schema')
const pgSchema = require('drizzle-jobs/pg/schema')
const { getTableName, is } = require('drizzle-orm')
const { PgTable } = require('drizzle-orm/pg-core')
const { jobEvents } = require('drizzle-jobs/sse')
const { drain, assertEnqueued } = require('drizzle-jobs/testing')
const { dashboard } = require('drizzle-jobs/dashboard')

async function main() {
  const [file, migrations] = process.argv.slice(2)
  const db = drizzle(new Database(file), { schema })
  migrate(db, { migrationsFolder: migrations })
  const mail = defineQueue('mail')
  db.transaction((tx) => { enqueue(tx, mail, { to: 'ada@example.com' }, { id: 'welcome' }) })
  assertEnqueued(db, mail, { id: 'welcome' })
  const drained = await drain(db, mail, ({ to }) => ({ sent: to }))
  const page = await dashboard(db).fetch(new Request('http://localhost/'))
  console.log(JSON.stringify({
    drained: drained.runs.length,
    state: getJob(db, mail, 'welcome').state,
    tables: Object.keys(schema).sort(),
    pgTables: Object.entries(pgSchema).filter(([, table]) => is(table, PgTable)).map(([, table]) => getTableName(table)).sort(),
    sse: typeof jobEvents,
    dashboard: page.status,
  }))
}
main().catch((error) => { console.error(error); process.exit(1) })
`,
  )
  const file = join(app, 'required.db')
  const printed = JSON.parse(run(process.execPath, ['main.js', file, MIGRATIONS]).trim().split('\n').at(-1)!) as Record<string, unknown>
  expect(printed).toEqual({
    drained: 1,
    state: 'done',
    tables: ['jobsEvent', 'jobsJob', 'jobsLease', 'jobsQueue', 'jobsSchedule', 'jobsStep'],
    pgTables: ['jobs_count', 'jobs_event', 'jobs_job', 'jobs_lease', 'jobs_queue', 'jobs_schedule', 'jobs_step'],
    sse: 'function',
    dashboard: 200,
  })
  expect(jobRow(file, 'welcome')).toEqual({ state: 'done', value: '{"to":"ada@example.com"}', result: '{"sent":"ada@example.com"}' })
})

test('a CommonJS TypeScript app imports the package under tsx, tsc checks its types, and what tsc emits runs under node', () => {
  // The tables merged into the app's schemas with export *, as an app adopts them, on SQLite and on PostgreSQL.
  writeFileSync(
    join(app, 'schema.ts'),
    `
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core'
export * from 'drizzle-jobs/schema'
export const messages = sqliteTable('messages', { id: integer('id').primaryKey(), text: text('text').notNull() })
`,
  )
  writeFileSync(
    join(app, 'pg-schema.ts'),
    `
import { integer, pgTable, text } from 'drizzle-orm/pg-core'
export * from 'drizzle-jobs/pg/schema'
export const notes = pgTable('notes', { id: integer('id').primaryKey(), text: text('text').notNull() })
`,
  )
  writeFileSync(
    join(app, 'main.ts'),
    `
import Database from 'better-sqlite3'
import { eq, sql } from 'drizzle-orm'
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { defineQueue, enqueue, getJob, type Enqueued } from 'drizzle-jobs'
import { jobEvents } from 'drizzle-jobs/sse'
import { assertEnqueued } from 'drizzle-jobs/testing'
import { dashboard, type Dashboard } from 'drizzle-jobs/dashboard'
import * as schema from './schema'
import * as pgSchema from './pg-schema'

const [file, migrations] = process.argv.slice(2) as [string, string]
const db = drizzle(new Database(file), { schema })
migrate(db, { migrationsFolder: migrations })
db.run(sql\`create table messages (id integer primary key, text text not null)\`)
const mail = defineQueue<{ messageId: number }>('mail')
const added: Enqueued = db.transaction((tx) => {
  const message = tx.insert(schema.messages).values({ text: 'hello' }).returning().get()
  return enqueue(tx, mail, { messageId: message.id }, { id: 'digest' })
})
assertEnqueued(db, mail, { value: { messageId: 1 } })
const state: string | undefined = getJob(db, mail, 'digest')?.state
const handler: Dashboard['fetch'] = dashboard(db).fetch
// The PostgreSQL tables in a node-postgres database of the app's schema, which needs no server to build a query.
const pgDb = drizzlePg.mock({ schema: pgSchema })
const waiting: (typeof pgSchema.jobsJob.$inferSelect)['state'] = 'waiting'
const pgQuery: string = pgDb.select({ seq: pgSchema.jobsJob.seq }).from(pgSchema.jobsJob).where(eq(pgSchema.jobsJob.state, waiting)).toSQL().sql
console.log(JSON.stringify({
  id: added.id,
  state,
  // This file is CommonJS, as its package says: module and require are its own.
  commonjs: typeof module === 'object' && typeof require === 'function',
  sse: typeof jobEvents,
  fetch: typeof handler,
  pgQuery,
}))
`,
  )
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      // node20 (or nodenext) is how TypeScript models Node ≥ 20.19, where require() loads ES modules.
      compilerOptions: { module: 'node20', strict: true, outDir: 'out', esModuleInterop: true, skipLibCheck: true, types: ['node'] },
      files: ['main.ts', 'schema.ts', 'pg-schema.ts'],
    }),
  )
  const expected = {
    id: 'digest',
    state: 'waiting',
    commonjs: true,
    sse: 'function',
    fetch: 'function',
    pgQuery: 'select "seq" from "jobs_job" where "jobs_job"."state" = $1',
  }
  const printed = JSON.parse(
    run(join(BIN, 'tsx'), ['main.ts', join(app, 'tsx.db'), MIGRATIONS])
      .trim()
      .split('\n')
      .at(-1)!,
  ) as unknown
  expect(printed).toEqual(expected)
  expect(jobRow(join(app, 'tsx.db'), 'digest')).toEqual({ state: 'waiting', value: '{"messageId":1}', result: null })

  // The package's types take the app's own drizzle database, declared by drizzle-orm's CommonJS types, and
  // what tsc emits for the app, require() calls, runs under plain node.
  run(join(BIN, 'tsc'), ['-p', 'tsconfig.json'])
  const emitted = JSON.parse(
    run(process.execPath, ['out/main.js', join(app, 'tsc.db'), MIGRATIONS])
      .trim()
      .split('\n')
      .at(-1)!,
  ) as unknown
  expect(emitted).toEqual(expected)
  expect(jobRow(join(app, 'tsc.db'), 'digest')?.state).toBe('waiting')
})
