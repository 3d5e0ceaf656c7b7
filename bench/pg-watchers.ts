/**
 * Watching across hosts on PostgreSQL, measured: `npx tsx bench/pg-watchers.ts [URL]`.
 *
 * A web process (this one) holds 1,000 watchers following runs that a worker process (a child, with its own
 * pool) runs; they share nothing but the server, so progress travels by NOTIFY as it would between hosts.
 * For each case: the snapshots per second the watchers get, the CPU of this process (process.cpuUsage), and
 * the progress notices per second the server delivers, counted on a LISTEN connection of the bench's own.
 *
 * The server: URL, else DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres. A database of its own
 * is made, migrated with drizzle-pg/, and dropped at the end. Prints Markdown lines; docs/postgres.md quotes them.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { cpus } from 'node:os'
import { resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { drizzle } from 'drizzle-orm/node-postgres'
import { migrate } from 'drizzle-orm/node-postgres/migrator'
import pg from 'pg'
import { defineQueue, enqueueMany, watch, work, type PgDatabase } from '../src/index.js'

const MIGRATIONS = resolve(import.meta.dirname, '../drizzle-pg')
const PROGRESS_CHANNEL = 'drizzle_jobs_progress'
const MEASURE_MS = 5_000

const sleep = (ms: number) => new Promise<void>((resolveSleep) => setTimeout(resolveSleep, ms))
const int = (n: number) => Math.round(n).toLocaleString('en-US')

function databaseUrl(server: string, database: string): string {
  const url = new URL(server)
  url.pathname = `/${database}`
  return url.href
}

async function onServer(server: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: server })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

interface Case {
  runs: number
  perRun: number
  /** How many times a second each run sets its progress. */
  hz: number
}

async function measure(url: string, { runs, perRun, hz }: Case, n: number): Promise<void> {
  const pool = new pg.Pool({ connectionString: url, max: 4 })
  const db = drizzle(pool) as PgDatabase
  const q = defineQueue<number>(`watched${n}`, { timeout: '10m' })
  await enqueueMany(
    db,
    q,
    Array.from({ length: runs }, (_, i) => ({ value: i, id: `r${i}` })),
  )

  // The server's side: every progress notice it delivers to a listener.
  const listener = new pg.Client({ connectionString: url })
  await listener.connect()
  let notices = 0
  let lines = 0
  let noticeBytes = 0
  listener.on('notification', (message) => {
    if (message.channel !== PROGRESS_CHANNEL) return
    notices++
    lines += (message.payload ?? '').split('\n').length
    noticeBytes += Buffer.byteLength(message.payload ?? '')
  })
  await listener.query(`listen ${PROGRESS_CHANNEL}`)

  const child = fork(import.meta.filename, ['child', url, q.name, String(runs), String(hz)], { execArgv: process.execArgv })
  const watchers = Array.from({ length: runs * perRun }, (_, i) => watch(db, q, `r${i % runs}`))
  let received = 0
  let measuring = false
  const withProgress = new Set<number>()
  const consumers = watchers.map(async (iterator, i) => {
    for await (const snapshot of iterator) {
      if (snapshot.progress === null) continue
      withProgress.add(i)
      if (measuring) received++
    }
  })
  while (withProgress.size < watchers.length) await sleep(20)
  await sleep(500)
  measuring = true
  const setsBefore = await setsOf(child)
  const noticesBefore = notices
  const linesBefore = lines
  const bytesBefore = noticeBytes
  const cpu = process.cpuUsage()
  const start = performance.now()
  await sleep(MEASURE_MS)
  const used = process.cpuUsage(cpu)
  const seconds = (performance.now() - start) / 1000
  measuring = false
  const setRate = ((await setsOf(child)) - setsBefore) / seconds
  const noticeRate = (notices - noticesBefore) / seconds
  const linesRate = (lines - linesBefore) / seconds
  console.log(
    `- ${int(runs * perRun)} watchers here (${perRun} on each of ${int(runs)} runs of another process, each run setting progress ${int(hz)}×/s, ${int(setRate)} sets/s in all): ` +
      `${int(received / seconds)} snapshots/s, ${(((used.user + used.system) / 1e6 / seconds) * 100).toFixed(1)}% of a core in the watching process; ` +
      `the server delivers ${int(noticeRate)} progress notices/s (${int(linesRate)} values) to each listener (${int((noticeBytes - bytesBefore) / seconds / 1024)} KiB/s)`,
  )
  child.kill('SIGKILL')
  for (const iterator of watchers) await iterator.return()
  await Promise.all(consumers)
  await listener.end()
  await pool.end()
}

/** How many values the worker process has set so far. */
function setsOf(child: ChildProcess): Promise<number> {
  return new Promise((resolveSets) => {
    child.once('message', (message) => resolveSets(Number(message)))
    child.send('sets')
  })
}

/** The worker process: runs every job of the queue at once, each setting progress `hz` times a second until killed. */
async function child(url: string, queue: string, runs: number, hz: number): Promise<void> {
  const pool = new pg.Pool({ connectionString: url, max: 4 })
  const db = drizzle(pool) as PgDatabase
  const q = defineQueue<number>(queue, { timeout: '10m' })
  // A timer waits 10 ms or more on a busy machine: above 100×/s the handler sets several values per tick.
  const perTick = Math.max(1, Math.round(hz / 100))
  const tickMs = (1_000 * perTick) / hz
  let sets = 0
  process.on('message', () => process.send!(sets))
  work(
    db,
    q,
    async (_value, run) => {
      for (let i = 0; ; i++) {
        for (let k = 0; k < perTick; k++) run.setProgress({ i, k, t: Date.now() })
        sets += perTick
        await sleep(tickMs)
      }
    },
    { slots: runs },
  )
}

const [first, ...rest] = process.argv.slice(2)
if (first === 'child') {
  await child(rest[0]!, rest[1]!, Number(rest[2]), Number(rest[3]))
} else {
  const server = first ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
  const name = `drizzle_jobs_watch_bench_${randomBytes(4).toString('hex')}`
  await onServer(server, `create database "${name}"`)
  const url = databaseUrl(server, name)
  try {
    const pool = new pg.Pool({ connectionString: url, max: 1 })
    await migrate(drizzle(pool), { migrationsFolder: MIGRATIONS })
    const version = (await pool.query<{ server_version: string }>('show server_version')).rows[0]!.server_version
    await pool.end()
    console.log(`Node ${process.version}, PostgreSQL ${version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}`)
    const cases: Case[] = [
      { runs: 100, perRun: 10, hz: 20 },
      { runs: 100, perRun: 10, hz: 1_000 },
      { runs: 1_000, perRun: 1, hz: 10 },
      { runs: 10, perRun: 100, hz: 10_000 },
    ]
    for (const [n, each] of cases.entries()) await measure(url, each, n)
  } finally {
    await onServer(server, `drop database if exists "${name}" with (force)`)
  }
}
