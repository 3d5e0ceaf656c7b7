/**
 * The one place that decides a run lost its lease. A worker's lease is its
 * row in jobs_lease, one for all its runs, renewed every third of the lease;
 * a run holds its lease while its job is running that attempt for that
 * worker (the job's `owner` and `attempts`). A cancel or a rescue clears or
 * replaces the owner; a run that lost its lease is aborted with LEASE_LOST,
 * and nothing it writes lands (JOB-16).
 */
import { ask, type Connection, type Executor, type Kind, type Program, type Result } from '../dialect/index.js'
import type { ClaimedJob, WorkerLease } from '../dialect/index.js'
import { OWN_HOST_AND_PID } from './owner.js'
import type { RunContext } from './run.js'

/** Marks `run` as having lost its lease, saying so as a cancel when its job was canceled. */
function* leaseLost(db: Executor, run: RunContext): Program<void> {
  const state = yield* ask(db.jobGetState(run.seq))
  run.loseLease(state === 'canceled' ? `job '${run.id}' was canceled` : undefined)
}

/**
 * Checks `runs` of `owner` against its jobs: a run whose job no longer names it lost its lease. `ahead`, if given, are
 * the jobs claimed ahead: the ones whose row is gone are handed to its `lost` (not started, so nothing to abort). On a synchronous
 * connection the runs are aborted before it returns, so a cancel in this process aborts its run at once.
 * @internal
 */
export function checkLeases<K extends Kind>(
  connection: Connection<K>,
  owner: string,
  runs: Iterable<RunContext>,
  ahead?: { jobs: readonly ClaimedJob[]; lost: (jobs: ClaimedJob[]) => void },
): Result<K, void> {
  // Only what was there before the read is checked: a claim that commits meanwhile adds leases the read may miss.
  const checked = [...runs]
  const waiting = ahead ? [...ahead.jobs] : []
  return connection.read(function* (db) {
    const held = leaseKeys(yield* ask(db.jobListHeld(owner)))
    const lost = waiting.filter((job) => !held.has(leaseKey(job.seq, job.attempts)))
    if (lost.length > 0) ahead!.lost(lost)
    for (const run of checked) if (!held.has(leaseKey(run.seq, run.attempt))) yield* leaseLost(db, run)
  })
}

/**
 * Renews the lease of worker `lease.owner` (its row) until `lease.expiresAt`: outside any transaction, without waiting
 * on a lock of the worker's own (its flush, held up by a lock of the app's, say), and holding none once it has
 * answered (dialect executors' workerRenew). A run whose job no longer names the worker lost its lease. Throws the
 * database's busy error when another writer holds SQLite's lock.
 * @internal
 */
export async function renewLeases(connection: Connection, lease: WorkerLease, runs: Iterable<RunContext>): Promise<void> {
  // The runs under way before the renewal: one a claim started meanwhile holds a lease the renewal may not have seen.
  const checked = [...runs]
  const held = leaseKeys(await connection.executor.workerRenew(lease))
  for (const run of checked) if (!held.has(leaseKey(run.seq, run.attempt))) run.loseLease()
}

/**
 * When a worker's row was last written, so that a claim renews it in its own transaction once a third of the lease
 * has passed (a worker with no runs renews nothing meanwhile): a job is never claimed under a lease about to expire.
 * @internal
 */
export class LeaseClock {
  /** Until when (the worker's clock, ms) the last write of the row holds. */
  private heldUntil = Number.NEGATIVE_INFINITY

  constructor(
    readonly owner: string,
    readonly ms: number,
    private readonly channel: () => string | null,
  ) {}

  /** The row a claim at `now` writes, or null while the last one holds for more than two thirds of a lease. */
  forClaim(now: number): WorkerLease | null {
    return this.heldUntil - now > (this.ms * 2) / 3 ? null : this.row(now)
  }

  /** The row a renewal at `now` writes. */
  row(now: number): WorkerLease {
    return { owner: this.owner, ...OWN_HOST_AND_PID, expiresAt: now + this.ms, channel: this.channel() }
  }

  /** Notes that `row` was written. */
  written(row: WorkerLease): void {
    this.heldUntil = Math.max(this.heldUntil, row.expiresAt)
  }
}

/**
 * Makes sure in the database that `run` still holds its lease, renewing it until `expiresAt` in the same statement,
 * behind the fence; marks it lost when it does not; answers whether it does. A run asks before it calls a step's
 * function: once it has answered, no other worker can take the job over until the lease expires again, and a
 * takeover that committed before it (or that held the locks it waited for) is seen.
 * @internal
 */
export async function confirmLease(connection: Connection, owner: string, run: RunContext, expiresAt: number): Promise<boolean> {
  if (await connection.executor.leaseRenewIfHeld({ seq: run.seq, owner, attempt: run.attempt, ...OWN_HOST_AND_PID, expiresAt })) return true
  await connection.read((db) => leaseLost(db, run))
  return false
}

/** A claim of a job whose earlier run `previous` is still under way here: that run's lease was taken, though owner and attempt may match again. @internal */
export function leaseTakenOver(previous: RunContext | undefined): void {
  previous?.loseLease()
}

function leaseKeys(leases: readonly { job: number; attempt: number }[]): Set<string> {
  return new Set(leases.map((lease) => leaseKey(lease.job, lease.attempt)))
}

function leaseKey(seq: number, attempt: number): string {
  return `${seq}:${attempt}`
}
