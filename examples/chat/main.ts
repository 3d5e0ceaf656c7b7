/**
 * The chat example: `npm run demo` (or `npx tsx examples/chat/main.ts`), on
 * an embedded SQLite file; with `DATABASE_URL=postgres://…` set, on that
 * PostgreSQL database instead (migrated at start as the file is).
 *
 *   --port 3000          where to listen (0: any free port); --host 127.0.0.1
 *   --db FILE            the SQLite file, created and migrated if needed (default examples/chat/chat.db);
 *                        not used when DATABASE_URL is set
 *   --processes N        web processes sharing the port and the database (default 1); each runs a worker,
 *                        and the queue's concurrency of 4 holds across all of them
 *   --model-ms MIN-MAX   how long the stand-in model takes per answer (default 2000-5000)
 *   --fail-rate R        its chance of failing part way (default 0.15)
 *   --slow-down-rate R   its chance of answering "slow down" (default 0.1)
 *   --slow-down-ms MS    how long "slow down" asks to wait (default 2000)
 *   --backoff DURATION   the first retry's wait (default 5s)
 *   --rate LIMIT/PER     the model's rate limit: replies started per window across every process
 *                        (default 60/1m); replies beyond it wait, and the page says so
 *
 * With several processes, a cluster primary migrates the database, starts the
 * web processes, starts a new one when one dies, and prints the URL once
 * all of them listen. A browser's connection may land on any of them:
 * watching a reply works from every one, progress included. Each web process
 * also runs a worker of the nightly summary schedule (summaries.ts).
 */
import cluster from 'node:cluster'
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { serve } from '@hono/node-server'
import type { Duration } from 'drizzle-jobs'
import { chatApp } from './app.js'
import { migrateChatDb, openChatDb } from './db.js'
import { migrateChatPg, openChatPg } from './db-pg.js'
import { standInModel } from './model.js'
import { parseReplyRate, replyQueue, startReplies } from './replies.js'
import type { ChatStore } from './store.js'
import { startSummaries } from './summaries.js'

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '3000' },
    host: { type: 'string', default: '127.0.0.1' },
    db: { type: 'string', default: resolve(import.meta.dirname, 'chat.db') },
    processes: { type: 'string', default: '1' },
    'model-ms': { type: 'string', default: '2000-5000' },
    'fail-rate': { type: 'string', default: '0.15' },
    'slow-down-rate': { type: 'string', default: '0.1' },
    'slow-down-ms': { type: 'string', default: '2000' },
    backoff: { type: 'string', default: '5s' },
    rate: { type: 'string', default: '60/1m' },
  },
})

const file = resolve(values.db)
const databaseUrl = process.env.DATABASE_URL || undefined
if (databaseUrl !== undefined && !/^postgres(?:ql)?:\/\//.test(databaseUrl)) {
  throw new Error('DATABASE_URL: expected a postgres:// URL (unset it to run on the SQLite file)')
}
const processes = wholeNumber(values.processes, '--processes', 1)
const replyRate = parseReplyRate(values.rate)
const port = wholeNumber(values.port, '--port', 0)

function wholeNumber(text: string, flag: string, min: number): number {
  const n = Number(text)
  if (!Number.isSafeInteger(n) || n < min) throw new Error(`${flag}: expected a whole number of at least ${min}, got '${text}'`)
  return n
}

/** Creates or brings up to date the chat's tables, once, before any web process starts. */
async function migrateChat(): Promise<void> {
  if (databaseUrl === undefined) migrateChatDb(file)
  else await migrateChatPg(databaseUrl)
}

function openChat(): ChatStore {
  return databaseUrl === undefined ? openChatDb(file) : openChatPg(databaseUrl)
}

/** Where the chat keeps its data, for the first line it prints: the file, or the database's URL without its password. */
function databaseName(): string {
  if (databaseUrl === undefined) return file
  const url = new URL(databaseUrl)
  if (url.password) url.password = '***'
  return url.href
}

/** One web process: the Hono app and a worker for replies, on its own connection to the database. */
function serveChat(onListening: (port: number) => void): void {
  const [minMs, maxMs] = values['model-ms'].split('-').map(Number) as [number, number]
  const model = standInModel({
    minMs,
    maxMs: maxMs ?? minMs,
    failRate: Number(values['fail-rate']),
    slowDownRate: Number(values['slow-down-rate']),
    slowDownMs: Number(values['slow-down-ms']),
  })
  const store = openChat()
  const queue = replyQueue(values.backoff as Duration, replyRate)
  const worker = startReplies(store, queue, model)
  const summaries = startSummaries(store)
  const server = serve({ fetch: chatApp(store, queue).fetch, port, hostname: values.host }, (info) => onListening(info.port))
  const shutDown = async (): Promise<void> => {
    server.close()
    await Promise.all([worker.stop({ timeout: '5s' }), summaries.stop({ timeout: '5s' })])
    await store.close()
    process.exit(0)
  }
  process.once('SIGTERM', () => void shutDown())
  process.once('SIGINT', () => void shutDown())
}

function announce(listeningPort: number): void {
  const url = `http://${values.host.includes(':') ? `[${values.host}]` : values.host}:${listeningPort}/`
  console.log(`drizzle-jobs chat: ${url} (${processes} process${processes === 1 ? '' : 'es'}, database ${databaseName()})`)
}

if (processes === 1) {
  await migrateChat()
  serveChat(announce)
} else if (cluster.isPrimary) {
  await migrateChat()
  let stopping = false
  const listening = new Set<number>()
  let announced = false
  cluster.on('listening', (worker, address) => {
    listening.add(worker.id)
    if (!announced && listening.size >= processes) {
      announced = true
      announce(address.port)
    }
  })
  cluster.on('exit', (worker, code, signal) => {
    listening.delete(worker.id)
    if (stopping) return
    console.log(`web process ${worker.process.pid} ended (${signal ?? code}); starting another`)
    cluster.fork()
  })
  const alive = () => Object.values(cluster.workers ?? {}).filter((worker) => worker && !worker.isDead())
  const stopAll = (): void => {
    if (stopping) return
    stopping = true
    for (const worker of alive()) worker!.process.kill('SIGTERM')
    const exitWhenAllGone = (): void => {
      if (alive().length === 0) process.exit(0)
    }
    cluster.on('exit', exitWhenAllGone)
    exitWhenAllGone()
    // A web process that does not stop within its own grace is not waited for.
    setTimeout(() => process.exit(0), 10_000).unref()
  }
  process.on('SIGTERM', stopAll)
  process.on('SIGINT', stopAll)
  for (let i = 0; i < processes; i++) cluster.fork()
} else {
  serveChat(() => {})
}
