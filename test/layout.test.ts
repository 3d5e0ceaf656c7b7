/**
 * The layout shows the architecture: no folder of src/ imports a folder that
 * imports it back, directly or through others, counting type-only imports
 * too; no statement's result is cast, since each declares its types beside
 * its SQL; and one run's pipeline is the engine's executor, which `work` and
 * `drain` both use; and only the SQLite dialect's folder (and the schema)
 * imports better-sqlite3 or holds SQL, so a second dialect adds a folder; and docs/code.md, the map of the code,
 * names every folder of src/ and every source file, by its path from src/.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { expect, test } from 'vitest'

const SRC = resolve(import.meta.dirname, '..', 'src')

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : []
  })
}

/** The relative modules a file imports or re-exports, as files of src/. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  const found: string[] = []
  for (const match of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?\bfrom\s+['"](\.[^'"]+)['"]/g)) {
    found.push(resolve(dirname(file), match[1]!.replace(/\.js$/, '.ts')))
  }
  for (const match of text.matchAll(/\bimport\(\s*['"](\.[^'"]+)['"]\s*\)/g)) {
    found.push(resolve(dirname(file), match[1]!.replace(/\.js$/, '.ts')))
  }
  return found
}

/** The folder of src/ a file is in (its first segment), or null for a file at the root of src/. */
function folderOf(file: string): string | null {
  const parts = relative(SRC, file).split(sep)
  return parts.length > 1 ? parts[0]! : null
}

/** Folder → the folders its files import, each with one file import that shows it. */
function folderGraph(): Map<string, Map<string, string>> {
  const graph = new Map<string, Map<string, string>>()
  for (const file of sourceFiles(SRC)) {
    const from = folderOf(file)
    if (from === null) continue
    for (const target of importsOf(file)) {
      const to = folderOf(target)
      if (to === null || to === from) continue
      if (!graph.has(from)) graph.set(from, new Map())
      const edges = graph.get(from)!
      if (!edges.has(to)) edges.set(to, `${relative(SRC, file)} imports ${relative(SRC, target)}`)
    }
  }
  return graph
}

/** Every cycle of folders, each as the imports that close it. */
function folderCycles(graph: Map<string, Map<string, string>>): string[][] {
  const cycles: string[][] = []
  const seen = new Set<string>()
  const walk = (path: string[]): void => {
    const last = path[path.length - 1]!
    for (const next of graph.get(last)?.keys() ?? []) {
      const at = path.indexOf(next)
      if (at === 0) {
        const key = [...path].sort().join(',')
        if (!seen.has(key)) {
          seen.add(key)
          cycles.push(path.map((folder, i) => graph.get(folder)!.get(path[i + 1] ?? next)!))
        }
      } else if (at === -1 && next > path[0]!) {
        walk([...path, next])
      }
    }
  }
  for (const folder of [...graph.keys()].sort()) walk([folder])
  return cycles
}

test('no folder of src/ imports a folder that imports it back', () => {
  const graph = folderGraph()
  expect(graph.size).toBeGreaterThan(5)
  expect(folderCycles(graph)).toEqual([])
})

test('the check finds a folder cycle when there is one', () => {
  const graph = new Map([
    ['a', new Map([['b', 'a/x.ts imports b/y.ts']])],
    ['b', new Map([['c', 'b/y.ts imports c/z.ts']])],
    ['c', new Map([['a', 'c/z.ts imports a/x.ts']])],
  ])
  expect(folderCycles(graph)).toEqual([['a/x.ts imports b/y.ts', 'b/y.ts imports c/z.ts', 'c/z.ts imports a/x.ts']])
})

test('work and drain run each run through the one executor', () => {
  for (const file of ['worker/worker.ts', 'testing/drain.ts']) {
    expect(importsOf(join(SRC, file))).toContain(join(SRC, 'engine', 'executor.ts'))
  }
})

