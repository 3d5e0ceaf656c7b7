/**
 * A real browser for page tests: Debian's headless Chromium driven by
 * playwright-core (never a downloaded browser), screenshots kept under
 * test-artifacts/ (git-ignored), and web servers started as real processes.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { chromium, type Browser, type Page } from 'playwright-core'
import { STARTUP_MS } from './processes.js'

export const CHROMIUM = '/usr/bin/chromium'
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
]
export const ARTIFACTS = resolve(import.meta.dirname, '../../test-artifacts')

/** Launches the system's Chromium headless. */
export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium)`)
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true })
}

/** Saves a full-page screenshot as test-artifacts/NAME.png; answers its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true })
  const path = join(ARTIFACTS, `${name}.png`)
  await page.screenshot({ path, fullPage: true })
  return path
}

export interface WebProcess {
  /** The first http(s) URL the process printed. */
  url: string
  process: ChildProcess
  /** Everything it printed so far, stdout and stderr. */
  output(): string
  /** SIGTERM, then SIGKILL if it has not ended within `graceMs`; resolves once it has ended. */
  stop(graceMs?: number): Promise<void>
}

/**
 * Starts `node --import tsx SCRIPT ...args` and resolves once it prints a URL (or rejects if it ends or takes past
 * `timeoutMs`, STARTUP_MS by default: a process's start on a loaded machine). Its environment is this process's, with
 * `env`'s variables set (or, where undefined, removed).
 */
export function startWebProcess(
  script: string,
  args: string[],
  timeoutMs = STARTUP_MS,
  env: Record<string, string | undefined> = {},
): Promise<WebProcess> {
  const childEnv = { ...process.env, ...env }
  for (const [name, value] of Object.entries(env)) if (value === undefined) delete childEnv[name]
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: childEnv })
  let output = ''
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()))
  const stop = async (graceMs = 5_000): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
    await exited
    clearTimeout(timer)
  }
  return new Promise((resolveStart, reject) => {
    let started = false
    const timer = setTimeout(() => {
      void stop(0)
      reject(new Error(`${script} printed no URL within ${timeoutMs} ms:\n${output}`))
    }, timeoutMs)
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString()
      // Only whole lines: a URL cut between two chunks would name the wrong port.
      const url = started ? undefined : /https?:\/\/[^\s)]+/.exec(output.slice(0, output.lastIndexOf('\n') + 1))?.[0]
      if (url) {
        started = true
        clearTimeout(timer)
        resolveStart({ url, process: child, output: () => output, stop })
      }
    })
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      if (!started) reject(new Error(`${script} ended (${signal ?? code}) before printing a URL:\n${output}`))
    })
  })
}
