/**
 * In-process wake-ups: a job added in this process wakes the idle workers of
 * its queue at once, without waiting for a poll. Other processes' writes are
 * found by polling `PRAGMA data_version` (see the worker).
 * @internal
 */
const listeners = new Map<string, Set<() => void>>()

function keyOf(database: string, queue: string): string {
  return `${database}\u0000${queue}`
}

/** Calls `listener` whenever a job is added to `queue` on `database` in this process; returns the unsubscribe. */
export function onJobAdded(database: string, queue: string, listener: () => void): () => void {
  const key = keyOf(database, queue)
  let set = listeners.get(key)
  if (!set) listeners.set(key, (set = new Set()))
  set.add(listener)
  return () => {
    set.delete(listener)
    if (set.size === 0) listeners.delete(key)
  }
}

export function jobAdded(database: string, queue: string): void {
  const set = listeners.get(keyOf(database, queue))
  if (set) for (const listener of set) listener()
}

const leaseListeners = new Map<string, Set<() => void>>()

/** Calls `listener` whenever this process takes leases away from running jobs on `database` (a cancel, say). */
export function onLeasesRevoked(database: string, listener: () => void): () => void {
  let set = leaseListeners.get(database)
  if (!set) leaseListeners.set(database, (set = new Set()))
  set.add(listener)
  return () => {
    set.delete(listener)
    if (set.size === 0) leaseListeners.delete(database)
  }
}

export function leasesRevoked(database: string): void {
  const set = leaseListeners.get(database)
  if (set) for (const listener of set) listener()
}
