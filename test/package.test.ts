/** The package as npm ships it: every export names files the build made, as publint would check. */
import { existsSync, readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { expect, test } from 'vitest'

const ROOT = resolve(import.meta.dirname, '..')

interface Target {
  types: string
  default: string
}
const pkg = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as {
  type: string
  exports: Record<string, string | { import?: Target; require?: Target; default?: string }>
  files: string[]
  peerDependencies: Record<string, string>
}

test('package exports: each subpath has import and require entries with types, whose files exist in dist, and loads', async () => {
  expect(pkg.type).toBe('module')
  expect(pkg.peerDependencies['drizzle-orm']).toBeDefined()
  const subpaths = Object.entries(pkg.exports).filter(([path]) => path !== './package.json')
  expect(subpaths.map(([path]) => path).sort()).toEqual(['.', './dashboard', './schema', './sse', './testing'])
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
