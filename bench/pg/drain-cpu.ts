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
import { nowMs } from '../lib/clock.js'
import { WARM_JOBS, withDrain } from './in-process.js'

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

await withDrain({ prefix: 'cpu', count, slots, analyze: !fresh }, async (drain) => {
  const server0 = serverCpuMs()
  const worker0 = process.cpuUsage()
  const t0 = nowMs()
  const r = await drain()
  const wallMs = nowMs() - t0
  const worker = process.cpuUsage(worker0)
  const serverMs = serverCpuMs() - server0
  const jobs = r.done + WARM_JOBS
  const us = (ms: number) => ((ms / jobs) * 1000).toFixed(1)
  console.log(
    `${count} jobs at slots ${slots}, ${fresh ? 'fresh' : 'analyzed'}: ${Math.round(r.jobsPerSec)} jobs/s; per job: wall ${us(wallMs)} µs, ` +
      `worker CPU ${us((worker.user + worker.system) / 1000)} µs, server CPU ${us(serverMs)} µs`,
  )
})
