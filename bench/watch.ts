/**
 * Watching at scale, measured: `npx tsx bench/watch.ts [ahead|watchers|remote|all]` (default all).
 *
 *   ahead     `ahead` and getJob with 1,000,000 jobs waiting, and one refresh of 1,000 watchers spread over them
 *   watchers  thousands of watchers in one process: idle cost, progress fan-out (watchers × updates/s), and a
 *             queue drained while every waiting job is watched
 *   remote    watchers in this process, runs in a child process: progress over the channel
 *
 * Each part prints Markdown lines; docs/benchmarks.md ("Reading and watching") quotes them.
 */
import { fork } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import Database from 'better-sqlite3'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { defineQueue, enqueueMany, getJob, watch, work, type JobSnapshot } from '../src/index.js'

const MIGRATIONS = resolve(import.meta.dirname, '../drizzle')
const dirs: string[] = []

function openFile(file: string) {
  const client = new Database(file)
  client.pragma('journal_mode = WAL')
  client.pragma('synchronous = NORMAL')
  client.pragma('busy_timeout = 5000')
  return { client, db: drizzle(client) }
}

function freshFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'drizzle-jobs-watch-bench-'))
  dirs.push(dir)
  const file = join(dir, 'bench.db')
  const { client, db } = openFile(file)
  migrate(db, { migrationsFolder: MIGRATIONS })
  client.close()
  return file
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

function timeEach(runs: number, fn: () => void): { median: number; p99: number } {
  const times: number[] = []
  for (let i = 0; i < runs; i++) {
    const start = performance.now()
    fn()
    times.push(performance.now() - start)
  }
  times.sort((a, b) => a - b)
  return { median: quantile(times, 0.5), p99: quantile(times, 0.99) }
}

const ms = (n: number) => `${n < 1 ? n.toFixed(3) : n.toFixed(2)} ms`
const int = (n: number) => Math.round(n).toLocaleString('en-US')

