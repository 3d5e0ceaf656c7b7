/**
 * Adoption exactly as the README says: an existing Drizzle app merges the queue's tables into its schema with
 * `export * from 'drizzle-jobs/schema'`, runs `drizzle-kit generate` and `drizzle-kit migrate`, and then adds
 * and runs jobs through the package's public entry points (the built dist/, resolved by package name).
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { afterAll, expect, test } from 'vitest'

const ROOT = resolve(import.meta.dirname, '..')
const BIN = join(ROOT, 'node_modules', '.bin')
mkdirSync(join(ROOT, '.tmp'), { recursive: true })
// Inside the repository, so the app resolves drizzle-orm, drizzle-kit and better-sqlite3 from its node_modules.
const app = mkdtempSync(join(ROOT, '.tmp', 'adopting-app-'))
afterAll(() => rmSync(app, { recursive: true, force: true }))

function write(path: string, text: string): void {
  mkdirSync(resolve(app, path, '..'), { recursive: true })
  writeFileSync(join(app, path), text)
}

test('an existing Drizzle app adopts the queue with export *, drizzle-kit generate and migrate, then runs jobs', () => {
  write('package.json', JSON.stringify({ name: 'adopting-app', type: 'module', private: true }))
  mkdirSync(join(app, 'node_modules'))
  symlinkSync(ROOT, join(app, 'node_modules', 'drizzle-jobs'), 'dir')
  write(
    'src/db/schema.ts',
    `
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core'
export * from 'drizzle-jobs/schema'
export const messages = sqliteTable('messages', {
  id: integer('id').primaryKey(),
  text: text('text').notNull(),
  replyTo: integer('reply_to'),
})
`,
  )
  write(
    'drizzle.config.ts',
    `
import { defineConfig } from 'drizzle-kit'
export default defineConfig({ dialect: 'sqlite', schema: './src/db/schema.ts', out: './drizzle', dbCredentials: { url: './app.db' } })
`,
  )
  write(
    'src/main.ts',
    `
import Database from 'better-sqlite3'
import { eq } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { defineQueue, enqueue, work } from 'drizzle-jobs'
import * as schema from './db/schema.js'

const db = drizzle(new Database('app.db'), { schema })
const replies = defineQueue<{ messageId: number }>('replies', { attempts: 3 })
const id = db.transaction((tx) => {
  const msg = tx.insert(schema.messages).values({ text: 'hello' }).returning().get()
  enqueue(tx, replies, { messageId: msg.id }, { id: 'reply:' + msg.id })
  return msg.id
})
const worker = work(db, replies, ({ messageId }) => {
  const message = db.select().from(schema.messages).where(eq(schema.messages.id, messageId)).get()
  db.insert(schema.messages).values({ text: 'echo: ' + message!.text, replyTo: messageId }).run()
  return { replied: true }
})
const deadline = Date.now() + 20_000
while (db.select().from(schema.jobsJob).where(eq(schema.jobsJob.id, 'reply:' + id)).get()?.state !== 'done') {
  if (Date.now() > deadline) throw new Error('the reply job did not finish')
  await new Promise((resolve) => setTimeout(resolve, 10))
}
await worker.stop()
console.log(JSON.stringify(db.select().from(schema.messages).all()))
`,
  )
  const run = (command: string, args: string[]) =>
    execFileSync(join(BIN, command), args, { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })

  run('drizzle-kit', ['generate'])
  const migrations = readdirSync(join(app, 'drizzle')).filter((file) => file.endsWith('.sql'))
  expect(migrations).toHaveLength(1)
  const sql = readFileSync(join(app, 'drizzle', migrations[0]!), 'utf8')
  for (const table of ['jobs_queue', 'jobs_job', 'jobs_step', 'jobs_lease', 'messages']) expect(sql).toContain(`CREATE TABLE \`${table}\``)
  expect(sql).toContain("WHERE state in ('waiting', 'scheduled')")

  run('drizzle-kit', ['migrate'])
  const printed = run('tsx', ['src/main.ts']).trim().split('\n').at(-1)!
  expect(JSON.parse(printed)).toEqual([
    { id: 1, text: 'hello', replyTo: null },
    { id: 2, text: 'echo: hello', replyTo: 1 },
  ])
  // A second generate finds nothing to do: the schema the package ships is stable.
  expect(run('drizzle-kit', ['generate'])).toMatch(/No schema changes/)
})
