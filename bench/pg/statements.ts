/**
 * Where a drizzle-jobs drain on PostgreSQL spends its round trips: drains `count` jobs (default 2,000) at
 * `slots` (default 16) in a fresh database on the benchmark's server, with every query of node-postgres
 * timed in this process, and prints per statement (by its first words) the calls, the total and mean
 * time, and the calls per transaction and per job. pg_stat_statements need not be installed.
 *
 *   npx tsx bench/pg/statements.ts [count] [slots]
 */
import pg from 'pg'
import { nowMs } from '../lib/clock.js'
import { withDrain } from './in-process.js'

const count = Number(process.argv[2] ?? 2000)
const slots = Number(process.argv[3] ?? 16)

interface Stat {
  calls: number
  ms: number
}
const stats = new Map<string, Stat>()
const query = pg.Client.prototype.query as (...args: unknown[]) => unknown
pg.Client.prototype.query = function timed(this: pg.Client, ...args: unknown[]): unknown {
  const first = args[0] as string | { text?: string }
  const text = typeof first === 'string' ? first : (first?.text ?? '?')
  const key = text.replace(/\s+/g, ' ').trim().slice(0, 70)
  const t0 = nowMs()
  const result = query.apply(this, args)
  if (result && typeof (result as Promise<unknown>).then === 'function') {
    const done = (): void => {
      const stat = stats.get(key) ?? { calls: 0, ms: 0 }
      stat.calls++
      stat.ms += nowMs() - t0
      stats.set(key, stat)
    }
    ;(result as Promise<unknown>).then(done, done)
  }
  return result
} as typeof pg.Client.prototype.query

/** The drain runs the subject's warm-up (100 jobs of another queue) first; its statements are counted too. */
await withDrain({ prefix: 'statements', count, slots, analyze: true }, async (drain) => {
  // The drain runs here, in this process, so that its queries are timed.
  const r = await drain()
  const transactions = [...stats].filter(([key]) => /^begin/i.test(key)).reduce((sum, [, stat]) => sum + stat.calls, 0)
  console.log(
    `${count} jobs at slots ${slots}: ${Math.round(r.jobsPerSec)} jobs/s in ${r.elapsedMs.toFixed(0)} ms; ${transactions} transactions (${(count / Math.max(1, transactions)).toFixed(1)} jobs each)`,
  )
  console.log('| statement | calls | total ms | mean ms | per transaction | per job |\n| --- | --- | --- | --- | --- | --- |')
  for (const [key, stat] of [...stats].sort((a, b) => b[1].ms - a[1].ms)) {
    console.log(
      `| \`${key}\` | ${stat.calls} | ${stat.ms.toFixed(0)} | ${(stat.ms / stat.calls).toFixed(2)} | ${(stat.calls / Math.max(1, transactions)).toFixed(2)} | ${(stat.calls / count).toFixed(2)} |`,
    )
  }
})
