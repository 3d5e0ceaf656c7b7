/**
 * What a lease promises when a worker's process stalls, and when one process holds several workers that do not
 * share their module state (test/fixtures/lease-child.ts), on every driver several processes share:
 * - JOB-16: a worker whose event loop is blocked for six leases, or whose process is frozen with SIGSTOP, while
 *   another process takes its jobs over, starts no step's function once its job was taken;
 * - JOB-05: workers in two worker threads, or from two copies of the package, in one process, never take each
 *   other's live runs for a dead process's.
 */
import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { randomBytes } from 'node:crypto'
import { afterAll, describe, expect, test } from 'vitest'
import { defineQueue, enqueueMany, type Database } from '../../src/index.js'
import { tempDir } from '../helpers/db.js'
import { eachContractDb, type ContractDb, type DialectName } from '../helpers/dialects.js'
import { STARTUP_MS, startFixture, type Child } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'
import type { Counted } from '../fixtures/lease-child.js'

const counted = defineQueue<Counted>('counted')

/** The lease of the workers that stall: six of them is the busy loop's length. */
const LEASE_MS = 500

const DRIVERS: readonly { name: string; database: DialectName; env: Record<string, string> }[] = [
  { name: 'sqlite', database: 'sqlite', env: {} },
  { name: 'libsql', database: 'libsql', env: {} },
  { name: 'postgres', database: 'postgres', env: {} },
  { name: 'postgres] [postgres.js', database: 'postgres', env: { PG_DRIVER: 'postgres.js' } },
  { name: 'postgres] [postgres.js 4', database: 'postgres', env: { PG_DRIVER: 'postgres.js 4' } },
]

interface Logged {
  starts: { id: string; attempt: number; at: number }[]
  effects: { id: string; step: string; attempt: number; pid: number; at: number }[]
  stalls: { from: number; to: number }[]
  /** What the handlers threw, as logged. */
  errors: string[]
}

function readLog(dir: string): Logged {
  const logged: Logged = { starts: [], effects: [], stalls: [], errors: [] }
  const file = join(dir, 'log')
  if (!existsSync(file)) return logged
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const [kind, ...f] = line.split(' ')
    if (kind === 'start') logged.starts.push({ id: f[0]!, attempt: Number(f[1]), at: Number(f[3]) })
    if (kind === 'effect') logged.effects.push({ id: f[0]!, step: f[1]!, attempt: Number(f[2]), pid: Number(f[3]), at: Number(f[4]) })
    if (kind === 'stall') logged.stalls.push({ from: Number(f[0]), to: Number(f[1]) })
    if (kind === 'error') logged.errors.push(line)
  }
  return logged
}

/** Whether process `pid` is stopped (its state in /proc is T). */
function stopped(pid: number): boolean {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).startsWith('T')
}

