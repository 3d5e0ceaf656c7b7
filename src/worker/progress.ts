/**
 * Live progress of running jobs, kept in this process's memory only and never
 * written to the database (JOB-12). Watchers in this process subscribe here.
 * @internal
 */
type Listener = (progress: unknown) => void

interface Entry {
  progress: unknown
  listeners: Set<Listener>
}

const entries = new Map<string, Entry>()

export function progressKey(database: string, queue: string, seq: number): string {
  return `${database}\u0000${queue}\u0000${seq}`
}

export function publishProgress(key: string, progress: unknown): void {
  const entry = entries.get(key)
  if (entry) {
    entry.progress = progress
    for (const listener of entry.listeners) listener(progress)
  } else if (progress !== null) {
    entries.set(key, { progress, listeners: new Set() })
  }
}

export function currentProgress(key: string): unknown {
  return entries.get(key)?.progress ?? null
}

/** Forgets a run's progress when it ends; listeners are told it is null. */
export function clearProgress(key: string): void {
  const entry = entries.get(key)
  if (!entry) return
  entry.progress = null
  for (const listener of entry.listeners) listener(null)
  if (entry.listeners.size === 0) entries.delete(key)
}

export function subscribeProgress(key: string, listener: Listener): () => void {
  let entry = entries.get(key)
  if (!entry) entries.set(key, (entry = { progress: null, listeners: new Set() }))
  const held = entry
  held.listeners.add(listener)
  return () => {
    held.listeners.delete(listener)
    if (held.listeners.size === 0 && held.progress === null) entries.delete(key)
  }
}
