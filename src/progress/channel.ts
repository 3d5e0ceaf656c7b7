/**
 * The progress channel: how a run's live progress reaches watchers in other
 * processes on the same host without ever touching the database (JOB-12), on
 * SQLite. On PostgreSQL progress travels by NOTIFY instead (notices.ts), and
 * workers name no channel.
 *
 * A process that runs workers listens on one local socket (a Unix socket
 * in a private folder of the temp dir, a named pipe on Windows), and each of
 * its workers names that socket in its row (`jobs_lease.channel`). A watcher
 * in another process reads it with the job's row, connects to the
 * socket (one connection per pair of processes, shared by every watcher),
 * and subscribes to the run (owner, job, attempt). It gets the run's
 * progress at once, then every change as it is set.
 *
 * The protocol is lines of UTF-8: a subscriber writes `+KEY` or `-KEY` (KEY
 * a JSON string naming the run); the channel answers `KEY<TAB>PROGRESS`
 * (PROGRESS as JSON, `null` when none was set) once on subscribe and on
 * every change. A subscriber that reads slowly gets the latest progress of
 * each run, not every intermediate one.
 */
import { randomBytes } from 'node:crypto'
import { chmodSync, mkdirSync, readdirSync, unlinkSync } from 'node:fs'
import { createServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Connection } from '../dialect/index.js'
import { pidNamespace } from '../pid.js'
import { readProgress, subscribeProgress } from './store.js'
import { MAX_SUBSCRIBER_LINE_BYTES } from '../limits.js'

/** Past this many bytes waiting in a subscriber's socket, progress is held back and only the latest of each run is sent on drain. */
const BACKPRESSURE_BYTES = 64 * 1024
/** The longest path a Unix socket may have (macOS allows 104 bytes with the terminator, Linux 108). */
const MAX_SOCKET_PATH_BYTES = 103

let path: string | null = null
let failed = false

/**
 * The path of this process's progress channel, listening once this returns;
 * started on first use. Null where no local socket can be made: progress
 * then reaches only the watchers of this process.
 */
export function progressChannel(): string | null {
  if (path !== null || failed) return path
  try {
    path = listen()
  } catch {
    failed = true
    path = null
  }
  return path
}

/**
 * The channel a lease on `connection` names: this process's local socket, or null where the database carries
 * progress between processes itself (PostgreSQL, src/progress/notices.ts), one path per dialect.
 */
export function progressChannelFor(connection: Connection): string | null {
  return connection.progressNotices ? null : progressChannel()
}

/** Whether `channel` is this process's own (its runs' progress is read from memory, not through a socket). */
export function isOwnChannel(channel: string): boolean {
  return channel === path
}

function listen(): string {
  const socketPath = newSocketPath()
  const listening = createServer({ allowHalfOpen: false }, serveSubscriber)
  listening.on('error', () => {
    // A local socket that fails after listening leaves watchers of other processes without progress; runs go on.
    failed = true
    if (path === socketPath) path = null
  })
  // Bound here and now, also in a cluster worker (`exclusive`; otherwise the cluster primary would listen for it, later):
  // once listen returns, connects succeed, so the path may go into a lease at once.
  listening.listen({ path: socketPath, exclusive: true })
  listening.unref()
  if (process.platform !== 'win32') {
    chmodSync(socketPath, 0o600)
    process.once('exit', () => removeQuietly(socketPath))
  }
  return socketPath
}

/** A socket path private to this user and unique to this process; stale sockets of dead processes of this host are swept. */
function newSocketPath(): string {
  const name = `${pidNamespace()}-${process.pid}-${randomBytes(6).toString('hex')}.sock`
  if (process.platform === 'win32') return `\\\\?\\pipe\\drizzle-jobs-${name}`
  const uid = typeof process.getuid === 'function' ? process.getuid() : 0
  let dir = join(tmpdir(), `drizzle-jobs-${uid}`)
  if (Buffer.byteLength(join(dir, name)) > MAX_SOCKET_PATH_BYTES) dir = `/tmp/drizzle-jobs-${uid}`
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  chmodSync(dir, 0o700)
  sweepStaleSockets(dir)
  return join(dir, name)
}

/** Removes the sockets left by processes of this pid namespace that are gone (killed before they could clean up). */
function sweepStaleSockets(dir: string): void {
  const namespace = pidNamespace()
  for (const file of readdirSync(dir)) {
    const match = /^(\d*)-(\d+)-[0-9a-f]+\.sock$/.exec(file)
    if (!match || match[1] !== namespace || Number(match[2]) === process.pid) continue
    try {
      process.kill(Number(match[2]), 0)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ESRCH') removeQuietly(join(dir, file))
    }
  }
}

function removeQuietly(file: string): void {
  try {
    unlinkSync(file)
  } catch {
    // Already gone.
  }
}

/** One subscriber process: its subscriptions, and the latest progress held back while its socket drains. */
function serveSubscriber(socket: Socket): void {
  socket.unref()
  socket.setEncoding('utf8')
  const subscriptions = new Map<string, () => void>()
  const heldBack = new Map<string, string>()
  let pending = ''

  const send = (keyJson: string, json: string): void => {
    if (socket.destroyed) return
    if (socket.writableLength > BACKPRESSURE_BYTES) {
      heldBack.set(keyJson, json)
      return
    }
    socket.write(`${keyJson}\t${json}\n`)
  }

  socket.on('drain', () => {
    const lines = [...heldBack].map(([keyJson, json]) => `${keyJson}\t${json}\n`)
    heldBack.clear()
    if (lines.length > 0) socket.write(lines.join(''))
  })

  socket.on('data', (chunk: string) => {
    pending += chunk
    let newline: number
    while ((newline = pending.indexOf('\n')) !== -1) {
      const line = pending.slice(0, newline)
      pending = pending.slice(newline + 1)
      handleLine(line)
    }
    if (pending.length > MAX_SUBSCRIBER_LINE_BYTES) socket.destroy()
  })

  const handleLine = (line: string): void => {
    const op = line[0]
    const keyJson = line.slice(1)
    let key: unknown
    try {
      key = JSON.parse(keyJson)
    } catch {
      key = undefined
    }
    if (typeof key !== 'string' || (op !== '+' && op !== '-')) {
      socket.destroy()
      return
    }
    if (op === '-') {
      subscriptions.get(key)?.()
      subscriptions.delete(key)
      heldBack.delete(keyJson)
      return
    }
    if (!subscriptions.has(key))
      subscriptions.set(
        key,
        subscribeProgress(key, (progress) => send(keyJson, progress.json)),
      )
    send(keyJson, readProgress(key)?.json ?? 'null')
  }

  socket.on('close', () => {
    for (const unsubscribe of subscriptions.values()) unsubscribe()
    subscriptions.clear()
    heldBack.clear()
  })
  socket.on('error', () => {
    // The subscriber went away; 'close' follows and frees its subscriptions.
  })
}
