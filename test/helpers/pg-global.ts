/**
 * Vitest's global setup: the one PostgreSQL server that every test file of a run shares, handed to the files
 * as `inject('pgServer')` (test/helpers/pg.ts makes each file its own database on it).
 *
 * With DATABASE_URL set, that server. Otherwise a private cluster, started once per run with initdb and
 * pg_ctl from PATH or /usr/lib/postgresql/<newest>/bin, in a fresh temporary folder, with trust
 * authentication, listening on a free loopback port and a socket inside its folder; stopped and removed at
 * the end of the run. As root, initdb refuses to run: the cluster then runs as the `postgres` system user.
 * Without either, the run goes on and only the PostgreSQL tests fail, each with a line saying how to get a
 * server.
 */
import { execFile, execFileSync } from 'node:child_process'
import { accessSync, appendFileSync, chownSync, constants, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { promisify } from 'node:util'
import type { TestProject } from 'vitest/node'
import { onServer } from './pg-database.js'

/** What the test files are given: a server's URL, or why there is none. */
export type PgServer = { url: string } | { unavailable: string }

declare module 'vitest' {
  export interface ProvidedContext {
    pgServer: PgServer
  }
}

export const NO_SERVER =
  'the PostgreSQL tests need a server: set DATABASE_URL=postgres://user@host:port/db, or install PostgreSQL (apt-get install postgresql) so that they start their own with initdb'

/** The name's prefix of the migrated databases that fresh test databases copy (pg.ts), dropped at the run's end. */
export const TEMPLATE_PREFIX = 'drizzle_jobs_template_'

const SYSTEM_USER = 'postgres'
/** util-linux's runuser, in sbin, which a root shell's PATH may lack. */
const RUNUSER = ['/usr/sbin/runuser', '/sbin/runuser'].find((path) => existsSync(path)) ?? 'runuser'

export default async function setup(project: TestProject): Promise<() => void> {
  const given = process.env.DATABASE_URL
  if (given) {
    project.provide('pgServer', { url: given })
    return () => dropTemplates(given, process.pid)
  }
  const cluster = await startPrivateCluster()
  project.provide('pgServer', 'url' in cluster ? { url: cluster.url } : { unavailable: cluster.unavailable })
  return () => {
    if ('url' in cluster) cluster.stop()
  }
}

/** A private cluster: its server's URL (user `postgres`, database `postgres`), and how to restart and stop it. */
export interface PrivateCluster {
  url: string
  /** Restarts the server with `pg_ctl restart -m fast` (every connection ended), on the same port; resolves once it accepts connections again. */
  restart(): Promise<void>
  /** Stops the server with `pg_ctl stop -m fast`, keeping its folder: the same restart as `restart`, with the time between in the caller's hands. */
  down(): Promise<void>
  /** Starts the stopped server again on its port; resolves once it accepts connections. */
  up(): Promise<void>
  /** Stops the server at once and removes its folder. */
  stop(): void
}

/**
 * Starts a private cluster as the run's server is started (initdb and pg_ctl from PATH or
 * /usr/lib/postgresql/<newest>/bin, a fresh folder, a free loopback port), or answers why none could start:
 * for a tool or a test that needs a server of its own. The caller stops it.
 */
export async function startPrivateCluster(): Promise<PrivateCluster | { unavailable: string }> {
  const bin = findBinaries()
  if (!bin) return { unavailable: NO_SERVER }
  return startCluster(bin)
}

interface Binaries {
  initdb: string
  pgCtl: string
}

/** initdb and pg_ctl from PATH, else from the newest /usr/lib/postgresql/<version>/bin (Debian's layout). */
function findBinaries(): Binaries | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    const found = binariesIn(dir)
    if (found) return found
  }
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root) ? readdirSync(root).filter((name) => /^\d+(\.\d+)?$/.test(name)) : []
  for (const version of versions.sort((a, b) => Number(b) - Number(a))) {
    const found = binariesIn(join(root, version, 'bin'))
    if (found) return found
  }
  return null
}

function binariesIn(dir: string): Binaries | null {
  const initdb = join(dir, 'initdb')
  const pgCtl = join(dir, 'pg_ctl')
  try {
    accessSync(initdb, constants.X_OK)
    accessSync(pgCtl, constants.X_OK)
    return { initdb, pgCtl }
  } catch {
    return null
  }
}

