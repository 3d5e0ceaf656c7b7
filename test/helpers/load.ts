/**
 * What the machine's load costs the processes a latency passes through. Linux counts, for each thread, how long it
 * waited on a run queue, ready to run but given no CPU (/proc/<pid>/schedstat, the second field, in ns). On 2 cores
 * at a load of 16 a process waits most of each second: a latency measured by the wall clock grows by that much,
 * whatever the product does. A test that bounds such a latency allows the wait this meter counts on top of its
 * bound: a few ms on an idle machine, where the bound is the plain one; nothing where the file is missing (not
 * Linux), where the bound is the plain one too.
 */
import { readFileSync } from 'node:fs'

/** How long the main thread of `pid` has waited for a CPU since it started, in ms; undefined once it is gone, or off Linux. */
function runQueueMs(pid: number): number | undefined {
  try {
    const waitedNs = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1])
    return Number.isFinite(waitedNs) ? waitedNs / 1e6 : undefined
  } catch {
    return undefined
  }
}

/** The ms some processes have waited for a CPU while they were counted. */
export interface CpuWait {
  /** Counts these processes too, from now on (a database's server processes once its pool has connected, say). */
  add(pids: Iterable<number>): void
  /**
   * The ms the counted processes have waited for a CPU since each was added, summed: a latency that passes from one
   * process to another (a worker, its database's server, a watcher) waits in each in turn. A process that has ended
   * counts what it had waited when last read.
   */
  ms(): number
  /** The ms they waited between two moments (Date.now()), from the readings taken every `everyMs`: see `cpuWait`. */
  between(fromMs: number, toMs: number): number
  /** Stops the readings taken every `everyMs`. */
  stop(): void
}

/**
 * Starts counting how long `pids` (this process by default) wait for a CPU. With `everyMs`, the sum is also read
 * every `everyMs` (the timer does not keep the process alive), so that `between` can tell the wait of any stretch of
 * time since, each end read as the last reading before it.
 */
export function cpuWait(pids: Iterable<number> = [process.pid], options: { everyMs?: number } = {}): CpuWait {
  const counted = new Map<number, { first: number; last: number }>()
  const readings: Array<{ at: number; ms: number }> = []
  const meter: CpuWait = {
    add(more) {
      for (const pid of more) {
        const now = runQueueMs(pid)
        if (now !== undefined && !counted.has(pid)) counted.set(pid, { first: now, last: now })
      }
    },
    ms() {
      let sum = 0
      for (const [pid, reading] of counted) {
        reading.last = runQueueMs(pid) ?? reading.last
        sum += reading.last - reading.first
      }
      return sum
    },
    between(fromMs, toMs) {
      const at = (moment: number) => readings.findLast((reading) => reading.at <= moment)?.ms ?? 0
      return Math.max(0, at(toMs) - at(fromMs))
    },
    stop() {
      if (timer) clearInterval(timer)
    },
  }
  meter.add(pids)
  const read = () => void readings.push({ at: Date.now(), ms: meter.ms() })
  read()
  const timer = options.everyMs === undefined ? undefined : setInterval(read, options.everyMs)
  timer?.unref()
  return meter
}

/**
 * The server processes of the PostgreSQL database `query` reads, when they run on this machine (a server elsewhere
 * has pids of its own machine: none is counted then).
 */
export async function serverPids(query: (sql: string) => Promise<Array<{ pid: number }>>): Promise<number[]> {
  const rows = await query('select pid from pg_stat_activity where datname = current_database()')
  return rows.map((row) => Number(row.pid)).filter((pid) => isPostgres(pid))
}

function isPostgres(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('postgres')
  } catch {
    return false
  }
}