test('no statement result is cast: each statement declares its row type beside its SQL', () => {
  const casts: string[] = []
  for (const file of sourceFiles(SRC)) {
    if (file === join(SRC, 'dialect', 'sqlite', 'statement.ts')) continue
    const text = readFileSync(file, 'utf8')
    for (const match of text.matchAll(/\.(?:get|all|iterate)\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\s*\)?\s*as\s+[^\n]*/g)) {
      casts.push(`${relative(SRC, file)}: ${match[0].slice(0, 80)}`)
    }
  }
  expect(casts).toEqual([])
})

/** The dialects' folders: each holds its database's statements and driver code, and nothing else does. */
/** The dialects' and drivers' folders: every folder of src/dialect/ (the seam's own files sit beside them). */
const DIALECTS = readdirSync(join(SRC, 'dialect'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => join(SRC, 'dialect', entry.name) + sep)

/** Files outside the dialects' folders, the schema and tests: the protocol, which a new dialect must not need to change. */
function protocolFiles(): string[] {
  const own = [...DIALECTS, join(SRC, 'schema') + sep]
  return sourceFiles(SRC).filter((file) => !own.some((folder) => file.startsWith(folder)))
}

const DRIVER_IMPORT =
  /\bfrom\s+['"](better-sqlite3|pg|postgres|@electric-sql\/pglite|@libsql\/client|drizzle-orm\/(?:better-sqlite3|node-postgres|postgres-js|pglite|libsql))['"]/

/** SQL written in a template or string of code (comments may name a statement): a statement's opening words. */
const SQL_TEXT =
  /[`'"][^`'"]*?\b(select\s+(?:distinct\s+)?[\w*(]|insert\s+into\s+\w|update\s+\w+\s+set\b|delete\s+from\s+\w|pragma\s+\w|begin\s+immediate\b)/i

test('only the dialects import a driver or hold SQL', () => {
  const found: string[] = []
  for (const file of protocolFiles()) {
    const text = readFileSync(file, 'utf8')
    const driver = DRIVER_IMPORT.exec(text)
    if (driver) found.push(`${relative(SRC, file)} imports ${driver[1]}`)
    const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '')
    const sql = SQL_TEXT.exec(code)
    if (sql) found.push(`${relative(SRC, file)} holds SQL: ${sql[0].slice(0, 60)}`)
  }
  expect(found).toEqual([])
})

test("the protocol reaches a database only through the dialect seam: no file outside src/dialect imports a dialect's folder", () => {
  // The command-line tool too: it opens the database it is given through the driver registry (src/dialect/open.ts).
  const found: string[] = []
  for (const file of sourceFiles(SRC)) {
    if (file.startsWith(join(SRC, 'dialect') + sep)) continue
    const text = readFileSync(file, 'utf8')
    for (const match of text.matchAll(/\bfrom\s+['"]([^'"]*\/dialect\/[\w-]+\/[^'"]*)['"]/g))
      found.push(`${relative(SRC, file)} imports ${match[1]}`)
  }
  expect(found).toEqual([])
})

test('the check finds SQL text and a driver where they are', () => {
  expect(DRIVER_IMPORT.test("import pg from 'pg'")).toBe(true)
  expect(DRIVER_IMPORT.test("import type { Sql } from 'postgres'")).toBe(true)
  expect(SQL_TEXT.test('const q = `select seq from jobs_job`')).toBe(true)
  expect(SQL_TEXT.test("run('delete from jobs_lease where owner = ?')")).toBe(true)
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal is what it tests
  expect(SQL_TEXT.test("createHash('sha256').update(`${port} ${base}`)")).toBe(false)
})

test('docs/code.md names every folder of src/ in its table, and no folder that is gone', () => {
  const folders = (function walk(dir: string): string[] {
    return readdirSync(dir, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .flatMap((entry) => [join(dir, entry.name), ...walk(join(dir, entry.name))])
  })(SRC).map((dir) => `src/${relative(SRC, dir).split(sep).join('/')}/`)
  const table = readFileSync(resolve(SRC, '..', 'docs', 'code.md'), 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('| `'))
  const named = new Set(table.flatMap((line) => [...line.matchAll(/`(src\/[^`]*\/)`/g)].map((match) => match[1]!)))
  expect(folders.filter((folder) => !named.has(folder))).toEqual([])
  expect([...named].filter((folder) => !folders.includes(folder))).toEqual([])
})

/**
 * The files of src/ that a page names: every path in backticks that ends in `.ts`, read as a path from src/
 * (`engine/claim.ts`, `errors.ts`), but for a path that starts with another entry at the repository's root, which
 * names a file elsewhere (`test/layout.test.ts`, `drizzle.config.ts`). So `src/engine/claim.ts`, or a bare
 * `open.ts` meant as a folder's own, names a file that does not exist, and the page must write it by its path
 * from src/.
 */
function srcFilesNamed(page: string, elsewhere: ReadonlySet<string>): string[] {
  const named = new Set<string>()
  for (const match of page.matchAll(/`([\w@./-]+\.ts)`/g)) {
    const path = match[1]!
    if (!elsewhere.has(path.split('/')[0]!)) named.add(path)
  }
  return [...named]
}

/** Which source files of src/ a page does not name, and which files it names that src/ does not hold, as paths from src/. */
function unnamedAndGone(files: readonly string[], named: readonly string[]): { unnamed: string[]; gone: string[] } {
  return { unnamed: files.filter((file) => !named.includes(file)), gone: named.filter((file) => !files.includes(file)) }
}

test('docs/code.md names every source file of src/ by its path from src/, and no file that is gone', () => {
  const ROOT = resolve(SRC, '..')
  const files = sourceFiles(SRC).map((file) => relative(SRC, file).split(sep).join('/'))
  const elsewhere = new Set(readdirSync(ROOT).filter((entry) => entry !== 'src'))
  const named = srcFilesNamed(readFileSync(join(ROOT, 'docs', 'code.md'), 'utf8'), elsewhere)
  expect(files.length).toBeGreaterThan(50)
  expect(unnamedAndGone(files, named)).toEqual({ unnamed: [], gone: [] })
})

test('the check finds a source file docs/code.md does not name, and a file it names that is gone', () => {
  const page = [
    '| `src/engine/` | `engine/claim.ts` (the plan), `engine/old.ts` (gone) |',
    'Root: `errors.ts`; a bare `open.ts`; `src/worker/flush.ts`; elsewhere: `test/layout.test.ts`, `drizzle.config.ts`.',
  ].join('\n')
  const named = srcFilesNamed(page, new Set(['test', 'drizzle.config.ts']))
  expect(named).toEqual(['engine/claim.ts', 'engine/old.ts', 'errors.ts', 'open.ts', 'src/worker/flush.ts'])
  expect(unnamedAndGone(['engine/claim.ts', 'engine/backoff.ts', 'errors.ts', 'worker/flush.ts'], named)).toEqual({
    unnamed: ['engine/backoff.ts', 'worker/flush.ts'],
    gone: ['engine/old.ts', 'open.ts', 'src/worker/flush.ts'],
  })
})

test("docs/postgres.md's PGlite example is examples/pglite/jobs.test.ts's own code, so that it runs in CI as shown", () => {
  const ROOT = resolve(SRC, '..')
  const docs = readFileSync(join(ROOT, 'docs', 'postgres.md'), 'utf8')
  const section = docs.slice(docs.indexOf('## On PGlite'), docs.indexOf('\n## ', docs.indexOf('## On PGlite') + 1))
  const example = section.slice(section.lastIndexOf('```ts\n') + '```ts\n'.length, section.lastIndexOf('```'))
  const file = readFileSync(join(ROOT, 'examples', 'pglite', 'jobs.test.ts'), 'utf8')
  const lines = example.split('\n').filter((line) => line.trim() !== '')
  expect(lines.length).toBeGreaterThan(5)
  expect(lines.filter((line) => !file.includes(`${line}\n`))).toEqual([])
})
