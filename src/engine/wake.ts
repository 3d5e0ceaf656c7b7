/**
 * In-process change signals. A job added in this process wakes the idle
 * workers of its queue at once, without waiting for a poll; claims, ends and
 * admin actions tell watchers in this process at once too. Other processes'
 * writes are found by polling `PRAGMA data_version`.
 */

/** What changed: `added` (a job was added), `claimed`, `ended` (runs ended or were taken back), `revoked` (leases taken from running jobs: a cancel), `other`. */
export type ChangeKind = 'added' | 'claimed' | 'ended' | 'revoked' | 'other'

/**
 * Calls back with the queue, what changed, and the seqs of the jobs whose rows the change wrote when the
 * writer knows them: a claim and the ends of runs know theirs, an add changes no job that was there (`[]`).
 * Undefined: any job of the queue may have changed. Whatever the seqs, the order of the queue's line may
 * have moved (its `ahead` counts).
 */
type Listener = (queue: string, kind: ChangeKind, seqs: readonly number[] | undefined) => void

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
 * Says that this process changed the jobs of `queue` on `database`; call it after the change is written. `seqs`,
 * when given, are all the jobs whose rows it wrote.
 */
export function jobsChanged(database: string, queue: string, kind: ChangeKind, seqs?: readonly number[]): void {
  const set = listeners.get(database)
  if (set) for (const listener of set) listener(queue, kind, seqs)
}
