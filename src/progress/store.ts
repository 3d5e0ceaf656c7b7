/**
 * Live progress of the runs of this process, kept in memory only and never
 * written to the database (JOB-12). A run is named by its lease (owner, job,
 * attempt), so a new attempt starts with no progress, and a watcher reads
 * the progress of exactly the attempt the database says is running.
 *
 * Watchers of this process subscribe here directly; watchers of other
 * processes subscribe through this process's progress channel
 * (src/progress/channel.ts), which subscribes here for them.
 */

/** Progress as kept: its JSON text (what crosses processes) and its parsed, frozen value (what watchers get). */
export interface ProgressValue {
  readonly json: string
  readonly value: unknown
}

/** Called with the run's new progress, and the run's key. */
type Listener = (progress: ProgressValue, key: string) => void

const values = new Map<string, ProgressValue>()
/** A run's listeners: most runs have one watcher, kept alone; a set once there are more. */
const listeners = new Map<string, Listener | Set<Listener>>()

/** Names one run: the lease owner, the job's seq, the attempt. */
export function runKey(owner: string, seq: number, attempt: number): string {
  return `${owner}\u0000${seq}\u0000${attempt}`
}

/** Sets a run's progress from JSON text already checked against the 4 KiB limit, and tells its listeners at once. */
export function publishProgress(key: string, json: string): void {
  const progress = toProgressValue(json)
  values.set(key, progress)
  const held = listeners.get(key)
  if (typeof held === 'function') held(progress, key)
  else if (held) for (const listener of held) listener(progress, key)
}

/**
 * Forgets a run's progress when it ends. Listeners are not told: the end of
 * the run is a change of the job's row, which watchers read from the
 * database with the progress of whatever runs next.
 */
export function endProgress(key: string): void {
  values.delete(key)
}

/** The run's progress, or undefined when it has set none (or is not a run of this process). */
export function readProgress(key: string): ProgressValue | undefined {
  return values.get(key)
}

/** Calls `listener` on every later progress of the run. Answers the unsubscribe. */
export function subscribeProgress(key: string, listener: Listener): () => void {
  addProgressListener(key, listener)
  return () => removeProgressListener(key, listener)
}

/** Calls `listener` on every later progress of the run, until removeProgressListener: for a caller that keeps the key and listener anyway. */
export function addProgressListener(key: string, listener: Listener): void {
  const held = listeners.get(key)
  if (held === undefined) listeners.set(key, listener)
  else if (typeof held === 'function') listeners.set(key, new Set([held, listener]))
  else held.add(listener)
}

export function removeProgressListener(key: string, listener: Listener): void {
  const held = listeners.get(key)
  if (held === listener) listeners.delete(key)
  else if (typeof held === 'object') {
    held.delete(listener)
    if (held.size === 0) listeners.delete(key)
  }
}

/** Parses progress JSON once and freezes it, since every watcher of the run shares the one value. */
export function toProgressValue(json: string): ProgressValue {
  return Object.freeze({ json, value: deepFreeze(JSON.parse(json)) })
}

function deepFreeze(value: unknown): unknown {
  if (typeof value === 'object' && value !== null) {
    for (const item of Object.values(value)) deepFreeze(item)
    Object.freeze(value)
  }
  return value
}
