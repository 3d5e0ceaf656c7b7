/**
 * What the engine reads of a queue's definition. The `Queue` that
 * `defineQueue` makes (queue/define.ts) extends it, so the engine never
 * imports the public face of a queue that is built on it.
 */
export interface QueueDefinition {
  readonly name: string
  readonly attempts: number
  readonly backoff: { readonly initialMs: number; readonly maxMs: number }
  readonly concurrency: { readonly total: number | null; readonly perGroup: number | null }
  /** Run starts allowed per window across every process (JOB-22), or null for no rate. */
  readonly rate: { readonly limit: number; readonly perMs: number; readonly perGroup: number | null } | null
  readonly timeoutMs: number
  readonly maxWaiting: number
  readonly retentionMs: { readonly done: number; readonly failed: number; readonly canceled: number }
}
