/**
 * The versions the fresh apps install. First each peer's newest release, asked of npm when the test starts and
 * named in the install, as an app already on it has it: a peer range that leaves it out then fails the install
 * (ERESOLVE), where an install naming no version quietly takes an older one that the range admits. Then the
 * oldest versions package.json's peer ranges admit: the first version of each line of a range.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { promisify } from 'node:util'

/**
 * The drizzle-orm and drizzle-kit 1.0 release candidate the fresh apps move to: the first the package supports.
 * npm serves 1.0 under no tag, so it is named.
 */
export const DRIZZLE_1 = '1.0.0-rc.5'

const { peerDependencies } = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../package.json'), 'utf8')) as {
  peerDependencies: Record<string, string>
}

/** The first version of each line of a package's peer range: `^3.4.9 || ^4.2.0` gives 3.4.9 and 4.2.0. */
export function oldest(name: string): string[] {
  const range = peerDependencies[name]
  if (range === undefined) throw new Error(`${name} is not a peer dependency in package.json`)
  return range.split('||').map((line) => {
    const first = /\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?/.exec(line)
    if (!first) throw new Error(`${name}'s peer range line '${line.trim()}' names no first version`)
    return first[0]
  })
}

/**
 * What npm is asked for a package's newest release on this Node.js: its `latest` tag; but better-sqlite3 13 needs
 * Node.js 22 (its `engines`), so on Node.js 20 the newest 12.
 */
function newestSpec(name: string): string {
  const nodeMajor = Number(process.versions.node.split('.')[0])
  return name === 'better-sqlite3' && nodeMajor < 22 ? `${name}@12` : `${name}@latest`
}

/** The newest release npm has now of each package (without the registry, the test fails here). */
export async function newest(names: string[]): Promise<Record<string, string>> {
  const found = await Promise.all(
    names.map(async (name) => {
      const { stdout } = await promisify(execFile)('npm', ['view', newestSpec(name), 'version', '--json'], { encoding: 'utf8' })
      // One version for a tag; for a range, each version it matches, in the order they were published.
      const answer = JSON.parse(stdout) as string | string[]
      const versions = typeof answer === 'string' ? [answer] : answer
      return [name, versions.reduce((a, b) => (compareReleases(a, b) >= 0 ? a : b))] as const
    }),
  )
  return Object.fromEntries(found)
}

/** Orders two releases (x.y.z, no pre-release) by their numbers. */
function compareReleases(a: string, b: string): number {
  const [x, y] = [a, b].map((version) => version.split('.').map(Number)) as [number[], number[]]
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i]! - y[i]!
  return 0
}
