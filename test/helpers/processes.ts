/** Real child processes running test/fixtures scripts, for crash and concurrency contracts. */
import { spawn, type ChildProcess } from 'node:child_process'
import { resolve } from 'node:path'
import { waitFor } from './wait.js'

const FIXTURES = resolve(import.meta.dirname, '../fixtures')

/**
 * How long a child process may take to start: `node --import tsx` compiles the fixture and what it imports before
 * it runs a line, a second or two on an idle machine, and 30 s and more on 2 cores at a load of 16 to 19 (the
 * whole suite beside other work). A wait for a start is not what a test proves: it gets this long.
 */
export const STARTUP_MS = 120_000

const children = new Set<ChildProcess>()

export interface Child {
  process: ChildProcess
  /** Everything the child printed on stdout so far. */
  output(): string
  /** Resolves with the exit code, or the signal's name, once it has ended. */
  exited: Promise<number | string>
  /** Whether it has ended and everything it printed has been read. */
  ended(): boolean
}

/** Starts `node --import tsx test/fixtures/<script>` with the given arguments. */
export function startFixture(script: string, args: string[], env: Record<string, string> = {}): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', resolve(FIXTURES, script), ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.add(child)
  let stdout = ''
  let stderr = ''
  let closed = false
  child.on('close', () => (closed = true))
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<number | string>((resolveExit) => {
    child.on('exit', (code, signal) => {
      children.delete(child)
      if (code !== 0 && signal === null && stderr) process.stderr.write(`[${script}] ${stderr}`)
      resolveExit(signal ?? code ?? -1)
    })
  })
  return { process: child, output: () => stdout, exited, ended: () => closed }
}

/**
 * Waits until each of `children` has printed `line` (a line that says it started), for STARTUP_MS at most; throws
 * at once if one ended without printing it.
 */
export async function started(children: Child | readonly Child[], line: string, what: string): Promise<void> {
  const all: readonly Child[] = Array.isArray(children) ? children : [children as Child]
  await waitFor(
    () => {
      const gone = all.find((child) => child.ended() && !child.output().includes(line))
      if (gone) throw new Error(`a child process ended (${gone.process.exitCode ?? gone.process.signalCode}) before it printed '${line}'`)
      return all.every((child) => child.output().includes(line))
    },
    what,
    STARTUP_MS,
  )
}

/** Kills every child still running: for afterEach/afterAll. */
export function killChildren(): void {
  for (const child of children) child.kill('SIGKILL')
}
