#!/usr/bin/env node
/**
 * drizzle-jobs, the command-line tool: look at the queues of a database and
 * act on its jobs. `drizzle-jobs --help` lists the commands and exit codes.
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { DEFAULT_DASHBOARD_HOST, DEFAULT_DASHBOARD_PORT, serveDashboard, type ServedDashboard } from '../dashboard/serve.js'
import { isJobsError } from '../errors.js'
import { cancelCommand, list, pause, pruneCommand, retry, schedules, show, status, type Args, type Output } from './commands.js'
import { CliError, EXIT, usageError, type ExitCode } from './exit.js'
import { json, printable, printableLines } from './format.js'
import { databaseTarget, openDatabase, type OpenDatabase } from './open.js'

const HELP = `drizzle-jobs: look at and act on the job queues of a SQLite or PostgreSQL database

usage: drizzle-jobs COMMAND [ARGUMENTS] --db FILE|URL [--json]

commands
  status [--queue Q]                         queues: counts by state, done and failed in the
                                             last minute, how long the oldest due job has waited
  list [--queue Q] [--state S] [--group G]   one page of jobs (waiting in claim order, ended ones
       [--id ID] [--limit N] [--cursor C]    most recent first); the next page's --cursor is printed
  show ID [--queue Q]                        one job: value, result, error with stack, steps, lease,
                                             what a parked run waits for and the job's events, the
                                             trace id of the code that added it
  retry ID [--queue Q]                       a failed or canceled job runs again, with fresh attempts
  cancel ID [--queue Q]                      a job that has not ended ends canceled (a running one
                                             is aborted)
  pause QUEUE                                workers in every process stop claiming from QUEUE
  resume QUEUE                               they start again
  prune --older-than DURATION                deletes jobs that ended longer ago than DURATION
        [--queue Q] [--state S]...           (7d, 12h, 30m, 500ms), optionally of one queue or state
  schedules [--queue Q]                      recurring schedules: cron and zone, next slot, last
                                             slot and the state of its job
  dashboard [--host H] [--port P] [--token T]
                                             the web dashboard, on 127.0.0.1:4580 by default; any
                                             other address needs a token (or DRIZZLE_JOBS_TOKEN)

options
  --db FILE|URL the SQLite file the app uses, a postgres:// URL, or a PGlite data directory
                (or set DRIZZLE_JOBS_DB; without either, DATABASE_URL names a PostgreSQL database)
  --json        print JSON on stdout for scripts; errors as {"error":{...}} on stderr
  -h, --help    this text
  --version     the version of drizzle-jobs

An ID with no --queue is looked up in every queue; it must be in one only.

exit codes
  0  done
  1  unexpected failure (a bug, a disk error): see stderr
  2  usage: unknown command or option, missing or bad argument
  3  database: no such file, not a SQLite database nor a PGlite data directory, a PGlite
     directory another process has open, or the jobs_* tables are not migrated
  4  not found: no job with that id
  5  refused: the job's state does not allow it (nothing changed)
  6  bad URL: the database URL cannot be read, or is not postgres:// or postgresql://
  7  unreachable: the PostgreSQL server refused the connection (nothing listens there,
     no such database, or the login failed)
  8  driver: the database's driver is not installed (better-sqlite3 or @libsql/client
     for a file, pg or postgres for a URL, @electric-sql/pglite for a PGlite directory)
`

const OPTIONS = {
  db: { type: 'string' },
  json: { type: 'boolean' },
  queue: { type: 'string', short: 'q' },
  state: { type: 'string', multiple: true },
  group: { type: 'string' },
  id: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  'older-than': { type: 'string' },
  host: { type: 'string' },
  port: { type: 'string' },
  token: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
} as const

type OptionName = keyof typeof OPTIONS
const COMMON: OptionName[] = ['db', 'json', 'help']

/** Each command, the options it takes beside --db and --json, and what it runs. */
const COMMANDS = new Map<string, { options: OptionName[]; run: (open: OpenDatabase, args: Args) => Promise<Output> }>([
  ['status', { options: ['queue'], run: status }],
  ['list', { options: ['queue', 'state', 'group', 'id', 'limit', 'cursor'], run: list }],
  ['show', { options: ['queue'], run: show }],
  ['retry', { options: ['queue'], run: retry }],
  ['cancel', { options: ['queue'], run: cancelCommand }],
  ['pause', { options: ['queue'], run: (open, args) => pause(open, args, true) }],
  ['resume', { options: ['queue'], run: (open, args) => pause(open, args, false) }],
  ['prune', { options: ['older-than', 'queue', 'state'], run: pruneCommand }],
  ['schedules', { options: ['queue'], run: schedules }],
])

