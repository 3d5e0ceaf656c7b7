/**
 * In-process change signals. A job added in this process wakes the idle
 * workers of its queue at once, without waiting for a poll; claims, ends and
 * admin actions tell watchers in this process at once too. Other processes'
 * writes are found by polling the data version (SQLite's `PRAGMA
 * data_version`), or, where the dialect carries them (PostgreSQL's
 * LISTEN/NOTIFY), told as they commit (listenToOthers).
 */
import { ask, type ChangeKind, type Connection, type Executor, type Program } from '../dialect/index.js'
import type { Written } from './written.js'

export type { ChangeKind } from '../dialect/index.js'

/**
 * Calls back with the queue, what changed, and the seqs of the jobs whose rows the change wrote when the
 * writer knows them: a claim and the ends of runs know theirs, an add changes no job that was there (`[]`).
 * Undefined: any job of the queue may have changed. Whatever the seqs, the order of the queue's line may
 * have moved (its `ahead` counts). `written`, when the writer knows it, makes a job's row after the change from
 * the row before it (written.ts), so that a watcher need not read it back.
 */
type Listener = (queue: string, kind: ChangeKind, seqs: readonly number[] | undefined, written: Written | undefined) => void

const listeners = new Map<string, Set<Listener>>()

/** Calls `listener` after every change this process commits to the jobs of `database`. Answers the unsubscribe. */
export function onJobsChanged(database: string, listener: Listener): () => void {
  let set = listeners.get(database)
  if (!set) listeners.set(database, (set = new Set()))
  set.add(listener)
  return () => {
    set.delete(listener)
    if (set.size === 0) listeners.delete(database)
  }
}

/**
 * Says that this process changed the jobs of `queue` on `database`; call it after the change is committed. `seqs`,
 * when given, are all the jobs whose rows it wrote; `written`, what it wrote to them, when it knows.
 */
export function jobsChanged(database: string, queue: string, kind: ChangeKind, seqs?: readonly number[], written?: Written): void {
  const set = listeners.get(database)
  if (set) for (const listener of set) listener(queue, kind, seqs, written)
}

const listening = new Map<Connection, { users: number; stop: () => void }>()

/**
 * Hands the changes that other processes tell of on `connection` to this process's listeners, as its own
 * changes are: one listening per connection, however many workers and watchers use it. Answers the release:
 * the listening stops when its last user lets go.
 */
export function listenToOthers(connection: Connection): () => void {
  let held = listening.get(connection)
  if (!held) {
    const stop = connection.listen((queue, kind) => jobsChanged(connection.key, queue, kind))
    listening.set(connection, (held = { users: 0, stop }))
  }
  held.users++
  let released = false
  return () => {
    if (released) return
    released = true
    if (--held.users > 0) return
    listening.delete(connection)
    held.stop()
  }
}

/**
 * Tells other processes, as the transaction commits, that the jobs of `queue` changed, where the database tells them
 * (Executor `notifies`); elsewhere they find every write by the data version.
 */
export function* notifyOthers(db: Executor, queue: string, kind: ChangeKind): Program<void> {
  if (db.notifies) yield* ask(db.queueNotify(queue, kind))
}
