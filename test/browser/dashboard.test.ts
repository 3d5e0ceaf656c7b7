/**
 * The dashboard in headless Chromium, mounted with node:http as an app would
 * mount it, beside a worker in the same process, on each dialect (test names
 * carry it): the page shows counts that match the database and follow it
 * live, a failed job's error and stack, a retry that turns the job done, a
 * running job's live progress, and its buttons act. Screenshots go to
 * test-artifacts/; the SQLite overview also becomes docs/dashboard.png when
 * that file is missing or UPDATE_DOCS_SCREENSHOT=1.
 */
import { copyFileSync, existsSync, mkdirSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { resolve } from 'node:path'
import { drizzle } from 'drizzle-orm/node-postgres'
import { Hono } from 'hono'
import pg from 'pg'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { dashboard, type Dashboard } from '../../src/dashboard/index.js'
import { defineQueue, enqueue, queueCounts, work, type JobState, type Json, type PgDatabase, type SyncDatabase } from '../../src/index.js'
import { openDb } from '../helpers/db.js'
import { DIALECTS, eachContractDb } from '../helpers/dialects.js'
import { startDashboardCommand } from '../helpers/dashboard.js'
import { waitFor } from '../helpers/wait.js'

const DOCS_SCREENSHOT = resolve(import.meta.dirname, '../../docs/dashboard.png')
const ARTIFACTS = resolve(import.meta.dirname, '../../test-artifacts')
const CHROMIUM = '/usr/bin/chromium'
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
]