/** Waits until every job of `counted` has ended, and answers how many ended in each state. */
async function allEnded(t: ContractDb, jobs: number, timeoutMs = 60_000): Promise<Record<string, number>> {
  const states = async () => {
    const rows = await t.query<{ state: string; n: number | string }>(
      `select state, count(*) as n from jobs_job where queue = 'counted' group by state`,
    )
    return Object.fromEntries(rows.map((row) => [row.state, Number(row.n)]))
  }
  const ended = (counts: Record<string, number>) => (counts.done ?? 0) + (counts.failed ?? 0) + (counts.canceled ?? 0) === jobs
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const counts = await states()
    if (ended(counts)) return counts
    if (Date.now() > deadline)
      throw new Error(`the ${jobs} jobs of counted did not all end within ${timeoutMs} ms: ${JSON.stringify(counts)}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Adds `jobs` jobs of `value`; those `stallAfter` answers a number for may stall their worker (test/fixtures/lease-child.ts). */
function addCounted(db: Database, jobs: number, value: Counted, stallAfter: (i: number) => number | undefined = () => undefined) {
  return enqueueMany(
    db as never,
    counted,
    Array.from({ length: jobs }, (_, i) => {
      const turns = stallAfter(i)
      return { value: turns === undefined ? value : { ...value, stallAfter: turns }, id: `job-${i}` }
    }),
  )
}

/**
 * What a stall may leave, read from the workers' log. A step's function called by an attempt after a later attempt of
 * its job had started is a late start. A function may be called twice, by a run that lost its lease while inside it
 * (or before it kept the answer), but only if that run's call came while the lease held: the call starts within two
 * thirds of a lease after the run's check renewed it, so no other worker can take the job before a third of a lease
 * after the call. A later attempt started sooner than that means the call came after the lease was lost.
 */
function lateAndDoubled(logged: Logged) {
  const startOf = (id: string, attempt: number) => logged.starts.find((start) => start.id === id && start.attempt === attempt)
  const late = logged.effects.filter((effect) =>
    logged.starts.some((start) => start.id === effect.id && start.attempt > effect.attempt && start.at < effect.at),
  )
  const calls = new Map<string, Logged['effects']>()
  for (const effect of logged.effects)
    calls.set(`${effect.id} ${effect.step}`, [...(calls.get(`${effect.id} ${effect.step}`) ?? []), effect])
  const doubled = [...calls.values()].filter((list) => list.length > 1)
  const tooSoon = doubled.filter((list) =>
    list.slice(1).some((next, i) => (startOf(next.id, next.attempt)?.at ?? 0) - list[i]!.at < LEASE_MS / 3 - 2),
  )
  return { late, doubled: doubled.length, tooSoon }
}

/** What every stall must leave: no late start, no call twice whose first came after its lease was lost, 400 done, a takeover. */
function expectNoLateStep(logged: Logged, states: Record<string, number>): void {
  const { late, doubled, tooSoon } = lateAndDoubled(logged)
  expect(late, `step functions started after another attempt of their job (${doubled} called twice)`).toEqual([])
  expect(tooSoon, `step functions called twice, whose first call came after its lease was lost: ${describeCalls(logged, tooSoon)}`).toEqual(
    [],
  )
  expect(states).toEqual({ done: 400 })
  expect(
    logged.starts.some((start) => start.attempt > 1),
    'another process took over jobs of the stalled one',
  ).toBe(true)
}

/** The calls of `lists` with the starts of their jobs' runs, for a failure's message. */
function describeCalls(logged: Logged, lists: Logged['effects'][]): string {
  return JSON.stringify(lists.map((list) => ({ calls: list, starts: logged.starts.filter((start) => start.id === list[0]!.id) })))
}

/** Each test waits for processes and for 400 jobs on a loaded machine: its own bound, not the suite's minute. */
describe.each(DRIVERS)('$name', ({ name, database, env }) => {
  const { t } = eachContractDb(database)
  const on = `[${name}]`

  /**
   * Starts the two worker processes of a stall: the one that takes the jobs over, loaded but waiting; then `stalled`
   * (with `stalledEnv`); then, once that one blocks its event loop or has called 40 step functions (so that it has runs
   * under way), lets the first one work.
   */
  async function twoWorkers(
    dir: string,
    stalledEnv: Record<string, string> = {},
    beforeGo: (stalled: Child) => void = () => {},
  ): Promise<{ stalled: Child; other: Child }> {
    const other = startFixture('lease-child.ts', ['work', t.address, dir], { ...env, LEASE_MS: String(LEASE_MS), WAIT_FOR_GO: '1' })
    const stalled = startFixture('lease-child.ts', ['work', t.address, dir], { ...env, ...stalledEnv, LEASE_MS: String(LEASE_MS) })
    const pid = Number(stalled.process.pid)
    await waitFor(
      () =>
        /^stalling /m.test(readFileSync(join(dir, 'log'), 'utf8')) ||
        readLog(dir).effects.filter((effect) => effect.pid === pid).length >= 40,
      'the worker that stalls to run steps',
      STARTUP_MS,
    )
    beforeGo(stalled)
    writeFileSync(join(dir, 'go'), '')
    return { stalled, other }
  }

  /** Waits until the other worker has started a later attempt of a job: it took the stalled one's jobs over. */
  async function tookOver(dir: string): Promise<void> {
    await waitFor(() => readLog(dir).starts.some((start) => start.attempt > 1), 'the other worker to take jobs over', STARTUP_MS)
  }

  test(`JOB-16 ${on} a worker whose event loop is blocked past its lease starts no step's function of a job another process took meanwhile`, async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'log'), '')
    // A synchronous driver answers a step's check of its lease at once: the block must come between that answer and
    // the call of the step's function, which the runs claimed with the blocking one reach three or four turns of the
    // microtask queue after they start. On the others it falls while checks are in flight, once the worker is busy.
    const synchronous = name === 'sqlite'
    await addCounted(t.db, 400, { steps: 4, stepMs: 0 }, (i) => (i < 24 || i % 20 === 19 ? 3 + (i % 2) : undefined))
    // Blocked until the other worker took jobs over (at least six leases: its start, its look for expired leases),
    // or two minutes, whatever the machine's load.
    await twoWorkers(dir, { STALL_MS: String(STARTUP_MS), STALL_AFTER_EFFECTS: synchronous ? '0' : '40' })
    await tookOver(dir)
    writeFileSync(join(dir, 'release'), '')
    await waitFor(() => readLog(dir).stalls.length > 0, 'the worker to wake', STARTUP_MS)
    const states = await allEnded(t, 400)
    const logged = readLog(dir)
    expect(logged.stalls, 'the worker blocked its event loop once').toHaveLength(1)
    expectNoLateStep(logged, states)
  }, 180_000)

  test(`JOB-16 ${on} a worker whose process is frozen with SIGSTOP past its lease starts no step's function of a job another process took meanwhile`, async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'log'), '')
    await addCounted(t.db, 400, { steps: 4, stepMs: 0 })
    // Frozen while its runs are under way, before the other worker starts; thawed once that one took jobs over. A
    // freeze that falls inside a write of SQLite's holds its file's lock, and nobody takes anything over until it
    // thaws: such a freeze is thawed after a while and the process frozen again.
    const { stalled } = await twoWorkers(dir, {}, (frozen) => void frozen.process.kill('SIGSTOP'))
    const taken = () => readLog(dir).starts.some((start) => start.attempt > 1)
    for (let freeze = 1; ; freeze++) {
      await waitFor(() => stopped(stalled.process.pid!), 'the worker to be stopped', 5_000)
      const until = Date.now() + 20 * LEASE_MS
      while (!taken() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20))
      stalled.process.kill('SIGCONT')
      if (taken() || freeze === 10) break
      await new Promise((resolve) => setTimeout(resolve, LEASE_MS / 5))
      stalled.process.kill('SIGSTOP')
    }
    const states = await allEnded(t, 400)
    const logged = readLog(dir)
    expectNoLateStep(logged, states)
  }, 180_000)

  test.each([
    ['two worker threads', 'threads'],
    ['two copies of the package', 'copies'],
  ])(
    `JOB-05 ${on} workers in %s of one process never take each other's live runs: each job runs once, none fails`,
    async (_what, mode) => {
      const dir = tempDir()
      writeFileSync(join(dir, 'log'), '')
      // Long enough that the workers' maintenance, once a second, looks at each other's runs while they are under way.
      await addCounted(t.db, 24, { steps: 1, stepMs: 600 })
      const child = startFixture('lease-child.ts', [mode, t.address, dir, packageCopies()], { ...env, LEASE_MS: '30000' })
      const states = await allEnded(t, 24)
      const logged = readLog(dir)
      expect(states).toEqual({ done: 24 })
      expect(logged.errors).toEqual([])
      expect(logged.starts.map((start) => `${start.id} ${start.attempt}`).sort()).toEqual(
        Array.from({ length: 24 }, (_, i) => `job-${i} 1`).sort(),
      )
      expect(logged.effects).toHaveLength(24)
      child.process.kill('SIGKILL')
    },
    180_000,
  )
})

let copies: string | undefined
/**
 * Two copies of the package's source, as a monorepo or a bundle holding two copies loads them: each with its own
 * module state. Made once, inside the repository so that they find its node_modules; removed after the file.
 */
function packageCopies(): string {
  if (copies) return copies
  const root = resolve(import.meta.dirname, '../..')
  const dir = join(root, '.tmp', `copies-${randomBytes(4).toString('hex')}`)
  for (const copy of ['a', 'b']) cpSync(join(root, 'src'), join(dir, copy, 'src'), { recursive: true })
  copies = dir
  return dir
}

afterAll(() => {
  if (copies) rmSync(copies, { recursive: true, force: true })
})
