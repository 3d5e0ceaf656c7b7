/**
 * The package as npm ships it: every export and the bin name files the build made, as publint would check;
 * what `npm pack` takes holds no source maps and no @internal declaration, and its declarations compile; the
 * peer ranges start at the versions the suite runs on; the main entry does not load the dashboard; and no
 * export loads a database driver, which the app brings.
 */
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, expect, test } from 'vitest'
import { DRIZZLE_1, oldest } from './fresh-apps/versions.js'

const ROOT = resolve(import.meta.dirname, '..')
const BIN = join(ROOT, 'node_modules', '.bin')
mkdirSync(join(ROOT, '.tmp'), { recursive: true })
// Inside the repository, so what is written here resolves drizzle-orm and @types/node from its node_modules.
const scratch = mkdtempSync(join(ROOT, '.tmp', 'package-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

interface Target {
  types: string
  default: string
}
const pkg = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as {
  type: string
  exports: Record<string, string | { import?: Target; require?: Target; default?: string }>
  files: string[]
  bin: Record<string, string>
  scripts: Record<string, string>
  peerDependencies: Record<string, string>
  peerDependenciesMeta: Record<string, { optional?: boolean }>
  devDependencies: Record<string, string>
}

/** The files `npm pack` puts in the tarball, by path. Scripts are not run: the suite built dist/ already. */
function packed(): string[] {
  const [report] = JSON.parse(
    execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  ) as [{ files: { path: string }[] }]
  return report.files.map((file) => file.path)
}

test('package exports: each subpath has import and require entries with types, whose files exist in dist, and loads', async () => {
  expect(pkg.type).toBe('module')
  expect(pkg.peerDependencies['drizzle-orm']).toBeDefined()
  const subpaths = Object.entries(pkg.exports).filter(([path]) => path !== './package.json')
  expect(subpaths.map(([path]) => path).sort()).toEqual(['.', './dashboard', './pg/schema', './schema', './sse', './testing'])
  for (const [path, entry] of subpaths) {
    expect(typeof entry, path).toBe('object')
    const { import: esm, require: cjs, default: fallback } = entry as { import: Target; require: Target; default: string }
    // One implementation, the ES modules, for import and for require (Node ≥ 20.19 requires ES modules):
    // one copy of the package's state in a process however it is loaded. `default` serves other resolvers.
    expect(Object.keys(entry as object), path).toEqual(['import', 'require', 'default'])
    expect(esm.default, `${path} import`).toMatch(/^\.\/dist\/.*\.js$/)
    expect(cjs.default, `${path} require`).toBe(esm.default)
    expect(fallback, `${path} default`).toBe(esm.default)
    // The types come first in each condition, as TypeScript requires; require's are the same
    // declarations, read as CommonJS (see scripts/commonjs-types.mjs).
    expect(Object.keys(esm)[0]).toBe('types')
    expect(Object.keys(cjs)[0]).toBe('types')
    expect(esm.types, `${path} import types`).toBe(esm.default.replace(/\.js$/, '.d.ts'))
    expect(cjs.types, `${path} require types`).toBe(esm.types.replace('./dist/', './dist/cjs-types/'))
    for (const file of [esm.default, esm.types, cjs.types]) expect(existsSync(resolve(ROOT, file)), `${file} exists`).toBe(true)
    expect(readFileSync(resolve(ROOT, cjs.types), 'utf8')).toBe(readFileSync(resolve(ROOT, esm.types), 'utf8'))
    await import(resolve(ROOT, esm.default))
  }
  expect(JSON.parse(readFileSync(resolve(ROOT, 'dist/cjs-types/package.json'), 'utf8'))).toEqual({ type: 'commonjs' })
  expect(pkg.files).toContain('dist')
})

test('package bin: the drizzle-jobs command is a built file with a node shebang that npm ships, and it runs', () => {
  expect(Object.keys(pkg.bin)).toEqual(['drizzle-jobs'])
  const bin = pkg.bin['drizzle-jobs']!
  expect(bin).toMatch(/^\.\/dist\/.*\.js$/)
  const file = resolve(ROOT, bin)
  expect(existsSync(file), `${bin} exists`).toBe(true)
  // npm links it into node_modules/.bin and makes it executable on install; the shebang runs it with node.
  expect(readFileSync(file, 'utf8').split('\n')[0]).toBe('#!/usr/bin/env node')
  expect(packed()).toContain(bin.replace(/^\.\//, ''))
  const help = execFileSync(process.execPath, [file, '--help'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  expect(help).toMatch(/^usage: drizzle-jobs COMMAND/m)
})

test('package contents: npm pack takes dist/, README.md, LICENSE and package.json, and no source map, whose sources are not shipped', () => {
  const files = packed()
  expect(files.filter((path) => !path.startsWith('dist/')).sort()).toEqual(['LICENSE', 'README.md', 'package.json'])
  expect(files.filter((path) => path.endsWith('.map'))).toEqual([])
  // A stack trace then names the shipped dist/ file and line: no comment sends a debugger to a missing src/.
  for (const path of files.filter((path) => path.endsWith('.js')))
    expect(readFileSync(resolve(ROOT, path), 'utf8'), path).not.toMatch(/sourceMappingURL/)
  // The export targets and their types are all in the tarball.
  for (const entry of Object.values(pkg.exports)) {
    if (typeof entry === 'string') continue
    for (const target of [entry.import!.default, entry.import!.types, entry.require!.types])
      expect(files).toContain(target.replace(/^\.\//, ''))
  }
})

test('package declarations: nothing @internal is shipped, WorkOptions has no clock, and every shipped .d.ts compiles', () => {
  const declarations = readdirSync(resolve(ROOT, 'dist'), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.d.ts'))
    .map((entry) => join(entry.parentPath, entry.name))
  expect(declarations.length).toBeGreaterThan(10)
  for (const file of declarations) expect(readFileSync(file, 'utf8'), relative(ROOT, file)).not.toContain('@internal')
  const workOptions = /export interface WorkOptions[\s\S]*?\n\}/.exec(readFileSync(resolve(ROOT, 'dist/worker/worker.d.ts'), 'utf8'))?.[0]
  expect(workOptions).toBeDefined()
  expect(workOptions).not.toMatch(/\bclock\??:/)

  // Stripping a declaration that a kept one names leaves a .d.ts that does not compile, which an app type-checking
  // its libraries would see. The declarations are checked as TypeScript sources (skipLibCheck would skip them as
  // .d.ts), with the libraries they import skipped.
  const check = join(scratch, 'declarations')
  for (const file of declarations.filter((file) => !relative(resolve(ROOT, 'dist'), file).startsWith('cjs-types'))) {
    const to = join(check, relative(resolve(ROOT, 'dist'), file).replace(/\.d\.ts$/, '.ts'))
    mkdirSync(dirname(to), { recursive: true })
    copyFileSync(file, to)
  }
  writeFileSync(join(check, 'package.json'), JSON.stringify({ type: 'module' }))
  writeFileSync(
    join(check, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { module: 'nodenext', strict: true, noEmit: true, skipLibCheck: true, types: ['node'], lib: ['ES2023', 'DOM'] },
      include: ['**/*.ts'],
    }),
  )
  try {
    execFileSync(join(BIN, 'tsc'), ['-p', check], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  } catch (error) {
    throw new Error(`the shipped declarations do not compile:\n${(error as { stdout?: string }).stdout ?? String(error)}`)
  }
})

test('package peers: each range is made of the lines a test runs, each from the version tested to the next breaking release', () => {
  expect(pkg.peerDependencies).toEqual({
    '@electric-sql/pglite': expect.any(String),
    '@libsql/client': expect.any(String),
    '@opentelemetry/api': expect.any(String),
    'better-sqlite3': expect.any(String),
    'drizzle-orm': expect.any(String),
    pg: expect.any(String),
    postgres: expect.any(String),
  })
  // An app installs the driver of its database only: a PostgreSQL app does not compile better-sqlite3.
  expect(pkg.peerDependenciesMeta).toEqual({
    '@electric-sql/pglite': { optional: true },
    '@libsql/client': { optional: true },
    '@opentelemetry/api': { optional: true },
    'better-sqlite3': { optional: true },
    pg: { optional: true },
    postgres: { optional: true },
  })
  /**
   * The first version of each line a test runs: the suite's devDependency, one beside it under an alias, the
   * fresh apps' drizzle-orm 1.0, or PGlite 0.5, which only the fresh apps run (they run the first version of each
   * line: versions.ts).
   */
  const tested: Record<string, string[]> = {
    '@electric-sql/pglite': [oldest('@electric-sql/pglite')[0]!, devVersion('@electric-sql/pglite')],
    '@libsql/client': [devVersion('@libsql/client')],
    '@opentelemetry/api': [devVersion('@opentelemetry/api')],
    'better-sqlite3': [devVersion('better-sqlite3')],
    'drizzle-orm': [devVersion('drizzle-orm'), DRIZZLE_1],
    pg: [devVersion('pg')],
    postgres: [devVersion('postgres'), devVersion('postgres4')],
  }
  for (const [name, range] of Object.entries(pkg.peerDependencies)) {
    const lines = tested[name]!.map((version) => {
      const [major, minor] = version.split('.').map(Number) as [number, number]
      // 0.x releases break at each minor, as drizzle-orm's do; 1.x and later at each major.
      const next = major === 0 ? `0.${minor + 1}.0` : `${major + 1}.0.0`
      return [`^${version}`, `>=${version} <${next}`]
    })
    const alternatives = range.split('||').map((part) => part.trim())
    expect(alternatives, `${name}'s peer range has one line per tested version`).toHaveLength(lines.length)
    for (const [i, alternative] of alternatives.entries()) expect(lines[i], `${name}'s peer range, line ${i + 1}`).toContain(alternative)
  }
})

/** The version a devDependency names (`^3.4.9`, or an alias's `npm:postgres@4.2.0`), checked to be the line installed. */
function devVersion(name: string): string {
  const version = pkg.devDependencies[name]!.replace(/^npm:[^@]+@/, '').replace(/^[\^~]/, '')
  const installed = (JSON.parse(readFileSync(resolve(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version
  expect(installed.split('.').slice(0, 2), `${name} ${installed} is the line the devDependency names`).toEqual(
    version.split('.').slice(0, 2),
  )
  return version
}

test('package scripts: prepack builds, so that npm pack ships a fresh dist/; dependencies builds, so that npm ci and an install from a git URL get dist/; no script for an installer', () => {
  expect(pkg.scripts.prepack).toBe('npm run build')
  // npm runs the root's `dependencies` after changing its node_modules, and a dependency's never.
  expect(pkg.scripts.dependencies).toBe('npm run build')
  // What an install of the tarball would run, or list as waiting for allowScripts: none is shipped.
  for (const script of ['preinstall', 'install', 'postinstall', 'prepare']) expect(pkg.scripts[script], script).toBeUndefined()
  expect(pkg.scripts.build).toMatch(/^rm -rf dist && tsc -p tsconfig\.build\.json\b/)
  const build = JSON.parse(readFileSync(resolve(ROOT, 'tsconfig.build.json'), 'utf8')) as { compilerOptions: Record<string, unknown> }
  expect(build.compilerOptions).toMatchObject({ sourceMap: false, stripInternal: true })
})

/** The URLs of the modules Node loads for an entry of the package, written down by a loader hook. */
function loaded(entry: string): string[] {
  const hooks = join(scratch, 'hooks.mjs')
  if (!existsSync(hooks)) {
    writeFileSync(
      hooks,
      `
import { appendFileSync } from 'node:fs'
export async function load(url, context, next) {
  appendFileSync(process.env.LOADED_LOG, url + '\\n')
  return next(url, context)
}
`,
    )
    writeFileSync(
      join(scratch, 'register.mjs'),
      `import { register } from 'node:module'\nregister(${JSON.stringify(pathToFileURL(hooks).href)})\n`,
    )
  }
  const log = join(scratch, `loaded-${entry.replace(/\W/g, '_')}.log`)
  writeFileSync(log, '')
  const target = (pkg.exports[entry] as { import: Target }).import.default
  execFileSync(
    process.execPath,
    [
      '--import',
      pathToFileURL(join(scratch, 'register.mjs')).href,
      '--input-type=module',
      '-e',
      `await import(${JSON.stringify(pathToFileURL(resolve(ROOT, target)).href)})`,
    ],
    {
      env: { ...process.env, LOADED_LOG: log },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  return readFileSync(log, 'utf8').split('\n').filter(Boolean)
}

test('package main entry: importing drizzle-jobs loads no dashboard module and no htmx; drizzle-jobs/dashboard does', () => {
  const main = loaded('.')
  expect(main).toContain(pathToFileURL(resolve(ROOT, 'dist/index.js')).href)
  expect(main.filter((url) => url.includes('/dist/dashboard/') || url.includes('htmx'))).toEqual([])
  const withDashboard = loaded('./dashboard')
  expect(withDashboard).toContain(pathToFileURL(resolve(ROOT, 'dist/dashboard/assets.js')).href)
  // htmx is not imported but read as a file, and only by the dashboard's modules.
  const readers = readdirSync(resolve(ROOT, 'dist'), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.js'))
    .map((entry) => join(entry.parentPath, entry.name))
    .filter((file) => readFileSync(file, 'utf8').includes('htmx.org'))
  expect(readers.map((file) => relative(ROOT, file))).toEqual(['dist/dashboard/assets.js'])
})

test('package drivers: no export loads better-sqlite3, pg or postgres, so an app needs only the driver it uses', () => {
  // The app passes its own Drizzle database; the package names the drivers' types only (import type).
  for (const entry of Object.keys(pkg.exports).filter((path) => path !== './package.json')) {
    const drivers = loaded(entry).filter(
      (url) =>
        /\/node_modules\/(?:better-sqlite3|pg|postgres)\//.test(url) ||
        /\/drizzle-orm\/(?:better-sqlite3|node-postgres|postgres-js)\//.test(url),
    )
    expect(drivers, entry).toEqual([])
  }
})