/** A port nobody listens on now: the system picks one for a socket bound to port 0, which is then closed. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))))
    })
  })
}

async function startCluster(bin: Binaries): Promise<PrivateCluster | { unavailable: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'drizzle-jobs-pg-'))
  const data = join(dir, 'data')
  const log = join(dir, 'server.log')
  // initdb refuses to run as root, and the server with it: they run as the system user the package made.
  const asRoot = process.getuid?.() === 0
  const commandOf = (file: string, args: string[]): [string, string[]] =>
    asRoot ? [RUNUSER, ['-u', SYSTEM_USER, '--', file, ...args]] : [file, args]
  // In the cluster's folder: the system user may not be allowed into the current one.
  const options = { cwd: dir, encoding: 'utf8', timeout: 120_000 } as const
  const run = (file: string, args: string[]): string =>
    execFileSync(...commandOf(file, args), { ...options, stdio: ['ignore', 'pipe', 'pipe'] })
  /** As run, without blocking this process meanwhile: its clients see the server go and come back. */
  const runAside = async (file: string, args: string[]): Promise<void> =>
    void (await promisify(execFile)(...commandOf(file, args), options))
  const failed = (what: string, error: unknown): { unavailable: string } => {
    const { stderr } = error as { stderr?: string }
    const tail = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').slice(-5).join(' | ') : ''
    rmSync(dir, { recursive: true, force: true })
    const why = `${stderr || String(error)} ${tail}`.trim().replace(/\s*\n\s*/g, ' | ')
    return { unavailable: `the private PostgreSQL cluster did not start (${what}): ${why}` }
  }
  try {
    if (asRoot) {
      const uid = Number(execFileSync('id', ['-u', SYSTEM_USER], { encoding: 'utf8' }))
      const gid = Number(execFileSync('id', ['-g', SYSTEM_USER], { encoding: 'utf8' }))
      chownSync(dir, uid, gid)
    }
    run(bin.initdb, ['--pgdata', data, '--auth', 'trust', '--username', 'postgres', '--encoding', 'UTF8', '--locale', 'C'])
  } catch (error) {
    return failed('initdb', error)
  }
  // Only loopback and a socket in the cluster's own folder; durability settings stay at their defaults.
  appendFileSync(
    join(data, 'postgresql.conf'),
    ["listen_addresses = '127.0.0.1'", `unix_socket_directories = '${dir}'`, 'max_connections = 200', ''].join('\n'),
  )
  // Another process may take the free port before the server binds it: then try another.
  for (let tries = 1; ; tries++) {
    const port = await freePort()
    const start = ['--pgdata', data, '--log', log, '--wait', '--timeout', '60', '--options', `-p ${port}`, 'start']
    try {
      run(bin.pgCtl, start)
    } catch (error) {
      if (tries < 3 && existsSync(log) && /could not bind|address already in use/i.test(readFileSync(log, 'utf8'))) continue
      return failed('pg_ctl start', error)
    }
    return {
      url: `postgres://postgres@127.0.0.1:${port}/postgres`,
      // pg_ctl restart starts the server again with the options it was started with (the port among them).
      restart: () => runAside(bin.pgCtl, ['--pgdata', data, '--log', log, '--wait', '--timeout', '60', '--mode', 'fast', 'restart']),
      down: () => runAside(bin.pgCtl, ['--pgdata', data, '--wait', '--timeout', '60', '--mode', 'fast', 'stop']),
      up: () => runAside(bin.pgCtl, start),
      stop() {
        try {
          run(bin.pgCtl, ['--pgdata', data, '--mode', 'immediate', 'stop'])
        } finally {
          rmSync(dir, { recursive: true, force: true })
        }
      },
    }
  }
}

/** Drops the migrated templates the run's files made on `server` (pg.ts); a server that no longer answers keeps them. */
async function dropTemplates(server: string, run: number): Promise<void> {
  try {
    await onServer(server, async (client) => {
      const { rows } = await client.query<{ datname: string }>(`select datname from pg_database where datname like $1`, [
        `${TEMPLATE_PREFIX}${run}\\_%`,
      ])
      for (const { datname } of rows) await client.query(`drop database if exists "${datname}" with (force)`)
    })
  } catch {
    // Left for the next run's end.
  }
}
