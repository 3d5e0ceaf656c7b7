/**
 * JOB-18 on the dashboard, once per dialect: rows another program wrote with plain SQL, outside what an add or
 * `schedule` writes, are shown as stored and stay reachable. A schedule whose next or last slot is ±infinity or
 * past the range of a Date; a job whose id is empty or 5,000 bytes long, which an add refuses but a row may hold.
 */
import { describe, expect, test } from 'vitest'
import { dashboard } from '../src/dashboard/index.js'
import { jobPath } from '../src/dashboard/paths.js'
import { defineQueue, enqueue, listSchedules, schedule } from '../src/index.js'
import { DIALECTS, eachContractDb } from './helpers/dialects.js'

const ROOT = 'http://127.0.0.1'

describe.each(DIALECTS)('%s', (dialect) => {
  const { t } = eachContractDb(dialect)
  const on = `[${dialect}]`

  test(`JOB-18 ${on} the queue page shows schedules whose next_at or last_slot another program stored as ±infinity or past the range of a Date, as stored, beside a good one`, async () => {
    const digests = defineQueue('digests')
    await schedule(t.db, digests, 'good', { cron: '0 8 * * *', value: null })
    // On PostgreSQL: timestamptz's infinities, and times in its last year, 294276 (as ms, past a Date's 8.64e15);
    // on SQLite: a real, text, and integers past a Date's range.
    const careless =
      t.dialect === 'postgres'
        ? [
            ['infinite', `'infinity'`, `'-infinity'`, 'Infinity', '-Infinity'],
            ['far', `'294276-01-01 00:00:00+00'`, `'294276-06-01 00:00:00+00'`, '9224286393600000', '9224299526400000'],
          ]
        : [
            ['infinite', '1e300', `'soon'`, '1e+300', `'soon'`],
            ['far', '9224286307200000', '-9224286307200000', '9224286307200000', '-9224286307200000'],
          ]
    for (const [name, nextAt, lastSlot] of careless) {
      await t.run(
        `insert into jobs_schedule (queue, name, cron, tz, value, next_at, last_slot) values ('digests', '${name}', '0 8 * * *', 'UTC', 'null', ${nextAt}, ${lastSlot})`,
      )
    }
    const listed = await listSchedules(t.db, digests)
    expect(listed.map((s) => s.name)).toEqual(['far', 'good', 'infinite'])
    for (const [name, , , shownNext, shownLast] of careless) {
      expect(listed.find((s) => s.name === name)!.malformed, name).toEqual({ next_at: shownNext, last_slot: shownLast })
    }
    expect(listed.find((s) => s.name === 'good')!.malformed).toBeNull()

    const board = dashboard(t.db)
    try {
      const answer = await board.fetch(new Request(`${ROOT}/queues/digests`))
      const body = await answer.text()
      expect(answer.status, body).toBe(200)
      for (const [name, , , shownNext, shownLast] of careless) {
        const row = body.slice(body.indexOf(`data-schedule="${name}"`), body.indexOf('</tr>', body.indexOf(`data-schedule="${name}"`)))
        expect(row, name).toContain(escapeHtml(shownNext!))
        expect(row, name).toContain(escapeHtml(shownLast!))
        expect(row, name).toContain('not a time')
      }
      expect(body).toContain('data-schedule="good"')
    } finally {
      board.close()
    }
  })

  test(`JOB-18 ${on} jobs whose ids another program stored empty or 5,000 bytes long open in the dashboard: listed with links that reach them, their pages and their live regions`, async () => {
    const q = defineQueue('careless-ids')
    const ids = ['', 'x'.repeat(5_000)]
    for (const [n, id] of ids.entries()) {
      await enqueue(t.db, q, { n }, { id: `added-${n}` })
      await t.run(`update jobs_job set id = $1 where queue = 'careless-ids' and id = $2`, id, `added-${n}`)
    }
    const board = dashboard(t.db)
    try {
      const list = await (await board.fetch(new Request(`${ROOT}/queues/careless-ids`))).text()
      for (const id of ids) {
        const path = jobPath({ base: '' }, 'careless-ids', id)
        // The queue page links to each job by the path that names it.
        expect(list).toContain(`href="${path}"`)
        const page = await board.fetch(new Request(`${ROOT}${path}`))
        const body = await page.text()
        expect(page.status, `${id.length}-character id: ${body.slice(0, 300)}`).toBe(200)
        expect(body).toContain('data-live="job"')
        expect(body).toContain(
          `<h1>Job ${id === '' ? '<span class="muted" data-empty-id>(empty id)</span>' : id} <span class="badge waiting"`,
        )
        expect(body).toContain(`&quot;n&quot;: ${ids.indexOf(id)}`)
        // The page's live region follows the same job.
        const controller = new AbortController()
        const events = await board.fetch(
          new Request(`${ROOT}/events?${new URLSearchParams({ view: 'job', queue: 'careless-ids', id })}`, { signal: controller.signal }),
        )
        expect(events.status).toBe(200)
        expect(events.headers.get('content-type')).toContain('text/event-stream')
        controller.abort()
        await events.body?.cancel().catch(() => {})
      }
    } finally {
      board.close()
    }
  })
})

function escapeHtml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;').replaceAll("'", '&#39;')
}
