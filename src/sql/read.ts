/**
 * The statements that read jobs for `getJob` and `watch`, prepared once per
 * connection. They only read: a watcher never takes the write lock.
 * @internal
 */
import type Database from 'better-sqlite3'
import type { Connection } from '../connection.js'

/** A job's row with its lease, as snapshots are built from. The result is read only once the job has ended. */
const JOB_COLUMNS = `j.seq, j.queue, j.id, j.grp, j.state, j.priority, j.run_at as runAt, j.attempts,
  j.max_attempts as maxAttempts, j.created_at as createdAt, j.finished_at as finishedAt, j.error,
  case when j.state in ('done', 'failed', 'canceled') then j.result end as result,
  l.owner, l.attempt as leaseAttempt, l.channel`

/**
 * Jobs claimed before a waiting one come first in the claim index (jobs_job_claim: queue, priority, run_at, seq).
 * Of those, only the runnable ones count: a job scheduled for later, though more urgent, is not claimed before it now.
 */
const CLAIM_ORDER_BEFORE = `(priority, run_at, seq) < (@priority, @runAt, @seq) and run_at <= @now`

export const READ_SQL = {
  jobById: `select ${JOB_COLUMNS} from jobs_job j left join jobs_lease l on l.job = j.seq where j.queue = ? and j.id = ?`,
  /** The rows of many watched jobs in one pass: @seqs is a JSON array. */
  jobsBySeq: `select ${JOB_COLUMNS} from jobs_job j left join jobs_lease l on l.job = j.seq
    where j.seq in (select value from json_each(?))`,
  /** Runnable jobs of the queue before this position in claim order, counted up to @limit through the claim index. */
  countAhead: `select count(*) from (select 1 from jobs_job
    where queue = @queue and state in ('waiting', 'scheduled') and ${CLAIM_ORDER_BEFORE} limit @limit)`,
  /** The same between two positions: from @from* (included) to the given one (excluded). */
  countAheadFrom: `select count(*) from (select 1 from jobs_job
    where queue = @queue and state in ('waiting', 'scheduled')
      and (priority, run_at, seq) >= (@fromPriority, @fromRunAt, @fromSeq) and ${CLAIM_ORDER_BEFORE} limit @limit)`,
} as const

type ReadStatementName = keyof typeof READ_SQL

export interface ReadStatements {
  readonly statements: { readonly [K in ReadStatementName]: Database.Statement }
  /** Runs `work` in one deferred (read) transaction, so every statement in it sees the same state. */
  readonly snapshot: <T>(work: () => T) => T
}

const PLUCKED = new Set<ReadStatementName>(['countAhead', 'countAheadFrom'])
const prepared = new WeakMap<Connection, ReadStatements>()

/** The read statements of a connection, prepared on first use. */
export function readStatements(connection: Connection): ReadStatements {
  let read = prepared.get(connection)
  if (!read) {
    const statements = {} as Record<ReadStatementName, Database.Statement>
    for (const name of Object.keys(READ_SQL) as ReadStatementName[]) {
      const statement = connection.client.prepare(READ_SQL[name])
      statements[name] = PLUCKED.has(name) ? statement.pluck() : statement
    }
    const transaction = connection.client.transaction((work: () => unknown) => work())
    read = { statements, snapshot: <T>(work: () => T) => (connection.client.inTransaction ? work() : (transaction.deferred(work) as T)) }
    prepared.set(connection, read)
  }
  return read
}
