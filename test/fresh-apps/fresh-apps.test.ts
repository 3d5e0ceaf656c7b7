/**
 * The package installed into fresh apps the way the README says, with no lockfile and no --legacy-peer-deps: a
 * SQLite app on better-sqlite3, one on libsql (whose command-line tool opens the file with libsql), a PostgreSQL
 * app on node-postgres, one on postgres.js and one on PGlite (whose database is a directory of the app's, which
 * the command-line tool does not open). Each app installs the newest releases npm has of its driver, drizzle-orm
 * and drizzle-kit, named as an app already on them has them (versions.ts): a peer range that leaves one out fails
 * its install. Then again on the oldest versions the peer ranges admit, where they differ. Each runs the README's
 * adoption path end to end (drizzle-kit generate and migrate, a job added in the app's transaction, a worker, the
 * job done, the command-line tool's status and dashboard), from ES modules and from CommonJS, with the contracts
 * of smoke.ts; and then again after moving to drizzle-orm and drizzle-kit 1.0 (their release candidate, which
 * npm serves under no tag, so it is named), on a fresh database with migrations made by drizzle-kit 1.0.
 * An app has only its own driver: the tool run on the other database says which package to install.
 *
 * When a new major of a peer appears, this is the test that fails first. It runs after the main suite
 * (vitest.fresh.config.ts), on its own, as it compiles better-sqlite3 and installs from npm (its cache may
 * serve the packages).
 */
import { execFile, spawn } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { freshPgDb } from '../helpers/pg.js'
import { DRIZZLE_1, newest, oldest } from './versions.js'

const ROOT = resolve(import.meta.dirname, '../..')
const APPS = join(import.meta.dirname, 'apps')
/** Outside the repository, so that an app resolves nothing from the repository's node_modules. */
const scratch = mkdtempSync(join(tmpdir(), 'drizzle-jobs-fresh-apps-'))
let tarball: string
/**
 * better-sqlite3's install (prebuild-install) takes a prebuilt binary from a folder its env variable names before it
 * downloads one, which npm cannot here, or compiles one: the binary the repository's own install compiled, of the
 * same version, is put there as the prebuilt one, as on a machine that built it before. An app that npm gives another
 * version of better-sqlite3 compiles its own.
 */
const prebuilds = join(scratch, 'prebuilds')
const PREBUILDS_ENV = { npm_config_better_sqlite3_local_prebuilds: prebuilds }

