/**
 * The private Redis servers BullMQ is measured on: Debian's `redis-server`,
 * each on a free loopback port with its own folder, its append-only file
 * synced every second (`appendonly yes`, `appendfsync everysec`) and no RDB
 * snapshots (`save ""`): the durability closest to SQLite in WAL with
 * synchronous = NORMAL, where a crash of the machine may lose the last
 * second. Every measurement gets a fresh server on a fresh folder, as the
 * SQLite subjects get fresh files; a server started `from` a template
 * folder loads that folder's append-only file first.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, rmSync } from 'node:fs'
import { createConnection, createServer } from 'node:net'
import { delimiter, join } from 'node:path'
import { nowMs, sleep } from './clock.js'

export const REDIS_PACKAGE = 'redis-server'
export const REDIS_DURABILITY = 'appendonly yes, appendfsync everysec, save ""'

/** Where `redis-server` is: on the PATH, or in Debian's /usr/bin or /usr/sbin; null when it is not installed. */
export function redisServerPath(): string | null {
  const folders = [...(process.env.PATH ?? '').split(delimiter), '/usr/bin', '/usr/sbin', '/usr/local/bin']
  for (const folder of folders) {
    const candidate = join(folder, 'redis-server')
    if (folder && existsSync(candidate)) return candidate
  }
  return null
}

/** Servers still running: killed if this process exits before stopping them (an error, Ctrl-C). */
const live = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL')
})
process.once('SIGINT', () => process.exit(130))
process.once('SIGTERM', () => process.exit(143))

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolvePort(port))
    })
  })
}

/**
 * Sends one command and answers its reply as text: a status, an integer, a
 * bulk string, or an error's message prefixed with `-`. Enough for PING,
 * INFO and BGREWRITEAOF; the measured clients are BullMQ's own.
 */
export function redisCommand(port: number, ...args: string[]): Promise<string> {
  return new Promise((resolveReply, reject) => {
    const socket = createConnection({ host: '127.0.0.1', port })
    let data = Buffer.alloc(0)
    socket.once('error', reject)
    socket.on('data', (chunk) => {
      data = Buffer.concat([data, chunk])
      const end = data.indexOf('\r\n')
      if (end === -1) return
      const head = data.subarray(0, end).toString()
      if (head[0] === '$') {
        const length = Number(head.slice(1))
        if (length < 0) return done('')
        if (data.length < end + 2 + length) return
        return done(data.subarray(end + 2, end + 2 + length).toString())
      }
      done(head[0] === '-' ? head : head.slice(1))
    })
    const done = (reply: string): void => {
      socket.destroy()
      resolveReply(reply)
    }
    socket.write(`*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('')}`)
  })
}

export interface RedisServer {
  port: number
  dir: string
  /** Stops the server (its append-only file synced, as on SHUTDOWN) and, unless `keep`, removes its folder. */
  stop(options?: { keep?: boolean }): Promise<void>
  /** Rewrites the append-only file into one compact base file and waits for it: a template loads fast. */
  compact(): Promise<void>
}

/**
 * Starts a server on a free loopback port in `dir` (made if missing; with
 * `from`, a copy of that template folder) and waits until it answers PING
 * with its data loaded.
 */
export async function startRedis(binary: string, options: { dir: string; from?: string }): Promise<RedisServer> {
  const { dir } = options
  rmSync(dir, { recursive: true, force: true })
  if (options.from) cpSync(options.from, dir, { recursive: true })
  else mkdirSync(dir, { recursive: true })
  const port = await freePort()
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--appendonly',
    'yes',
    '--appendfsync',
    'everysec',
    '--save',
    '',
    '--daemonize',
    'no',
    '--logfile',
    '',
  ]
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  live.add(child)
  const log: string[] = []
  const keep = (chunk: Buffer): void => {
    log.push(
      ...chunk
        .toString()
        .split('\n')
        .filter((line) => line.trim() !== ''),
    )
    log.splice(0, Math.max(0, log.length - 20))
  }
  child.stdout.on('data', keep)
  child.stderr.on('data', keep)
  let exited = false
  const exit = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()))
  void exit.then(() => {
    exited = true
    live.delete(child)
  })
  const deadline = nowMs() + 120_000
  for (;;) {
    if (exited) throw new Error(`redis-server exited at start: ${log.slice(-5).join(' / ')}`)
    const reply = await redisCommand(port, 'PING').catch((error: Error) => `-${error.message}`)
    if (reply === 'PONG') break
    if (nowMs() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`redis-server on port ${port} did not answer within 120 s (${reply}): ${log.slice(-5).join(' / ')}`)
    }
    await sleep(20)
  }
  return {
    port,
    dir,
    async stop({ keep = false } = {}) {
      if (!exited) {
        child.kill('SIGTERM')
        await exit
      }
      if (!keep) rmSync(dir, { recursive: true, force: true })
    },
    async compact() {
      await redisCommand(port, 'BGREWRITEAOF')
      for (;;) {
        const info = await redisCommand(port, 'INFO', 'persistence')
        if (/aof_rewrite_in_progress:0/.test(info) && /aof_rewrite_scheduled:0/.test(info)) return
        await sleep(50)
      }
    },
  }
}
