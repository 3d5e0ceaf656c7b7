/**
 * A PGlite data directory marked as one process's: PGlite keeps no lock on a directory, and a second process that
 * opens it beside the first overwrites what the first wrote. The mark is a file in the directory (LOCK_FILE) that
 * names the process: its pid, host and pid namespace. The driver marks a directory as its first connection to an
 * instance on it is made (driver.ts), the command-line tool before it opens PGlite on one (open.ts).
 */
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { pidNamespace } from '../../pid.js'

/** The file in a data directory that names the process whose connections use it: its pid, host and pid namespace. */
export const LOCK_FILE = 'drizzle-jobs.pid'

/** The data directories this process has marked as its own. */
const marked = new Set<string>()

/**
 * Marks the data directory `dir` (an absolute path) as this process's, unless a live process of this host has
 * marked it: answers that process's pid, or null (a mark left by a process that is gone, or by another host, where
 * no process can be asked, is taken over). The mark is removed when this process exits. The command-line tool
 * marks a directory before it opens PGlite on it. @internal
 */
export function markDataDirectory(dir: string): number | null {
  if (marked.has(dir)) return null
  const file = join(dir, LOCK_FILE)
  const mine = [String(process.pid), hostname(), pidNamespace()]
  for (let tries = 0; tries < 3; tries++) {
    try {
      writeFileSync(file, `${mine.join('\n')}\n`, { flag: 'wx' })
      marked.add(dir)
      if (marked.size === 1) process.once('exit', unmarkAll)
      return null
    } catch (error) {
      // A directory this process cannot write to: nothing can be marked, and PGlite will say what it cannot do.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return null
    }
    const [pid, host, namespace] = readMark(file)
    if (pid === process.pid && host === mine[1]) {
      marked.add(dir)
      return null
    }
    if (host === mine[1] && namespace === mine[2] && isAlive(pid)) return pid
    try {
      unlinkSync(file)
    } catch {
      // Taken over by another process meanwhile: the next try reads its mark.
    }
  }
  return null
}

function readMark(file: string): [pid: number, host: string, namespace: string] {
  try {
    const [pid = '', host = '', namespace = ''] = readFileSync(file, 'utf8').split('\n')
    return [Number(pid), host, namespace]
  } catch {
    return [Number.NaN, '', '']
  }
}

function isAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

function unmarkAll(): void {
  for (const dir of marked) {
    try {
      unlinkSync(join(dir, LOCK_FILE))
    } catch {
      // Already gone.
    }
  }
}
