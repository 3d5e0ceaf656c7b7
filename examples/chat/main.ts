/**
 * The chat example: `npm run demo` (or `npx tsx examples/chat/main.ts`).
 *
 *   --port 3000          where to listen (0: any free port); --host 127.0.0.1
 *   --db FILE            the SQLite file, created and migrated if needed (default examples/chat/chat.db)
 *   --processes N        web processes sharing the port and the file (default 1); each runs a worker,
 *                        and the queue's concurrency of 4 holds across all of them
 *   --model-ms MIN-MAX   how long the stand-in model takes per answer (default 2000-5000)
 *   --fail-rate R        its chance of failing part way (default 0.15)
 *   --slow-down-rate R   its chance of answering "slow down" (default 0.1)
 *   --slow-down-ms MS    how long "slow down" asks to wait (default 2000)
 *   --backoff DURATION   the first retry's wait (default 5s)
 *
 * With several processes, a cluster primary migrates the file, starts the
 * web processes, starts a new one when one dies, and prints the URL once
 * all of them listen. A browser's connection may land on any of them:
 * watching a reply works from every one, progress included.
 */
import cluster from 'node:cluster'
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { serve } from '@hono/node-server'
import type { Duration } from 'drizzle-jobs'
import { chatApp } from './app.js'
import { migrateChatDb, openChatDb } from './db.js'
import { standInModel } from './model.js'
import { replyQueue, startReplies } from './replies.js'

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
  },
})

const file = resolve(values.db)
const processes = wholeNumber(values.processes, '--processes', 1)
const port = wholeNumber(values.port, '--port', 0)

function wholeNumber(text: string, flag: string, min: number): number {
  const n = Number(text)
  if (!Number.isSafeInteger(n) || n < min) throw new Error(`${flag}: expected a whole number of at least ${min}, got '${text}'`)
  return n
}

/** One web process: the Hono app and a worker for replies, on its own connection to the file. */
function serveChat(onListening: (port: number) => void): void {
  const [minMs, maxMs] = values['model-ms'].split('-').map(Number) as [number, number]
  const model = standInModel({
    minMs,
    maxMs: maxMs ?? minMs,
    failRate: Number(values['fail-rate']),
    slowDownRate: Number(values['slow-down-rate']),
    slowDownMs: Number(values['slow-down-ms']),
  })
  const { db, close } = openChatDb(file)
  const queue = replyQueue(values.backoff as Duration)
  const worker = startReplies(db, queue, model)
  const server = serve({ fetch: chatApp(db, queue).fetch, port, hostname: values.host }, (info) => onListening(info.port))
  const shutDown = async (): Promise<void> => {
    server.close()
    await worker.stop({ timeout: '5s' })
    close()
    process.exit(0)
  }
  process.once('SIGTERM', () => void shutDown())
  process.once('SIGINT', () => void shutDown())
}

function announce(listeningPort: number): void {
  const url = `http://${values.host.includes(':') ? `[${values.host}]` : values.host}:${listeningPort}/`
  console.log(`drizzle-jobs chat: ${url} (${processes} process${processes === 1 ? '' : 'es'}, database ${file})`)
}

if (processes === 1) {
  migrateChatDb(file)
  serveChat(announce)
} else if (cluster.isPrimary) {
  migrateChatDb(file)
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
