/**
 * A drizzle-jobs drain on PostgreSQL run in the caller's process, for the scripts that watch one from inside it
 * (statements.ts times its queries, drain-cpu.ts reads its CPU time): a fresh database on the benchmark's server,
 * set up and filled by the drizzle-jobs subject in child processes, analyzed unless told not to, and dropped after.
 */
import { runTask } from '../lib/child.js'
import type { ProcessResult } from '../lib/tasks.js'
import { benchServer, createDatabase, databaseUrl, dropDatabase, vacuumAnalyze } from './lib.js'

const MODULE = new URL('../subjects/drizzle-jobs-pg.ts', import.meta.url).pathname

/** The jobs of the subject's warm-up queue, drained before the queue's own. */
export const WARM_JOBS = 100

/**
 * Runs `watch` with a drain of `count` jobs at `slots` slots, in this process, on a database made for it; the
 * drain runs the subject's warm-up queue first. Answers what `watch` answers.
 */
export async function withDrain<T>(
  options: { prefix: string; count: number; slots: number; analyze: boolean },
  watch: (drain: () => Promise<ProcessResult>) => Promise<T>,
): Promise<T> {
  const server = await benchServer()
  const name = await createDatabase(server.url, options.prefix)
  const url = databaseUrl(server.url, name)
  try {
    await runTask(MODULE, 'setup', { url })
    await runTask(MODULE, 'fill', { url, count: options.count, warm: WARM_JOBS })
    if (options.analyze) await vacuumAnalyze(url)
    const { tasks } = (await import('../subjects/drizzle-jobs-pg.js')) as {
      tasks: Record<string, (args: object, ctx: unknown) => Promise<ProcessResult>>
    }
    return await watch(() => tasks.process!({ url, count: options.count, slots: options.slots }, {}))
  } finally {
    await dropDatabase(server.url, name)
    server.stop()
  }
}