/** CPU used by this process over `fn`, as a share of one core. */
async function cpuShare(fn: () => Promise<void>): Promise<{ share: number; seconds: number }> {
  const cpu = process.cpuUsage()
  const start = performance.now()
  await fn()
  const used = process.cpuUsage(cpu)
  const seconds = (performance.now() - start) / 1000
  return { share: (used.user + used.system) / 1e6 / seconds, seconds }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

async function benchAhead(): Promise<void> {
  const file = freshFile()
  const { client, db } = openFile(file)
  const q = defineQueue<number>('deep')
  const total = 1_000_000
  const start = performance.now()
  for (let i = 0; i < total; i += 10_000) {
    enqueueMany(
      db,
      q,
      Array.from({ length: 10_000 }, (_, k) => ({ value: i + k, id: `j${i + k}` })),
    )
  }
  console.log(`- added ${int(total)} waiting jobs in ${((performance.now() - start) / 1000).toFixed(1)} s (enqueueMany, batches of 10,000)`)
  for (const position of [0, 5_000, 500_000, total - 1]) {
    const id = `j${position}`
    const snapshot = getJob(db, q, id)!
    const { median, p99 } = timeEach(300, () => getJob(db, q, id))
    console.log(`- getJob of the job at position ${int(position)} (ahead ${int(snapshot.ahead!)}): median ${ms(median)}, p99 ${ms(p99)}`)
  }
  // 1,000 watchers spread over the first 9,000 of the line (so that 20 adds keep them under the cap of 10,000). A job added at its head (priority -1) moves every one of them; in this
  // process the watchers are refreshed synchronously inside that enqueue call: one statement for their rows, and
  // their ahead recounted in claim order (at most 10,000 index entries plus one per watcher).
  const watched = Array.from({ length: 1_000 }, (_, k) => watch(db, q, `j${k * 9}`))
  await Promise.all(watched.map((iterator) => iterator.next()))
  let round = 0
  const times: number[] = []
  for (let i = 0; i < 20; i++) {
    const next = watched.map((iterator) => iterator.next())
    const start = performance.now()
    enqueueMany(db, q, [{ value: -1, id: `head${round++}`, priority: -1 }])
    times.push(performance.now() - start)
    await Promise.all(next)
  }
  times.sort((a, b) => a - b)
  const refresh = { median: quantile(times, 0.5), p99: quantile(times, 0.99) }
  for (const iterator of watched) await iterator.return()
  const unwatched = timeEach(20, () => enqueueMany(db, q, [{ value: -1, id: `head${round++}`, priority: -1 }]))
  console.log(
    `- 1,000 watchers on jobs spread over the first 9,000 of the 1,000,000 waiting, all moved by one add at the head: the add with their refresh ` +
      `takes median ${ms(refresh.median)} (p99 ${ms(refresh.p99)}), against ${ms(unwatched.median)} unwatched`,
  )
  client.close()
}

async function benchWatchers(): Promise<void> {
  // Idle: many watchers of waiting jobs, nothing changes. The cost is one data_version check per poll.
  {
    const file = freshFile()
    const { client, db } = openFile(file)
    const q = defineQueue<number>('idle')
    const n = 10_000
    enqueueMany(
      db,
      q,
      Array.from({ length: n }, (_, i) => ({ value: i, id: `i${i}` })),
    )
    const watched = Array.from({ length: n }, (_, i) => watch(db, q, `i${i}`))
    await Promise.all(watched.map((iterator) => iterator.next()))
    const { share } = await cpuShare(() => sleep(3_000))
    console.log(`- ${int(n)} idle watchers on one connection: ${(share * 100).toFixed(2)}% of a core (one PRAGMA data_version per 50 ms)`)
    for (const iterator of watched) await iterator.return()
    client.close()
  }
  // Progress fan-out: R runs in this process, each setting progress U times a second, each watched by W watchers.
  for (const [runs, perRun, hz] of [
    [500, 10, 10],
    [500, 10, 20],
  ] as const) {
    const file = freshFile()
    const { client, db } = openFile(file)
    const q = defineQueue<number>('fanout', { timeout: '10m' })
    enqueueMany(
      db,
      q,
      Array.from({ length: runs }, (_, i) => ({ value: i, id: `f${i}` })),
    )
    let stop = false
    const worker = work(
      db,
      q,
      async (_value, run) => {
        while (!stop) {
          run.setProgress({ t: performance.now() })
          await sleep(1000 / hz)
        }
      },
      { slots: runs },
    )
    const watchers = Array.from({ length: runs * perRun }, (_, i) => watch(db, q, `f${i % runs}`))
    let received = 0
    const latencies: number[] = []
    let measuring = false
    const consumers = watchers.map(async (iterator) => {
      for await (const snapshot of iterator as AsyncIterable<JobSnapshot>) {
        const t = (snapshot.progress as { t?: number } | null)?.t
        if (measuring && t !== undefined) {
          received++
          if (received % 50 === 0) latencies.push(performance.now() - t)
        }
      }
    })
    while ((getJob(db, q, `f${runs - 1}`)?.progress ?? null) === null) await sleep(20)
    await sleep(500)
    measuring = true
    const { share, seconds } = await cpuShare(() => sleep(5_000))
    measuring = false
    latencies.sort((a, b) => a - b)
    console.log(
      `- ${int(runs * perRun)} watchers (${perRun} on each of ${runs} runs of this process, each run setting progress ${hz}×/s): ` +
        `${int(received / seconds)} snapshots/s delivered, ${(share * 100).toFixed(0)}% of a core (worker included), ` +
        `latency from setProgress to the consumer p50 ${ms(quantile(latencies, 0.5))}, p99 ${ms(quantile(latencies, 0.99))}`,
    )
    stop = true
    for (const iterator of watchers) await iterator.return()
    await Promise.all(consumers)
    await worker.stop()
    client.close()
  }
  // Drain while every waiting job is watched: each claim changes the `ahead` of all the others.
  for (const watched of [false, true]) {
    const file = freshFile()
    const { client, db } = openFile(file)
    const q = defineQueue<number>('drain')
    const n = 5_000
    enqueueMany(
      db,
      q,
      Array.from({ length: n }, (_, i) => ({ value: i, id: `d${i}` })),
    )
    const watchers = watched ? Array.from({ length: n }, (_, i) => watch(db, q, `d${i}`)) : []
    let snapshots = 0
    const consumers = watchers.map(async (iterator) => {
      for await (const _ of iterator) snapshots++
    })
    const start = performance.now()
    let done = 0
    const finished = new Promise<void>((resolveDone) => {
      const worker = work(
        db,
        q,
        () => {
          if (++done === n) setImmediate(() => void worker.stop().then(resolveDone))
        },
        { slots: 16 },
      )
    })
    await finished
    await Promise.all(consumers)
    const seconds = (performance.now() - start) / 1000
    console.log(
      `- drained ${int(n)} no-op jobs ${watched ? `with all ${int(n)} watched (every claim moves every waiting job's ahead)` : 'with no watcher'}: ` +
        `${int(n / seconds)} jobs/s${watched ? `, ${int(snapshots)} snapshots delivered (${int(snapshots / seconds)}/s)` : ''}`,
    )
    client.close()
  }
}

async function benchRemote(): Promise<void> {
  const file = freshFile()
  const { client, db } = openFile(file)
  const runs = 100
  const perRun = 10
  const hz = 20
  const q = defineQueue<number>('remote', { timeout: '10m' })
  enqueueMany(
    db,
    q,
    Array.from({ length: runs }, (_, i) => ({ value: i, id: `r${i}` })),
  )
  const child = fork(import.meta.filename, ['child', file, String(runs), String(hz)], { execArgv: process.execArgv })
  const watchers = Array.from({ length: runs * perRun }, (_, i) => watch(db, q, `r${i % runs}`))
  let received = 0
  let measuring = false
  const consumers = watchers.map(async (iterator) => {
    for await (const snapshot of iterator) if (measuring && snapshot.progress !== null) received++
  })
  while (getJob(db, q, `r${runs - 1}`)?.progress == null) await sleep(20)
  await sleep(500)
  measuring = true
  const { share, seconds } = await cpuShare(() => sleep(5_000))
  measuring = false
  console.log(
    `- ${int(runs * perRun)} watchers here, ${runs} runs in another process each setting progress ${hz}×/s: ` +
      `${int(received / seconds)} snapshots/s delivered over one channel connection, ${(share * 100).toFixed(0)}% of a core in the watching process`,
  )
  child.kill('SIGKILL')
  for (const iterator of watchers) await iterator.return()
  await Promise.all(consumers)
  client.close()
}

/** The worker process of `remote`: runs every job, each setting progress `hz` times a second until killed. */
async function child(file: string, runs: number, hz: number): Promise<void> {
  const { db } = openFile(file)
  const q = defineQueue<number>('remote', { timeout: '10m' })
  work(
    db,
    q,
    async (_value, run) => {
      for (;;) {
        run.setProgress({ t: Date.now() })
        await sleep(1000 / hz)
      }
    },
    { slots: runs },
  )
}

const [part = 'all', ...rest] = process.argv.slice(2)
if (part === 'child') {
  await child(rest[0]!, Number(rest[1]), Number(rest[2]))
} else {
  console.log(`Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}`)
  try {
    if (part === 'ahead' || part === 'all') await benchAhead()
    if (part === 'watchers' || part === 'all') await benchWatchers()
    if (part === 'remote' || part === 'all') await benchRemote()
  } finally {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  }
}