/** Debian's Chromium, headless: never a downloaded browser. */
async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium)`)
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true })
}

async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true })
  const path = resolve(ARTIFACTS, `${name}.png`)
  await page.screenshot({ path, fullPage: true })
  return path
}

const STATES: JobState[] = ['waiting', 'scheduled', 'running', 'done', 'failed', 'canceled']

let browser: Browser

beforeAll(async () => {
  browser = await launchBrowser()
})
afterAll(async () => {
  await browser?.close()
})

describe.each(DIALECTS)('%s', (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`
  let board: Dashboard
  let server: Server
  let base: string
  const contexts: BrowserContext[] = []
  const gates: Array<() => void> = []
  const closers: Array<() => Promise<void>> = []

  beforeEach(async () => {
    board = dashboard(t.db)
    server = createServer(board.node)
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterEach(async () => {
    for (const context of contexts.splice(0)) await context.close()
    // The stop claims nothing more and waits for the runs under way, whose gates open as they come (a run
    // claimed just before the stop included), so that every end is written before the database goes.
    const stopping = Promise.all(workers.splice(0).map((worker) => worker.stop({ timeout: 10_000 })))
    const opening = setInterval(() => {
      for (const open of gates.splice(0)) open()
    }, 10)
    for (const open of gates.splice(0)) open()
    await stopping.finally(() => clearInterval(opening))
    board.close()
    server.closeAllConnections()
    await new Promise((closed) => server.close(closed))
    for (const close of closers.splice(0)) await close()
  })

  /** A second connection to the database, as another process would hold: a SQLite handle, or a pool of its own. */
  function another(): SyncDatabase | PgDatabase {
    if (dialect === 'sqlite') {
      const other = openDb(t.address)
      closers.push(async () => void other.client.close())
      return other.db
    }
    const pool = new pg.Pool({ connectionString: t.address, max: 2 })
    pool.on('error', () => {})
    closers.push(() => pool.end())
    return drizzle(pool)
  }

  const state = async (id: string, queue = 'replies') => (await t.job(queue, id))?.state

  async function open(path: string): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 820 } })
    contexts.push(context)
    const page = await context.newPage()
    const problems: string[] = []
    page.on('pageerror', (error) => problems.push(error.message))
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text())
    })
    ;(page as Page & { problems: string[] }).problems = problems
    await page.goto(`${base}${path}`)
    await page.waitForFunction(() => document.body.dataset.live === 'open')
    return page
  }

  /** What the overview shows for a queue, per state. */
  async function shownCounts(page: Page, queue: string): Promise<Record<string, number>> {
    return page.evaluate(
      ({ queue, states }) => {
        const row = document.querySelector(`tr[data-queue="${queue}"]`)
        return Object.fromEntries(states.map((state) => [state, Number(row?.querySelector(`[data-count="${state}"]`)?.textContent ?? NaN)]))
      },
      { queue, states: STATES },
    )
  }

  async function dbCounts(queue: string): Promise<Record<string, number>> {
    const counts = await queueCounts(t.db, queue)
    return Object.fromEntries(STATES.map((state) => [state, counts[state]]))
  }

  /** A handler that holds its run until the test opens its gate. */
  function holding(progress?: (run: Parameters<Parameters<typeof work>[2]>[1]) => void) {
    return (_value: unknown, run: Parameters<Parameters<typeof work>[2]>[1]) =>
      new Promise<string>((done) => {
        progress?.(run)
        gates.push(() => done('held'))
      })
  }

  /** Ended jobs over the last ten minutes, written as rows, so the chart has a history to show. */
  async function seedHistory(queue: string, perBucket: (i: number) => number, failEvery: number): Promise<void> {
    const time = (param: string) => (dialect === 'postgres' ? `to_timestamp(${param}::float8 / 1000)` : param)
    const now = Date.now()
    const rows: unknown[][] = []
    let n = 0
    for (let bucket = 0; bucket < 58; bucket++) {
      for (let k = 0; k < perBucket(bucket); k++) {
        const at = now - (58 - bucket) * 10_000 + k * 50
        const failed = ++n % failEvery === 0
        rows.push([
          queue,
          `${queue}-history-${n}`,
          failed ? 'failed' : 'done',
          at - 400,
          at - 500,
          at,
          failed ? 'the model did not answer in time' : null,
        ])
      }
    }
    const tuple = (i: number) => {
      const $ = (k: number) => `$${i * 7 + k}`
      return `(${$(1)}, ${$(2)}, '{}', ${$(3)}, 1, 5, ${time($(4))}, ${time($(5))}, ${time($(6))}, ${$(7)})`
    }
    await t.run(
      `insert into jobs_job (queue, id, value, state, attempts, max_attempts, run_at, created_at, finished_at, error) values ${rows.map((_, i) => tuple(i)).join(', ')}`,
      ...rows.flat(),
    )
  }

  describe('the dashboard in a browser', () => {
    test(`${on} shows counts that match the database, and follows them live, keeping in place what did not change`, async () => {
      const replies = defineQueue<{ messageId: number }>('replies', { attempts: 5 })
      const emails = defineQueue<{ to: string }>('emails')
      await seedHistory('replies', (i) => 6 + Math.round(5 * Math.sin(i / 6) + 5), 13)
      await seedHistory('emails', (i) => (i % 9 === 0 ? 8 : 1), 40)
      for (let n = 1; n <= 14; n++) await enqueue(t.db, replies, { messageId: n }, { id: `reply:${n}`, group: `chat:${n % 4}` })
      await enqueue(t.db, replies, { messageId: 99 }, { id: 'reply:99', delay: '10m' })
      for (let n = 1; n <= 3; n++) await enqueue(t.db, emails, { to: `user${n}@example.com` }, { id: `welcome:${n}` })
      workers.push(
        work(
          t.db,
          replies,
          holding((run) => run.setProgress({ step: 'thinking' })),
          { slots: 3 },
        ),
      )
      await waitFor(async () => (await queueCounts(t.db, replies)).running === 3, 'three replies to run')

      const page = await open('/')
      for (const queue of ['replies', 'emails']) expect(await shownCounts(page, queue)).toEqual(await dbCounts(queue))
      expect(await page.locator('tr[data-queue="emails"] .badge').textContent()).toBe('active')
      // Each queue's link is marked in the page, not in its markup, to see whether updates keep it in place.
      await page.evaluate(() => {
        for (const link of Array.from(document.querySelectorAll('tr[data-queue] td:first-child a'))) Object.assign(link, { kept: true })
      })

      // Another connection writes (as another process would): the page follows within the poll.
      const other = another()
      for (let n = 4; n <= 9; n++) await enqueue(other, emails, { to: `user${n}@example.com` }, { id: `welcome:${n}` })
      // This process finishes two runs: seen at once through the in-process signal.
      gates.shift()!()
      gates.shift()!()
      await waitFor(
        async () => (await queueCounts(t.db, replies)).running === 3 && (await state('reply:4')) === 'running',
        'the worker to go on',
      )
      await waitFor(
        async () =>
          JSON.stringify(await shownCounts(page, 'emails')) === JSON.stringify(await dbCounts('emails')) &&
          JSON.stringify(await shownCounts(page, 'replies')) === JSON.stringify(await dbCounts('replies')),
        'the page to show the new counts',
      )
      expect(await shownCounts(page, 'emails')).toMatchObject({ waiting: 9 })
      // The counts beside each link changed, and the link stayed: a click on it is not lost to an update.
      expect(
        await page.evaluate(() =>
          Array.from(
            document.querySelectorAll('tr[data-queue] td:first-child a'),
            (link) => (link as HTMLAnchorElement & { kept?: boolean }).kept === true,
          ),
        ),
      ).toEqual([true, true])
      expect(await page.locator('[data-live="chart"] rect').count()).toBeGreaterThan(50)

      const shot = await screenshot(page, `dashboard-overview-${dialect}`)
      if (dialect === 'sqlite' && (!existsSync(DOCS_SCREENSHOT) || process.env.UPDATE_DOCS_SCREENSHOT === '1')) {
        mkdirSync(resolve(DOCS_SCREENSHOT, '..'), { recursive: true })
        copyFileSync(shot, DOCS_SCREENSHOT)
      }
      expect((page as Page & { problems: string[] }).problems).toEqual([])
    })

    test(`${on} shows a failed job's error and stack, and a retry turns it done`, async () => {
      const replies = defineQueue<{ messageId: number }>('replies', { attempts: 1 })
      let modelUp = false
      workers.push(
        work(t.db, replies, async ({ messageId }, run) => {
          await run.step('history', () => ['hello'])
          if (!modelUp) throw new TypeError(`the model refused message ${messageId}`)
          return { text: 'hi there' }
        }),
      )
      await enqueue(t.db, replies, { messageId: 7 }, { id: 'reply:7' })
      await waitFor(async () => (await state('reply:7')) === 'failed', 'the job to fail')

      const page = await open('/queues/replies?state=failed')
      expect(await page.locator('tr[data-job="reply:7"] td.wrap').textContent()).toBe('the model refused message 7')
      await page.click('tr[data-job="reply:7"] a')
      await page.waitForFunction(() => document.body.dataset.live === 'open' && location.pathname.endsWith('/jobs/reply%3A7'))
      expect(await page.locator('[data-state]').textContent()).toBe('failed')
      const error = await page.locator('[data-error]').textContent()
      expect(error).toMatch(/^TypeError: the model refused message 7\n\s+at /)
      expect(await page.locator('[data-attempts]').textContent()).toBe('1 of 1')
      expect(await page.locator('[data-value]').textContent()).toBe('{\n  "messageId": 7\n}')
      await screenshot(page, `dashboard-failed-job-${dialect}`)

      modelUp = true
      await page.click('button[data-action="retry"]')
      await page.waitForSelector('[data-flash="ok"]')
      expect(await page.locator('#flash').textContent()).toBe('Job reply:7 is waiting again, with fresh attempts.')
      await page.waitForSelector('[data-state="done"]')
      expect(await t.job('replies', 'reply:7')).toMatchObject({ state: 'done', attempts: 1, error: null })
      expect(await page.locator('[data-result]').textContent()).toBe('{\n  "text": "hi there"\n}')
      expect(await page.locator('[data-error]').count()).toBe(0)
      await screenshot(page, `dashboard-retried-job-${dialect}`)
    })

    test(`${on} shows the live progress of a running job`, async () => {
      const replies = defineQueue<{ messageId: number }>('replies')
      let setProgress: ((progress: Json) => void) | undefined
      workers.push(
        work(
          t.db,
          replies,
          holding((run) => (setProgress = (progress) => run.setProgress(progress))),
        ),
      )
      await enqueue(t.db, replies, { messageId: 1 }, { id: 'reply:1' })
      await waitFor(() => setProgress, 'the job to run')
      setProgress!({ step: 'history' })

      const page = await open(`/queues/replies/jobs/${encodeURIComponent('reply:1')}`)
      await page.waitForFunction(() => document.querySelector('[data-progress]')?.textContent?.includes('"history"'))
      for (let tokens = 1; tokens <= 3; tokens++) {
        setProgress!({ step: 'thinking', tokens })
        await page.waitForFunction(
          (n) => document.querySelector('[data-progress]')?.textContent === JSON.stringify({ step: 'thinking', tokens: n }, null, 2),
          tokens,
        )
      }
      expect(await page.locator('[data-state]').textContent()).toBe('running')
      await screenshot(page, `dashboard-progress-${dialect}`)
      gates.shift()!()
      await page.waitForSelector('[data-state="done"]')
      expect(await page.locator('[data-progress]').count()).toBe(0)
    })

    test(`${on} pause, resume and cancel buttons act; search finds jobs by id and group`, async () => {
      const replies = defineQueue<{ messageId: number }>('replies')
      for (let n = 1; n <= 5; n++) await enqueue(t.db, replies, { messageId: n }, { id: `reply:${n}`, group: n % 2 ? 'odd' : 'even' })
      const page = await open('/')
      await page.click('tr[data-queue="replies"] button[data-action="pause"]')
      await page.waitForSelector('tr[data-queue="replies"] button[data-action="resume"]')
      expect((await queueCounts(t.db, replies)).paused).toBe(true)
      expect(await page.locator('tr[data-queue="replies"] .badge').textContent()).toBe('paused')
      await page.click('tr[data-queue="replies"] button[data-action="resume"]')
      await page.waitForSelector('tr[data-queue="replies"] button[data-action="pause"]')
      expect((await queueCounts(t.db, replies)).paused).toBe(false)

      await page.goto(`${base}/queues/replies`)
      await page.fill('input[name="group"]', 'even')
      await page.click('form.search button')
      await page.waitForURL(/group=even/)
      expect(await page.locator('tr[data-job]').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-job')))).toEqual([
        'reply:4',
        'reply:2',
      ])
      await page.fill('input[name="group"]', '')
      await page.fill('input[name="id"]', 'reply:3')
      await page.click('form.search button')
      await page.waitForURL(/id=reply%3A3/)
      expect(await page.locator('tr[data-job]').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-job')))).toEqual(['reply:3'])

      await page.click('tr[data-job="reply:3"] a')
      await page.waitForFunction(() => document.body.dataset.live === 'open' && location.pathname.endsWith('/jobs/reply%3A3'))
      page.once('dialog', (dialog) => void dialog.accept())
      await page.click('button[data-action="cancel"]')
      await page.waitForSelector('[data-state="canceled"]')
      expect(await state('reply:3')).toBe('canceled')
      expect(await page.locator('button[data-action="retry"]').count()).toBe(1)
    })
  })

  describe('drizzle-jobs dashboard, the command', () => {
    test(`${on} shows a running job's progress set by a worker in another process`, async () => {
      const served = await startDashboardCommand('--db', t.address, '--port', '0')
      try {
        const replies = defineQueue<{ messageId: number }>('replies')
        let setProgress: ((progress: Json) => void) | undefined
        workers.push(
          work(
            t.db,
            replies,
            holding((run) => (setProgress = (progress) => run.setProgress(progress))),
          ),
        )
        await enqueue(t.db, replies, { messageId: 5 }, { id: 'reply:5' })
        await waitFor(() => setProgress, 'the job to run')
        setProgress!({ step: 'history' })
        const context = await browser.newContext({ viewport: { width: 1280, height: 820 } })
        contexts.push(context)
        const page = await context.newPage()
        await page.goto(`${served.url}queues/replies/jobs/${encodeURIComponent('reply:5')}`)
        await page.waitForFunction(() => document.body.dataset.live === 'open')
        await page.waitForFunction(() => document.querySelector('[data-progress]')?.textContent?.includes('"history"'))
        setProgress!({ step: 'thinking', tokens: 42 })
        await page.waitForFunction(() => document.querySelector('[data-progress]')?.textContent?.includes('"tokens": 42'))
        gates.shift()!()
        await page.waitForSelector('[data-state="done"]')
      } finally {
        expect(await served.stop()).toBe(0)
      }
    })
  })

  describe('the dashboard handler', () => {
    test(`${on} with a token, every request needs it; ?token= sets a cookie that lets the browser in`, async () => {
      const guarded = dashboard(t.db, { token: 'a-long-enough-secret', basePath: '/jobs' })
      try {
        expect((await guarded.fetch(new Request('http://127.0.0.1/jobs/'))).status).toBe(401)
        expect((await guarded.fetch(new Request('http://127.0.0.1/jobs/?token=wrong'))).status).toBe(401)
        const entry = await guarded.fetch(new Request('http://127.0.0.1/jobs/queues/replies?state=failed&token=a-long-enough-secret'))
        expect(entry.status).toBe(303)
        expect(entry.headers.get('location')).toBe('/jobs/queues/replies?state=failed')
        const cookie = entry.headers.get('set-cookie')!
        expect(cookie).toMatch(/^drizzle_jobs_token_[0-9a-f]{12}=a-long-enough-secret; Path=\/jobs; HttpOnly; SameSite=Strict$/)
        const page = await guarded.fetch(
          new Request('http://127.0.0.1/jobs/queues/replies', { headers: { cookie: cookie.split(';')[0]! } }),
        )
        expect(page.status).toBe(200)
        expect(page.headers.get('content-security-policy')).toContain("script-src 'self'")
        expect(await page.text()).toContain('<script src="/jobs/assets/htmx.min.js" defer></script>')
        const bearer = await guarded.fetch(
          new Request('http://127.0.0.1/jobs/', { headers: { authorization: 'Bearer a-long-enough-secret' } }),
        )
        expect(bearer.status).toBe(200)
        // Actions need the token too.
        expect(
          (
            await guarded.fetch(
              new Request('http://127.0.0.1/jobs/queues/replies/pause', { method: 'POST', headers: { 'hx-request': 'true' } }),
            )
          ).status,
        ).toBe(401)
        expect(
          (
            await guarded.fetch(
              new Request('http://127.0.0.1/jobs/queues/replies/pause', {
                method: 'POST',
                headers: { authorization: 'Bearer a-long-enough-secret' },
              }),
            )
          ).status,
        ).toBe(200)
        expect((await queueCounts(t.db, 'replies')).paused).toBe(true)
        // htmx itself is served from the npm package, with no token needed for static files.
        const htmx = await guarded.fetch(new Request('http://127.0.0.1/jobs/assets/htmx.min.js'))
        expect(htmx.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
        expect(await htmx.text()).toContain('htmx')
      } finally {
        guarded.close()
      }
    })

    test(`${on} mounts in Hono under a path, with its links under that path`, async () => {
      const mounted = dashboard(t.db, { basePath: '/jobs' })
      try {
        await enqueue(t.db, defineQueue('replies'), null, { id: 'reply:1' })
        const app = new Hono()
        app.get('/', (c) => c.text('the app'))
        app.mount('/jobs', mounted.fetch)
        expect(await (await app.request('/')).text()).toBe('the app')
        const overview = await app.request('/jobs')
        expect(overview.status).toBe(200)
        const text = await overview.text()
        expect(text).toContain('<a href="/jobs/queues/replies">replies</a>')
        expect(text).toContain('data-events="/jobs/events?view=overview"')
        const detail = await app.request(`/jobs/queues/replies/jobs/${encodeURIComponent('reply:1')}`)
        expect(await detail.text()).toContain('data-state="waiting"')
        const events = await app.request('/jobs/events?view=overview')
        expect(events.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
        const reader = events.body!.getReader()
        let received = ''
        while (!received.includes('"queues"')) received += new TextDecoder().decode((await reader.read()).value)
        expect(received).toMatch(/^retry: 2000\n\ndata: \{/)
        await reader.cancel()
      } finally {
        mounted.close()
      }
    })

    test(`${on} actions come only from its own pages: not from a cross-site form, nor another origin`, async () => {
      const post = (headers: Record<string, string>) =>
        board.fetch(
          new Request('http://127.0.0.1:4580/queues/replies/pause', { method: 'POST', headers: { host: '127.0.0.1:4580', ...headers } }),
        )
      expect((await post({})).status).toBe(403)
      expect((await post({ 'hx-request': 'true', origin: 'http://evil.example' })).status).toBe(403)
      expect((await post({ 'hx-request': 'true', 'sec-fetch-site': 'cross-site' })).status).toBe(403)
      expect((await queueCounts(t.db, 'replies')).paused).toBe(false)
      expect((await post({ 'hx-request': 'true', origin: 'http://127.0.0.1:4580' })).status).toBe(200)
      expect((await queueCounts(t.db, 'replies')).paused).toBe(true)
      expect((await board.fetch(new Request('http://127.0.0.1/queues/replies/jobs/nope'))).status).toBe(404)
      expect(
        (
          await board.fetch(
            new Request('http://127.0.0.1/queues/replies/jobs/nope/retry', { method: 'POST', headers: { 'hx-request': 'true' } }),
          )
        ).status,
      ).toBe(404)
      expect((await board.fetch(new Request('http://127.0.0.1/queues/replies?state=lost'))).status).toBe(400)
    })

    test(`${on} escapes what jobs hold: a value, an id or an error cannot inject markup`, async () => {
      const q = defineQueue('<b>queue</b>')
      await enqueue(t.db, q, { html: '<script>alert(1)</script>' }, { id: '"><img src=x onerror=alert(1)>' })
      const list = await (await board.fetch(new Request(`http://127.0.0.1/queues/${encodeURIComponent('<b>queue</b>')}`))).text()
      expect(list).not.toContain('<img src=x')
      expect(list).not.toContain('<b>queue</b>')
      expect(list).toContain('&lt;b&gt;queue&lt;/b&gt;')
      const detail = await (
        await board.fetch(
          new Request(
            `http://127.0.0.1/queues/${encodeURIComponent('<b>queue</b>')}/jobs/${encodeURIComponent('"><img src=x onerror=alert(1)>')}`,
          ),
        )
      ).text()
      expect(detail).not.toContain('<script>alert')
      expect(detail).toContain('&lt;script&gt;alert(1)&lt;/script&gt;')
    })
  })
})