beforeAll(async () => {
  const packed = await run(ROOT, 'npm', ['pack', '--ignore-scripts', '--pack-destination', scratch, '--json'])
  tarball = join(scratch, (JSON.parse(packed.stdout) as [{ filename: string }])[0].filename)
  const betterSqlite3 = join(ROOT, 'node_modules', 'better-sqlite3')
  const { version } = JSON.parse(readFileSync(join(betterSqlite3, 'package.json'), 'utf8')) as { version: string }
  mkdirSync(prebuilds)
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`
  await run(betterSqlite3, 'tar', ['-czf', join(prebuilds, name), 'build/Release/better_sqlite3.node'])
}, 120_000)
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

interface Ran {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs a command to its end: what it printed and its exit code. Throws when it ends otherwise than `expected`. */
function run(
  cwd: string,
  command: string,
  args: string[],
  options: { env?: Record<string, string>; expected?: number } = {},
): Promise<Ran> {
  return new Promise((done, fail) => {
    execFile(
      command,
      args,
      { cwd, env: { ...process.env, ...options.env }, maxBuffer: 64 * 1024 * 1024, timeout: 300_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : null) : 0
        if (code !== (options.expected ?? 0))
          fail(new Error(`${command} ${args.join(' ')} in ${cwd} ended with ${code ?? error?.message}\n${stdout}\n${stderr}`))
        else done({ code, stdout, stderr })
      },
    )
  })
}

type Dialect = 'sqlite' | 'libsql' | 'pg' | 'postgres' | 'pglite'

/** An app's versions before its move to drizzle-orm 1.0, and which they are. */
interface Versions {
  driver: string
  drizzleOrm: string
  drizzleKit: string
  which: string
}

const NEWEST = await newest(['drizzle-orm', 'drizzle-kit', 'better-sqlite3', '@libsql/client', 'pg', 'postgres', '@electric-sql/pglite'])

/**
 * The versions an app on `driver` runs on: the newest releases; then the first version of each line of the
 * driver's peer range, with the first of drizzle-orm's, where that is not the newest again. drizzle-kit, which
 * the package does not import and gives no range, is its newest in each.
 */
function versionsOf(driver: string): Versions[] {
  const drizzleKit = NEWEST['drizzle-kit']!
  const latest = { driver: NEWEST[driver]!, drizzleOrm: NEWEST['drizzle-orm']!, drizzleKit }
  const first = oldest(driver).map((version) => ({ driver: version, drizzleOrm: oldest('drizzle-orm')[0]!, drizzleKit }))
  const same = (a: Omit<Versions, 'which'>) => a.driver === latest.driver && a.drizzleOrm === latest.drizzleOrm
  return [
    { ...latest, which: first.some(same) ? 'the newest, and the oldest the ranges admit' : 'the newest' },
    ...first.filter((versions) => !same(versions)).map((versions) => ({ ...versions, which: 'the oldest the ranges admit' })),
  ]
}

/** What a test's name says of an app's versions. */
const named = (driver: string, versions: Versions): string =>
  `${driver}@${versions.driver} and drizzle-orm@${versions.drizzleOrm} (${versions.which})`

/**
 * A new app folder with the README's install, each package named at its version: the package, drizzle-orm and
 * the app's driver, and drizzle-kit.
 */
async function newApp(dialect: Dialect, driver: string, versions: Versions, types: string[]): Promise<string> {
  const app = mkdtempSync(join(scratch, `${dialect}-app-`))
  mkdirSync(join(app, 'src'))
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: `fresh-${dialect}-app`, private: true, type: 'module' }, null, 2))
  const install = ['install', '--no-audit', '--no-fund', '--prefer-offline']
  await run(app, 'npm', [...install, tarball, `drizzle-orm@${versions.drizzleOrm}`, `${driver}@${versions.driver}`], { env: PREBUILDS_ENV })
  await run(app, 'npm', [...install, '--save-dev', `drizzle-kit@${versions.drizzleKit}`, 'typescript', '@types/node', ...types], {
    env: PREBUILDS_ENV,
  })
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify(
      {
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          skipLibCheck: true,
          types: ['node'],
          outDir: 'dist',
          rootDir: 'src',
        },
        include: ['src'],
      },
      null,
      2,
    ),
  )
  // The PostgreSQL apps share all but the file that opens their driver.
  for (const folder of dialect === 'sqlite' ? ['sqlite'] : dialect === 'libsql' ? ['sqlite', 'libsql'] : ['postgresql', dialect]) {
    for (const file of readdirSync(join(APPS, folder))) {
      const into = file.endsWith('.ts') && file !== 'drizzle.config.ts' ? join(app, 'src', file) : join(app, file)
      copyFileSync(join(APPS, folder, file), into)
    }
  }
  copyFileSync(join(APPS, 'smoke.ts'), join(app, 'src', 'smoke.ts'))
  return app
}

/** What versions npm put in the app: the test's report says what it ran on. */
async function installed(app: string, names: string[]): Promise<string> {
  const tree = JSON.parse((await run(app, 'npm', ['ls', '--json', '--depth=0', ...names])).stdout) as {
    dependencies: Record<string, { version: string }>
  }
  return names.map((name) => `${name}@${tree.dependencies[name]?.version}`).join(' ')
}

/**
 * The README's path once, on whatever drizzle-orm the app has: migrations made and applied by drizzle-kit on a
 * fresh database, the app's ES module and CommonJS entries, and the tool's status on the app's database (none for
 * a PGlite app's: `database` null).
 */
async function adopt(app: string, database: string | null, env: Record<string, string>): Promise<void> {
  for (const made of ['drizzle', 'dist', 'data', 'app.db', 'app.db-wal', 'app.db-shm'])
    rmSync(join(app, made), { recursive: true, force: true })
  await run(app, 'npx', ['drizzle-kit', 'generate'], { env })
  await run(app, 'npx', ['drizzle-kit', 'migrate'], { env })
  // The app's code compiled by whatever TypeScript npm gives a new app: the package's types on this drizzle-orm.
  await run(app, 'npx', ['tsc', '-p', '.'], { env })
  const esm = await run(app, 'node', ['dist/main.js'], { env })
  expect(esm.stdout).toContain('ok JOB-06 a finished step is not run again by a later attempt')
  expect(esm.stdout.trim().split('\n').at(-1)).toBe('done')
  const cjs = await run(app, 'node', ['main.cjs'], { env })
  expect(cjs.stdout.trim()).toBe('commonjs done {"doubled":2}')
  if (database === null) return
  const status = await run(app, 'npx', ['drizzle-jobs', 'status', '--db', database], { env })
  expect(status.stdout).toMatch(/replies/)
  expect(status.stdout).toMatch(/from-commonjs/)
  await dashboardAnswers(app, database, env)
}

/** The tool's dashboard command serves the app's database: its overview lists the app's queues. */
async function dashboardAnswers(app: string, database: string, env: Record<string, string>): Promise<void> {
  const child = spawn('npx', ['drizzle-jobs', 'dashboard', '--db', database, '--port', '0', '--json'], {
    cwd: app,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    // A group of its own: npx runs the tool in a child of its own, which a signal to npx alone would leave serving.
    detached: true,
  })
  const exited = new Promise<void>((ended) => child.on('exit', () => ended()))
  try {
    const url = await new Promise<string>((found, fail) => {
      let out = ''
      let err = ''
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString()
        const line = out.split('\n').find((text) => text.startsWith('{'))
        if (line) found((JSON.parse(line) as { url: string }).url)
      })
      child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()))
      child.on('exit', (code) => fail(new Error(`the dashboard exited with ${code}: ${out}${err}`)))
    })
    const page = await fetch(url)
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('replies')
  } finally {
    process.kill(-child.pid!, 'SIGTERM')
    await exited
  }
}

/** Moves an app to drizzle-orm and drizzle-kit 1.0, named as npm serves them under no tag. */
async function toDrizzle1(app: string, env: Record<string, string> = {}): Promise<void> {
  await run(
    app,
    'npm',
    ['install', '--no-audit', '--no-fund', '--prefer-offline', `drizzle-orm@${DRIZZLE_1}`, `drizzle-kit@${DRIZZLE_1}`],
    { env },
  )
}

/** The tool, given the database of a driver the app did not install, exits 8 and names the package. */
async function saysWhichDriver(app: string, database: string, driver: string): Promise<void> {
  const refused = await run(app, 'npx', ['drizzle-jobs', 'status', '--db', database], { expected: 8 })
  expect(refused.stderr).toContain(`npm install ${driver}`)
}

for (const versions of versionsOf('better-sqlite3')) {
  test.concurrent(`a fresh SQLite app on ${named('better-sqlite3', versions)}: npm install drizzle-jobs drizzle-orm better-sqlite3, then the README on drizzle-orm 0.45 and 1.0`, async () => {
    const app = await newApp('sqlite', 'better-sqlite3', versions, ['@types/better-sqlite3'])
    console.log(`SQLite app: ${await installed(app, ['drizzle-orm', 'drizzle-kit', 'better-sqlite3'])}`)
    await adopt(app, 'app.db', {})
    await saysWhichDriver(app, 'postgres://127.0.0.1:9/none', 'pg')

    await toDrizzle1(app, PREBUILDS_ENV)
    console.log(`SQLite app: ${await installed(app, ['drizzle-orm', 'drizzle-kit', 'better-sqlite3'])}`)
    await adopt(app, 'app.db', {})
  }, 900_000)
}

for (const [dialect, driver, types] of [
  ['pg', 'pg', ['@types/pg']],
  ['postgres', 'postgres', []],
] as const) {
  for (const versions of versionsOf(driver)) {
    test.concurrent(`a fresh PostgreSQL app on ${named(driver, versions)}: npm install drizzle-jobs drizzle-orm ${driver}, then the README on drizzle-orm 0.45 and 1.0`, async () => {
      const app = await newApp(dialect, driver, versions, [...types])
      console.log(`PostgreSQL app: ${await installed(app, ['drizzle-orm', 'drizzle-kit', driver])}`)
      for (const stage of ['0.45', '1.0']) {
        if (stage === '1.0') {
          await toDrizzle1(app)
          console.log(`PostgreSQL app: ${await installed(app, ['drizzle-orm', 'drizzle-kit', driver])}`)
        }
        const database = await freshPgDb({ migrate: false })
        try {
          await adopt(app, database.url, { DATABASE_URL: database.url })
        } finally {
          await database.drop()
        }
      }
      // A SQLite file, which needs a driver this app does not have.
      writeFileSync(join(app, 'other.db'), '')
      await saysWhichDriver(app, 'other.db', 'better-sqlite3')
    }, 900_000)
  }
}

for (const [dialect, name, driver, database, guide] of [
  ['libsql', 'libsql', '@libsql/client', 'app.db', 'the README'],
  ['pglite', 'PGlite', '@electric-sql/pglite', null, 'docs/postgres.md'],
] as const) {
  for (const versions of versionsOf(driver)) {
    test.concurrent(`a fresh ${name} app on ${named(driver, versions)}: npm install drizzle-jobs drizzle-orm ${driver}, then ${guide} on drizzle-orm 0.45 and 1.0`, async () => {
      const app = await newApp(dialect, driver, versions, [])
      for (const stage of ['0.45', '1.0']) {
        if (stage === '1.0') await toDrizzle1(app)
        console.log(`${name} app: ${await installed(app, ['drizzle-orm', 'drizzle-kit', driver])}`)
        await adopt(app, database, {})
      }
      await saysWhichDriver(app, 'postgres://127.0.0.1:9/none', 'pg')
    }, 900_000)
  }
}
