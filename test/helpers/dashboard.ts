/** `drizzle-jobs dashboard` run from the built bin, as users run it. */
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { resolve } from 'node:path'

const ROOT = resolve(import.meta.dirname, '../..')
/** The package's bin, from package.json, in dist/. */
export const BIN = resolve(
  ROOT,
  (JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin['drizzle-jobs']!,
)

/** Starts `drizzle-jobs dashboard ARGS`; resolves with the URL it prints, and a stop (SIGTERM) that resolves its exit code. */
export function startDashboardCommand(...args: string[]): Promise<{ url: string; stop: () => Promise<number | null> }> {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build first (npm run build; npm test does it)`)
  const child = spawn(process.execPath, [BIN, 'dashboard', ...args], {
    cwd: ROOT,
    env: { ...process.env, DRIZZLE_JOBS_TOKEN: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)))
  let output = ''
  return new Promise((started, failed) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString()
      const url = /(http:\/\/\S+)\n/.exec(output)?.[1]
      if (url) started({ url, stop: () => (child.kill('SIGTERM'), exited) })
    })
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    void exited.then((code) => failed(new Error(`the dashboard exited ${code} before printing its URL: ${output}`)))
  })
}
