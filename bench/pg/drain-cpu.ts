/**
 * Who spends a drain's time on PostgreSQL: drains `count` no-op jobs (default 20,000) at `slots` (default 16) in a
 * fresh database on the benchmark's server, analyzed first unless `fresh` is given, in this process, and prints per
 * job the wall time, the worker process's CPU time and the server's: the user and system time of every process
 * named postgres on this machine, read from /proc before and after, so it counts only a server on the same machine
 * (and whatever else that server did meanwhile).
 *
 *   npx tsx bench/pg/drain-cpu.ts [count] [slots] [fresh]
 */
import { readdirSync, readFileSync } from 'node:fs'
import { runTask } from '../lib/child.js'
import { nowMs } from '../lib/clock.js'
import { benchServer, createDatabase, databaseUrl, dropDatabase, vacuumAnalyze } from './lib.js'

const count = Number(process.argv[2] ?? 20_000)
const slots = Number(process.argv[3] ?? 16)
const fresh = process.argv[4] === 'fresh'
/** Clock ticks per second of /proc's times: 100 on Linux. */
const TICKS = 100

/** CPU milliseconds spent so far by every process named postgres (utime and stime of /proc/PID/stat). */
function serverCpuMs(): number {
  let ticks = 0
  for (const pid of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    let stat: string
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    } catch {
      continue // the process ended meanwhile
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
    if (!name.startsWith('postgres')) continue
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    ticks += Number(fields[11]) + Number(fields[12])
  }
  return (ticks / TICKS) * 1000
}

const server = await benchServer()
const name = await createDatabase(server.url, 'cpu')
const url = databaseUrl(server.url, name)
const MODULE = new URL('../subjects/drizzle-jobs-pg.ts', import.meta.url).pathname
try {
  await runTask(MODULE, 'setup', { url })
  await runTask(MODULE, 'fill', { url, count, warm: 100 })
  if (!fresh) await vacuumAnalyze(url)
  const { tasks } = (await import('../subjects/drizzle-jobs-pg.js')) as {
    tasks: Record<string, (args: object, ctx: unknown) => Promise<{ jobsPerSec: number; done: number }>>
  }
  const server0 = serverCpuMs()
  const worker0 = process.cpuUsage()
  const t0 = nowMs()
  // The subject's drain: the warm-up queue's 100 jobs, then the queue's.
  const r = await tasks.process!({ url, count, slots }, {})
  const wallMs = nowMs() - t0
  const worker = process.cpuUsage(worker0)
  const serverMs = serverCpuMs() - server0
  const jobs = r.done + 100
  const us = (ms: number) => ((ms / jobs) * 1000).toFixed(1)
  console.log(
    `${count} jobs at slots ${slots}, ${fresh ? 'fresh' : 'analyzed'}: ${Math.round(r.jobsPerSec)} jobs/s; per job: wall ${us(wallMs)} µs, ` +
      `worker CPU ${us((worker.user + worker.system) / 1000)} µs, server CPU ${us(serverMs)} µs`,
  )
} finally {
  await dropDatabase(server.url, name)
  server.stop()
}
