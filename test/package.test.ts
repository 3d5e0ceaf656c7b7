/** Every subpath export names files that the build made, with types and an ESM entry, as publint would check. */
import { existsSync, readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { expect, test } from 'vitest'

const ROOT = resolve(import.meta.dirname, '..')
const pkg = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as {
  type: string
  exports: Record<string, string | { types?: string; import?: string; default?: string }>
  files: string[]
  peerDependencies: Record<string, string>
}

test('package exports: each subpath has types and import entries that exist in dist, and loads', async () => {
  expect(pkg.type).toBe('module')
  expect(pkg.peerDependencies['drizzle-orm']).toBeDefined()
  const subpaths = Object.entries(pkg.exports).filter(([path]) => path !== './package.json')
  expect(subpaths.map(([path]) => path)).toEqual(expect.arrayContaining(['.', './schema']))
  for (const [path, entry] of subpaths) {
    expect(typeof entry, path).toBe('object')
    const { types, import: esm } = entry as { types?: string; import?: string }
    expect(types, `${path} types`).toMatch(/^\.\/dist\/.*\.d\.ts$/)
    expect(esm, `${path} import`).toMatch(/^\.\/dist\/.*\.js$/)
    expect(existsSync(resolve(ROOT, types!)), `${types} exists`).toBe(true)
    expect(existsSync(resolve(ROOT, esm!)), `${esm} exists`).toBe(true)
    // The types condition comes first, as TypeScript requires.
    expect(Object.keys(entry as object)[0]).toBe('types')
    await import(resolve(ROOT, esm!))
  }
  expect(pkg.files).toContain('dist')
})
