/**
 * liteque's folder (bench/liteque) has its own package.json and lockfile,
 * pinned to liteque 0.8.0 and better-sqlite3 11.9.1. When its node_modules
 * is missing, `npm ci` installs it; better-sqlite3 11 is then compiled from
 * source with node-gyp against the headers of the running node (no
 * prebuilt download: only the npm registry needs to be reachable).
 */
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { ROOT } from './child.js'

export const LITEQUE_DIR = resolve(ROOT, 'bench/liteque')

function installed(): boolean {
  return (
    existsSync(join(LITEQUE_DIR, 'node_modules/liteque/package.json')) &&
    existsSync(join(LITEQUE_DIR, 'node_modules/better-sqlite3/build/Release/better_sqlite3.node'))
  )
}

/** The folder holding include/node/node.h for the running node, so node-gyp needs no download. */
function nodeHeaders(): string | null {
  const prefix = resolve(dirname(process.execPath), '..')
  return existsSync(join(prefix, 'include/node/node.h')) ? prefix : null
}

export function ensureLiteque(log: (line: string) => void): void {
  if (installed()) return
  const headers = nodeHeaders()
  log(
    `installing bench/liteque (npm ci; better-sqlite3 11.9.1 is compiled from source, about a minute)${headers ? '' : ': no node headers beside node, node-gyp will try to download them'}`,
  )
  const env = { ...process.env, npm_config_build_from_source: 'true', ...(headers ? { npm_config_nodedir: headers } : {}) }
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
  const result = spawnSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: LITEQUE_DIR, env, stdio: 'inherit' })
  if (result.status !== 0 || !installed())
    throw new Error(`npm ci in bench/liteque failed (exit ${result.status}): liteque cannot be measured`)
}

/** The folders of the PostgreSQL peers (bench/pg-peers/<name>), each with its own package.json and lockfile. */
export const PG_PEER_DIRS = {
  'graphile-worker': resolve(ROOT, 'bench/pg-peers/graphile-worker'),
  'pg-boss': resolve(ROOT, 'bench/pg-peers/pg-boss'),
} as const

/** Installs a PostgreSQL peer's folder with `npm ci` when its package is missing (pure JavaScript: nothing to compile). */
export function ensurePgPeer(name: keyof typeof PG_PEER_DIRS, log: (line: string) => void): void {
  const dir = PG_PEER_DIRS[name]
  if (existsSync(join(dir, 'node_modules', name, 'package.json'))) return
  log(`installing bench/pg-peers/${name} (npm ci)`)
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
  const result = spawnSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: dir, stdio: 'inherit' })
  if (result.status !== 0 || !existsSync(join(dir, 'node_modules', name, 'package.json')))
    throw new Error(`npm ci in bench/pg-peers/${name} failed (exit ${result.status}): ${name} cannot be measured`)
}
