/**
 * Who holds a lease. An owner names its host, its process (pid and start
 * time, so a reused pid is not taken for the old process), a random token
 * per copy of this module, and the worker within it. On the same host, a
 * worker can tell whether an owner's process is gone and end its leases at
 * once. Worker threads and second copies of the package share their
 * process's pid and start time and differ by token: they are alive while
 * the process is.
 */
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { pidNamespace } from '../pid.js'

/** The host name, with the pid namespace where Linux shows it, so containers sharing a name are not confused. */
const NAMESPACE = pidNamespace()
const HOST = `${hostname().replaceAll('/', '_')}${NAMESPACE === '' ? '' : `@${NAMESPACE}`}`
const PROCESS_TOKEN = randomBytes(6).toString('hex')
const START_TIME = processStartTime(process.pid)
let workersStarted = 0

/**
 * Where this process's workers run, as their owners name it: the host (with its pid namespace) and the process id.
 * A worker's row stores them beside its owner, for a tool that reads the table.
 */
export const OWN_HOST_AND_PID: { readonly host: string; readonly pid: number } = { host: HOST, pid: process.pid }

export function newOwner(): string {
  return `${HOST}/${process.pid}/${START_TIME}/${PROCESS_TOKEN}/${++workersStarted}`
}

/** Whether `owner` is a worker of this process. */
export function isOwnOwner(owner: string): boolean {
  return owner.startsWith(`${HOST}/${process.pid}/${START_TIME}/${PROCESS_TOKEN}/`)
}

/**
 * True only when `owner` is a process of this host that is certainly gone: no process runs under its pid, or the one
 * that does started at another time. Where start times cannot be read, a live pid is never taken for gone.
 */
export function isOwnerGone(owner: string): boolean {
  const [host, pidText, startTime] = owner.split('/')
  if (host !== HOST || !pidText || startTime === undefined) return false
  const pid = Number(pidText)
  if (!Number.isSafeInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH'
  }
  return startTime !== '' && processStartTime(pid) !== startTime
}

/** The process's start time in clock ticks since boot (Linux), or '' where it cannot be read. */
function processStartTime(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? ''
  } catch {
    return ''
  }
}
