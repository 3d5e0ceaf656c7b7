/**
 * Copies the built declarations to dist/cjs-types, under a package.json that makes them CommonJS. A CommonJS
 * app that requires the package (Node ≥ 20.19 loads its ES modules with require) resolves these through the
 * `require` condition: TypeScript then reads drizzle-orm's CommonJS declarations for them too, the same ones
 * the app's own `drizzle()` returns. With the ES declarations, the app's database would be a different
 * BaseSQLiteDatabase declaration from the one the package expects, and would not type-check.
 */
import { copyFileSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'

const DIST = 'dist'
const OUT = join(DIST, 'cjs-types')

for (const entry of readdirSync(DIST, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !entry.name.endsWith('.d.ts')) continue
  const from = join(entry.parentPath, entry.name)
  const to = join(OUT, relative(DIST, from))
  mkdirSync(dirname(to), { recursive: true })
  copyFileSync(from, to)
}
writeFileSync(join(OUT, 'package.json'), `${JSON.stringify({ type: 'commonjs' })}\n`)
