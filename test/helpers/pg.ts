/**
 * Fresh PostgreSQL databases on the run's server (test/helpers/pg-global.ts), migrated with the project's
 * drizzle-kit migrations (drizzle-pg/), as a user would: one uniquely named database per test or per file,
 * dropped afterwards, so files running side by side never see each other's rows.
 */
import { randomBytes } from 'node:crypto'
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres'
import { migrate } from 'drizzle-orm/node-postgres/migrator'
import { drizzle as drizzlePostgresJs, type PostgresJsDatabase } from 'drizzle-orm/postgres-js'
import pg from 'pg'
import type postgres from 'postgres'
import { afterEach, beforeEach, inject } from 'vitest'
import { connectionOf } from '../../src/dialect/open.js'
import type { PgConnection } from '../../src/dialect/pg/connection.js'
import type { PgDatabase } from '../../src/index.js'
import * as schema from '../../src/schema/pg.js'
import { NO_SERVER, TEMPLATE_PREFIX } from './pg-global.js'
import { databaseUrl, onServer, PG_MIGRATIONS } from './pg-database.js'
import { openPostgresJs, type PostgresJsMajor } from './postgres-js.js'

export { databaseUrl, PG_MIGRATIONS }
export { openPostgresJs, POSTGRES_JS, type PostgresJsMajor } from './postgres-js.js'

export interface TestPgDb {
  /** The database's name, unique to its test (or file). */
  name: string
  url: string
  /** A node-postgres pool on the database; its idle clients' errors go to `poolErrors`. */
  pool: pg.Pool
  db: NodePgDatabase<typeof schema>
  /**
   * Errors the pool emitted: an idle client whose server process ended (the database dropped, the server
   * restarted). Without a listener such an error would crash the test process.
   */
  poolErrors: Error[]
  /**
   * Opens a postgres.js connection to the same database, as another part of the app would, on 3.4 unless
   * `major` says 4; closed by `drop`.
   */
  postgresJs(major?: PostgresJsMajor): { client: postgres.Sql; db: PostgresJsDatabase<typeof schema> }
  /** Closes every connection the helper opened, then drops the database; once, however often it is called. */
  drop(): Promise<void>
}

/** The URL of the run's server, or an error whose one line says how to get one. */
export function pgServerUrl(): string {
  const server = inject('pgServer') ?? { unavailable: NO_SERVER }
  if ('unavailable' in server) throw new Error(server.unavailable)
  return server.url
}

/** Per server, the database this process migrated once, which each fresh database copies. */
const templates = new Map<string, Promise<string>>()

/**
 * A database migrated with the project's migrations once per process (a test file, say) and server, left with no
 * connection: `create database … template` copies it in a fraction of a migration's time. The run's end drops it
 * (pg-global.ts), with the private cluster or by its name's prefix.
 */
function migratedTemplate(server: string): Promise<string> {
  let template = templates.get(server)
  if (!template) {
    template = (async () => {
      // Named by the run's main process (the worker's parent), whose end drops its templates.
      const name = `${TEMPLATE_PREFIX}${process.ppid}_${process.pid}_${randomBytes(6).toString('hex')}`
      await onServer(server, (client) => client.query(`create database "${name}"`))
      const pool = new pg.Pool({ connectionString: databaseUrl(server, name), max: 1 })
      pool.on('error', () => {})
      try {
        await migrate(drizzle(pool), { migrationsFolder: PG_MIGRATIONS })
      } finally {
        await pool.end()
      }
      return name
    })()
    templates.set(server, template)
    template.catch(() => templates.delete(server))
  }
  return template
}

/**
 * A new database with the queue tables migrated in (a copy of the process's migrated template), or left empty
 * (`migrate: false`): on the run's server, or on the server whose URL `server` gives (outside a test run:
 * `npm run soak -- --pg`).
 */
export async function freshPgDb(options: { migrate?: boolean; server?: string } = {}): Promise<TestPgDb> {
  const server = options.server ?? pgServerUrl()
  const name = `drizzle_jobs_test_${process.pid}_${randomBytes(6).toString('hex')}`
  // Inside a test run a copy of the migrated template; outside one (a soak), migrated here, leaving nothing behind.
  const copied = options.migrate !== false && process.env.VITEST !== undefined
  const template = copied ? await migratedTemplate(server) : null
  await onServer(server, (client) => client.query(`create database "${name}"${template ? ` template "${template}"` : ''}`))
  const url = databaseUrl(server, name)
  const poolErrors: Error[] = []
  const pool = new pg.Pool({ connectionString: url, max: 10 })
  pool.on('error', (error) => poolErrors.push(error))
  const db = drizzle(pool, { schema })
  const postgresJsClients: postgres.Sql[] = []
  let dropped: Promise<void> | undefined
  const drop = (): Promise<void> =>
    (dropped ??= (async () => {
      await Promise.all(postgresJsClients.splice(0).map((client) => client.end({ timeout: 5 })))
      await pool.end()
      // WITH (FORCE) ends the connections that others (a child process, a leaked client) still hold on it.
      await onServer(server, (client) => client.query(`drop database if exists "${name}" with (force)`))
    })())
  try {
    if (options.migrate !== false && !copied) await migrate(db, { migrationsFolder: PG_MIGRATIONS })
  } catch (error) {
    await drop()
    throw error
  }
  return {
    name,
    url,
    pool,
    db,
    poolErrors,
    postgresJs(major = 'postgres.js') {
      const client = openPostgresJs(major, url, { max: 4 })
      postgresJsClients.push(client)
      return { client, db: drizzlePostgresJs(client, { schema }) }
    },
    drop,
  }
}

/** Gives each test of the file a fresh migrated database as `t`, dropped after the test. */
export function eachFreshPgDb(): TestPgDb {
  let current: TestPgDb | undefined
  const now = (): TestPgDb => {
    if (!current) throw new Error('the fresh database exists only inside a test')
    return current
  }
  beforeEach(async () => {
    current = await freshPgDb()
  })
  afterEach(async () => {
    await current?.drop()
    current = undefined
  })
  return {
    get name() {
      return now().name
    },
    get url() {
      return now().url
    },
    get pool() {
      return now().pool
    },
    get db() {
      return now().db
    },
    get poolErrors() {
      return now().poolErrors
    },
    postgresJs: (major) => now().postgresJs(major),
    drop: () => now().drop(),
  }
}

/** The engine's connection behind a Drizzle PostgreSQL handle, through the drivers' registry, with the driver behind it. */
export function pgConnectionOf(db: unknown): PgConnection {
  return connectionOf(db as PgDatabase) as PgConnection
}
