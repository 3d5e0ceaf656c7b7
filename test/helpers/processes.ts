/** Real child processes running test/fixtures scripts, for crash and concurrency contracts. */
import { spawn, type ChildProcess } from 'node:child_process'
import { resolve } from 'node:path'

const FIXTURES = resolve(import.meta.dirname, '../fixtures')
const children = new Set<ChildProcess>()

export interface Child {
  process: ChildProcess
  /** Everything the child printed on stdout so far. */
  output(): string
  /** Resolves with the exit code, or the signal's name, once it has ended. */
  exited: Promise<number | string>
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
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<number | string>((resolveExit) => {
    child.on('exit', (code, signal) => {
      children.delete(child)
      if (code !== 0 && signal === null && stderr) process.stderr.write(`[${script}] ${stderr}`)
      resolveExit(signal ?? code ?? -1)
    })
  })
  return { process: child, output: () => stdout, exited }
}

/** Kills every child still running: for afterEach/afterAll. */
export function killChildren(): void {
  for (const child of children) child.kill('SIGKILL')
}
