/**
 * The one place that decides a run lost its lease. A run holds its lease
 * while its job's lease row names its owner and attempt; the row is gone or
 * replaced when the job was canceled or taken back as abandoned, and not
 * renewed when another process took it meanwhile. A run that lost its lease
 * is aborted with LEASE_LOST, and nothing it writes lands (JOB-16).
 */
import { ask, type Connection, type Executor, type Kind, type Program, type Result } from '../dialect/index.js'
import type { ClaimedJob } from '../dialect/index.js'
import type { RunContext } from './run.js'

/** Marks `run` as having lost its lease, saying so as a cancel when its job was canceled. */
function* leaseLost(db: Executor, run: RunContext): Program<void> {
  const state = yield* ask(db.jobGetState(run.seq))
  run.loseLease(state === 'canceled' ? `job '${run.id}' was canceled` : undefined)
}

/**
 * Checks `runs` of `owner` against the lease rows: a run whose row is gone lost its lease. `ahead`, if given, are
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
    const held = leaseKeys(yield* ask(db.leaseListByOwner(owner)))
    const lost = waiting.filter((job) => !held.has(leaseKey(job.seq, job.attempts)))
    if (lost.length > 0) ahead!.lost(lost)
    for (const run of checked) if (!held.has(leaseKey(run.seq, run.attempt))) yield* leaseLost(db, run)
  })
}

/**
 * Renews every lease `owner` holds until `expiresAt`: one statement outside any transaction, which waits on no lock
 * of the worker's own (its flush, held up by a lock of the app's, say) and holds none once it has answered (dialect
 * executors' leaseRenewByOwner). A run whose lease is no longer held lost it. Throws the database's busy error when
 * another writer holds SQLite's lock.
 * @internal
 */
export async function renewLeases(connection: Connection, owner: string, runs: Iterable<RunContext>, expiresAt: number): Promise<void> {
  // The runs under way before the renewal: one a claim started meanwhile holds a lease the renewal may not have seen.
  const checked = [...runs]
  const held = leaseKeys(await connection.executor.leaseRenewByOwner({ owner, expiresAt }))
  for (const run of checked) if (!held.has(leaseKey(run.seq, run.attempt))) run.loseLease()
}

/**
 * Makes sure in the database that `run` still holds its lease, renewing it until `expiresAt` in the same statement,
 * behind the fence; marks it lost when it does not; answers whether it does. A run asks before it calls a step's
 * function: once it has answered, no other worker can take the job over until the lease expires again, and a
 * takeover that committed before it (or that held the locks it waited for) is seen.
 * @internal
 */
export async function confirmLease(connection: Connection, owner: string, run: RunContext, expiresAt: number): Promise<boolean> {
  if (await connection.executor.leaseRenewIfHeld({ seq: run.seq, owner, attempt: run.attempt, expiresAt })) return true
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
