/** Child processes for the reliability suite: the scripts of test/fixtures, run with tsx, killed for real. */
import { spawn, type ChildProcess } from 'node:child_process'
import { join, resolve } from 'node:path'
import { STARTUP_MS } from '../helpers/processes.js'

export const ROOT = resolve(import.meta.dirname, '../..')
const FIXTURES = join(ROOT, 'test/fixtures')

/** How a process ended. */
export interface Exit {
  code: number | null
  signal: NodeJS.Signals | null
  at: number
}

/** A fixture script running in its own process. */
export interface FixtureProcess {
  readonly child: ChildProcess
  readonly pid: number
  /** Resolves when the script printed its `ready` line (its worker has started); rejects if it ends first, or after STARTUP_MS. */
  readonly ready: Promise<void>
  readonly isReady: () => boolean
  /** Resolves when the process is gone, however it ended. */
  readonly exited: Promise<Exit>
  /** Lines the script printed on stdout, other than `ready`. */
  readonly lines: string[]
  /** What the script printed on stderr (the last 20,000 characters). */
  readonly stderr: () => string
}

/** Starts `test/fixtures/<script>` with `node --import tsx`, its stdout read line by line. */
export function spawnFixture(script: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): FixtureProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', join(FIXTURES, script), ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  })
  if (child.pid === undefined) throw new Error(`could not start ${script}`)
  const lines: string[] = []
  let ready = false
  let errText = ''
  let partial = ''
  let markReady: () => void = () => {}
  const readyPromise = new Promise<void>((resolveReady) => (markReady = resolveReady))
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n')
    partial = parts.pop() ?? ''
    for (const line of parts) {
      if (line === 'ready') {
        ready = true
        markReady()
      } else if (line !== '') {
        lines.push(line)
      }
    }
  })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    errText = (errText + chunk).slice(-20_000)
  })
  const exited = new Promise<Exit>((resolveExit) => {
    child.once('exit', (code, signal) => {
      if (partial !== '') lines.push(partial)
      resolveExit({ code, signal, at: Date.now() })
    })
  })
  let startTimer: NodeJS.Timeout | undefined
  const readyOrNot = Promise.race([
    readyPromise,
    exited.then((exit) => Promise.reject(new Error(`${script} exited before it was ready (${exit.code ?? exit.signal}): ${errText}`))),
    new Promise<never>((_, reject) => {
      startTimer = setTimeout(
        () => reject(new Error(`timed out after ${STARTUP_MS} ms waiting for ${script} to be ready: ${errText}`)),
        STARTUP_MS,
      )
      startTimer.unref()
    }),
  ])
  void readyOrNot.then(
    () => clearTimeout(startTimer),
    () => clearTimeout(startTimer),
  )
  return {
    child,
    pid: child.pid,
    ready: readyOrNot,
    isReady: () => ready,
    exited,
    lines,
    stderr: () => errText,
  }
}

/** Asks a fixture to stop (SIGTERM) and waits for it; SIGKILLs it if it has not gone within `graceMs`. */
export async function stopFixture(fixture: FixtureProcess, graceMs = 10_000): Promise<Exit> {
  if (fixture.child.exitCode === null && fixture.child.signalCode === null) fixture.child.kill('SIGTERM')
  const timer = setTimeout(() => fixture.child.kill('SIGKILL'), graceMs)
  const exit = await fixture.exited
  clearTimeout(timer)
  return exit
}

/** Polls `condition` every `everyMs` until it holds, or throws after `timeoutMs` saying what was awaited. Times by the monotonic clock, so tests may move `Date.now`. */
export async function waitFor<T>(what: string, condition: () => T | undefined | false, timeoutMs: number, everyMs = 25): Promise<T> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const value = condition()
    if (value !== undefined && value !== false) return value
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolveWait) => setTimeout(resolveWait, everyMs))
  }
}