async function main(argv: string[]): Promise<ExitCode> {
  let asJson = argv.includes('--json')
  try {
    const { values, positionals } = parse(argv)
    asJson = values.json === true
    const [command, ...rest] = positionals
    if (values.version) {
      process.stdout.write(`${version()}\n`)
      return EXIT.OK
    }
    if (values.help || command === undefined || command === 'help') {
      process.stdout.write(HELP)
      return command === undefined && !values.help ? EXIT.USAGE : EXIT.OK
    }
    if (command === 'dashboard') return await runDashboard(values, rest, asJson)
    const spec = COMMANDS.get(command)
    if (!spec)
      throw usageError(`unknown command '${command}' (commands: ${[...COMMANDS.keys(), 'dashboard'].join(', ')}); see drizzle-jobs --help`)
    for (const name of Object.keys(values) as OptionName[]) {
      if (!COMMON.includes(name) && !spec.options.includes(name)) throw usageError(`${command} takes no --${name}; see drizzle-jobs --help`)
    }
    const open = await openDatabase(databaseTarget(values.db, process.env))
    try {
      const output = await spec.run(open, { ...values, positionals: rest })
      process.stdout.write(`${asJson ? json(output.json) : output.text}\n`)
    } finally {
      await open.close()
    }
    return EXIT.OK
  } catch (error) {
    return fail(error, asJson)
  }
}

/** `dashboard`: serves the web dashboard until SIGINT or SIGTERM. */
async function runDashboard(values: ReturnType<typeof parse>['values'], rest: string[], asJson: boolean): Promise<ExitCode> {
  for (const name of Object.keys(values) as OptionName[]) {
    if (!COMMON.includes(name) && !['host', 'port', 'token'].includes(name))
      throw usageError(`dashboard takes no --${name}; see drizzle-jobs --help`)
  }
  if (rest.length > 0) throw usageError(`dashboard takes no argument (got ${rest.join(' ')})`)
  const port = values.port === undefined ? DEFAULT_DASHBOARD_PORT : Number(values.port)
  if (values.port !== undefined && !/^\d+$/.test(values.port)) throw usageError(`--port: expected a port number, got '${values.port}'`)
  const token = values.token ?? (process.env.DRIZZLE_JOBS_TOKEN || undefined)
  const open = await openDatabase(databaseTarget(values.db, process.env))
  let served: ServedDashboard
  try {
    served = await serveDashboard(open.db, {
      port,
      ...(values.host === undefined ? {} : { host: values.host }),
      ...(token === undefined ? {} : { token }),
      title: open.label,
    })
  } catch (error) {
    await open.close()
    const code = (error as { code?: unknown }).code
    if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL') {
      throw new CliError(
        EXIT.FAILURE,
        `cannot listen on ${values.host ?? DEFAULT_DASHBOARD_HOST}:${port} (${code}): pass another --port or --host`,
        'failure',
      )
    }
    throw error
  }
  process.stdout.write(
    asJson
      ? `${json({ url: served.url }, 0)}\n`
      : `drizzle-jobs dashboard of ${printable(open.label)} on ${served.url}\n(stop it with Ctrl-C)\n`,
  )
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve)
    process.once('SIGTERM', resolve)
  })
  await served.close()
  await open.close()
  return EXIT.OK
}

function parse(argv: string[]) {
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true })
  } catch (error) {
    throw usageError(`${(error as Error).message}; see drizzle-jobs --help`)
  }
}

/** Prints an error the way scripts and people each want it, and answers its exit code. */
function fail(error: unknown, asJson: boolean): ExitCode {
  const known = asCliError(error)
  if (asJson) {
    const body = known
      ? { kind: known.kind, message: known.message, exitCode: known.exitCode }
      : { kind: 'failure', message: (error as Error)?.message ?? String(error), exitCode: EXIT.FAILURE }
    process.stderr.write(`${json({ error: body }, 0)}\n`)
  } else {
    process.stderr.write(
      known
        ? `drizzle-jobs: ${printable(known.message)}\n`
        : `drizzle-jobs: unexpected failure: ${printableLines((error as Error)?.stack ?? String(error))}\n`,
    )
  }
  return known ? known.exitCode : EXIT.FAILURE
}

function asCliError(error: unknown): CliError | null {
  if (error instanceof CliError) return error
  if (!isJobsError(error)) return null
  switch (error.code) {
    case 'NOT_FOUND':
      return new CliError(EXIT.NOT_FOUND, error.message, 'not_found')
    case 'UNIQUE_KEY_HELD':
      return new CliError(EXIT.REFUSED, error.message, 'refused')
    case 'SCHEMA_MISSING':
      return new CliError(EXIT.DATABASE, error.message, 'database')
    case 'INVALID_OPTION':
    case 'INVALID_VALUE':
    case 'TOO_LARGE':
      return usageError(error.message)
    default:
      return null
  }
}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
  return pkg.version
}

process.exitCode = await main(process.argv.slice(2))
