/**
 * Parked jobs on the dashboard, once per dialect: a run parked by `run.sleep` or `run.waitForEvent` shows what it
 * waits for, and until when, in its queue's list of scheduled jobs and on its page, with the job's events; once its
 * event is sent, the run goes on, and its page shows it done with the event sent.
 */
import { describe, expect, test } from 'vitest'
import { dashboard } from '../src/dashboard/index.js'
import { defineQueue, enqueue, inspectJob, listJobs, signal, work } from '../src/index.js'
import { DIALECTS, eachContractDb } from './helpers/dialects.js'
import { waitFor } from './helpers/wait.js'

const ROOT = 'http://127.0.0.1'

const parking = defineQueue<{ wait: 'sleep' | 'event' | 'timed' }>('parking')

describe.each(DIALECTS)('%s', (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`

  test(`JOB-24 ${on} a parked job shows what it waits for in the list of scheduled jobs and on its page, with its events; once its event is sent, its page shows it done`, async () => {
    await enqueue(t.db, parking, { wait: 'sleep' }, { id: 'napping' })
    await enqueue(t.db, parking, { wait: 'timed' }, { id: 'review' })
    await enqueue(t.db, parking, { wait: 'event' }, { id: 'order' })
    await signal(t.db, parking, 'order', 'early', { by: '<ada>' })
    workers.push(
      work(
        t.db,
        parking,
        async ({ wait }, run) => {
          if (wait === 'sleep') return run.sleep('nap', '1h')
          if (wait === 'timed') return run.waitForEvent('approved', { timeout: '2h' })
          await run.waitForEvent('early')
          return run.waitForEvent('paid')
        },
        { pollInterval: '20ms' },
      ),
    )
    await waitFor(
      async () => (await listJobs(t.db, { queue: parking, state: 'scheduled' })).jobs.filter((job) => job.waitsFor).length === 3,
      'the three runs to park',
    )

    const board = dashboard(t.db)
    const pageOf = async (path: string): Promise<string> => {
      const answer = await board.fetch(new Request(`${ROOT}${path}`))
      const body = await answer.text()
      expect(answer.status, body).toBe(200)
      return body
    }
    /** The row of the table that holds `marker`, as markup. */
    const rowOf = (body: string, marker: string): string => {
      const at = body.indexOf(marker)
      expect(at, marker).toBeGreaterThan(-1)
      return body.slice(body.lastIndexOf('<tr', at), body.indexOf('</tr>', at))
    }
    try {
      const list = await pageOf('/queues/parking?state=scheduled')
      expect(rowOf(list, 'data-job="napping"')).toMatch(
        /<span data-waits-for="sleep">sleeping \('nap'\), wakes <time datetime="[^"]+" title="[^"]+">in 59m \d\ds<\/time><\/span>/,
      )
      expect(rowOf(list, 'data-job="review"')).toMatch(
        /<span data-waits-for="event">waiting for event 'approved', times out <time datetime="[^"]+" title="[^"]+">in 1h 59m<\/time><\/span>/,
      )
      expect(rowOf(list, 'data-job="order"')).toContain(`<span data-waits-for="event">waiting for event 'paid', no timeout</span>`)

      const order = await pageOf('/queues/parking/jobs/order')
      expect(order).toContain(`<dt>parked</dt><dd><span data-waits-for="event">waiting for event 'paid', no timeout</span></dd>`)
      expect(order).toContain('<dt>runs</dt><dd>when the event is sent</dd>')
      expect(order).toContain('<h2>Events</h2>')
      const early = rowOf(order, 'data-event="early"')
      expect(early).toContain('<td data-event-state>sent</td>')
      expect(early).toContain('<code>{&quot;by&quot;:&quot;&lt;ada&gt;&quot;}</code>')
      const paid = rowOf(order, 'data-event="paid"')
      expect(paid).toContain('<td data-event-state>waiting</td>')
      expect(paid).toContain('<td>no timeout</td>')

      const review = await pageOf('/queues/parking/jobs/review')
      const deadline = (await inspectJob(t.db, parking, 'review'))!.waitsFor!.until!.toISOString()
      expect(review).toContain(
        `<dt>parked</dt><dd><span data-waits-for="event">waiting for event 'approved', times out <time datetime="${deadline}"`,
      )
      expect(rowOf(review, 'data-event="approved"')).toContain(`<time datetime="${deadline}"`)
      const napping = await pageOf('/queues/parking/jobs/napping')
      expect(napping).toMatch(/<dt>parked<\/dt><dd><span data-waits-for="sleep">sleeping \('nap'\), wakes <time /)
      expect(napping).not.toContain('<h2>Events</h2>')

      await signal(t.db, parking, 'order', 'paid', 42)
      await waitFor(async () => (await inspectJob(t.db, parking, 'order'))?.state === 'done', 'the job to end done')
      const done = await pageOf('/queues/parking/jobs/order')
      expect(done).toContain('data-state="done"')
      expect(done).not.toContain('<dt>parked</dt>')
      expect(rowOf(done, 'data-event="paid"')).toContain('<td data-event-state>sent</td>')
      expect(rowOf(done, 'data-event="paid"')).toContain('<code>42</code>')
    } finally {
      board.close()
    }
  })
})
