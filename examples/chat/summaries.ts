/**
 * A nightly summary: the schedule 'nightly-summary' adds a job to the
 * 'summaries' queue at 03:00 UTC each night, once however many web processes
 * run, and the handler logs the day's reply counts. Every process stores the
 * schedule as it starts: with the same arguments that changes nothing.
 */
import { defineQueue, queueCounts, schedule, work, type Worker } from 'drizzle-jobs'
import type { ChatStore } from './store.js'

export const summaryQueue = defineQueue<{ kind: 'nightly' }>('summaries', { attempts: 3 })

/** Stores the nightly schedule and starts this process's worker of the summaries queue. */
export function startSummaries(store: ChatStore): Worker {
  Promise.resolve(schedule(store.db, summaryQueue, 'nightly-summary', { cron: '0 3 * * *', value: { kind: 'nightly' } })).catch(
    (error: unknown) => console.error('the nightly summary could not be scheduled:', error),
  )
  return work(store.db, summaryQueue, async (_value, run) => {
    const replies = await queueCounts(store.db, 'replies')
    console.log(`nightly summary ${run.id}: ${replies.done} replies done, ${replies.failed} failed, ${replies.waiting} waiting`)
    return { done: replies.done, failed: replies.failed, waiting: replies.waiting }
  })
}
