/**
 * The triggers that keep the queue counters right for other writers and fail the rows that break the table protocol
 * (statements.ts), installed by every SQLite driver's connection alike (connection.ts): before its first write
 * (Connection.write, join, tryWrite, prepareWrites), never by a reader. Where they were missing the install recounts,
 * so counts are right even if jobs were written before. The install is idempotent and versioned: each trigger's name
 * carries its version, and the install drops the older ones; those that would keep the engine's statements from
 * preparing (OBSOLETE_TRIGGERS) are dropped on a connection's first use, before it prepares them. A read-only
 * connection drops and installs nothing.
 */
import type { Kind } from '../executor.js'
import { ask, type Program } from '../program.js'
import type { SqliteConnectionClient } from './driver.js'
import { COUNTER_TRIGGERS, OBSOLETE_TRIGGERS, RECOUNT_QUEUES, SQL, TRIGGER_COUNT, TRIGGER_PRESENT } from './statements.js'

/** Runs an install's program under the write lock: in a write transaction, or a savepoint of the app's. */
type UnderWriteLock<K extends Kind> = (install: (client: SqliteConnectionClient<K>) => Program<boolean>) => Program<boolean>

/**
 * A connection's install of the triggers. It looks for them first, taking no lock; where they are missing it takes the
 * write lock and looks again, as another connection may have installed them meanwhile, then installs them.
 *
 * Once the triggers are known to be committed, a connection looks no more. An install made inside the app's
 * transaction may yet roll back with it, so until one is seen outside such a transaction (a worker's start, say) or
 * the triggers are found that another connection made, each write looks again, and a rolled-back install is made again.
 */
export class TriggerInstall {
  private committed = false
  private installedHere = false

  constructor(
    private readonly readOnly: boolean,
    private readonly inTransaction: () => boolean,
  ) {}

  /** Installs the triggers where they are missing: `look` reads with no lock, `underWriteLock` installs. */
  *ensure<K extends Kind>(look: SqliteConnectionClient<K>, underWriteLock: UnderWriteLock<K>): Program<void> {
    if (this.committed || this.readOnly) return
    if (!(yield* triggersPresent(look)) && (yield* underWriteLock(install))) this.installedHere = true
    this.committed = !this.installedHere || !this.inTransaction()
  }
}

function* triggersPresent<K extends Kind>(client: SqliteConnectionClient<K>): Program<boolean> {
  return (yield* ask(client.prepareAll({ triggersPresent: SQL.triggersPresent }).triggersPresent.get())) === TRIGGER_COUNT
}

/** Installs the triggers unless another connection did meanwhile; answers whether it did. */
function* install<K extends Kind>(client: SqliteConnectionClient<K>): Program<boolean> {
  if (yield* triggersPresent(client)) return false
  yield* ask(client.exec(COUNTER_TRIGGERS))
  yield* ask(client.exec(RECOUNT_QUEUES))
  return true
}

/** The triggers of earlier versions (OBSOLETE_TRIGGERS) still present: no statement that writes jobs_job prepares while one is. */
export function* obsoleteTriggers<K extends Kind>(client: SqliteConnectionClient<K>): Program<string[]> {
  const { present } = client.prepareAll({ present: TRIGGER_PRESENT })
  const found: string[] = []
  for (const name of OBSOLETE_TRIGGERS) if ((yield* ask(present.get(name))) !== undefined) found.push(name)
  return found
}

/** Drops the triggers named. */
export function dropTriggers(names: readonly string[]) {
  return function* <K extends Kind>(client: SqliteConnectionClient<K>): Program<void> {
    for (const name of names) yield* ask(client.exec(`drop trigger if exists ${name}`))
  }
}
