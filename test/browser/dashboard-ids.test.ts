/**
 * The dashboard in headless Chromium with the names a URL parser likes least:
 * ids and queues `.`, `..` and `%2e%2e`, and ids holding `/`, `?`, `#` and
 * `%`. Each job is reached by following the pages' own links, and its cancel
 * button cancels that job and no other. Also: two dashboards with tokens, on
 * two ports of one host, both stay open in one browser. Each test runs on
 * SQLite and on PostgreSQL; its name carries the dialect.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import { Hono } from 'hono'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { dashboard, type DashboardOptions } from '../../src/dashboard/index.js'
import { defineQueue, enqueue, queueCounts } from '../../src/index.js'
import { launchBrowser } from '../helpers/browser.js'
import { DIALECTS, eachContractDb } from '../helpers/dialects.js'

let browser: Browser

beforeAll(async () => {
  browser = await launchBrowser()
})
afterAll(async () => {
  await browser?.close()
})

describe.each(DIALECTS)('%s', (dialect) => {
  const { t } = eachContractDb(dialect)
  const on = `[${dialect}]`
  const contexts: BrowserContext[] = []
  const closers: Array<() => Promise<void>> = []

  afterEach(async () => {
    for (const context of contexts.splice(0)) await context.close()
    await Promise.all(closers.splice(0).map((close) => close()))
  })

  /** `http.createServer(dashboard(db).node)`: answers the dashboard's root URL, without a trailing slash. */
  async function nodeMount(options: DashboardOptions = {}): Promise<string> {
    const board = dashboard(t.db, options)
    const server = createServer(board.node)
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening))
    closers.push(
      () =>
        new Promise<void>((closed) => {
          board.close()
          server.closeAllConnections()
          server.close(() => closed())
        }),
    )
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  }

  /** `app.mount('/jobs', dashboard(db, { basePath: '/jobs' }).fetch)` in Hono, served by @hono/node-server. */
  async function honoMount(): Promise<string> {
    const board = dashboard(t.db, { basePath: '/jobs' })
    const app = new Hono()
    app.mount('/jobs', board.fetch)
    let server: ReturnType<typeof serve> | undefined
    const port = await new Promise<number>((listening) => {
      server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => listening(info.port))
    })
    closers.push(
      () =>
        new Promise<void>((closed) => {
          board.close()
          ;(server as unknown as { closeAllConnections(): void }).closeAllConnections()
          server!.close(() => closed())
        }),
    )
    return `http://127.0.0.1:${port}/jobs`
  }

  async function newPage(): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 820 } })
    contexts.push(context)
    return context.newPage()
  }

  /** A CSS attribute selector's quoted value. */
  function quoted(text: string): string {
    return `"${text.replace(/["\\]/g, (c) => `\\${c}`)}"`
  }

  async function states(): Promise<Record<string, string>> {
    const rows = await t.query<{ queue: string; id: string; state: string }>('select queue, id, state from jobs_job')
    return Object.fromEntries(rows.map((row) => [`${row.queue} ${row.id}`, row.state]))
  }

  /** Follows the links from the overview to the job's page, checks it shows that job, and cancels it with its button. */
  async function openAndCancel(page: Page, root: string, queue: string, id: string): Promise<void> {
    if (!page.url().startsWith(root) || (await page.locator('h1').textContent()) !== `Queue ${queue}`) {
      await page.goto(`${root}/`)
      await page.click(`tr[data-queue=${quoted(queue)}] td:first-child a`)
      // The queue's page, loaded: the overview's own live flag would otherwise answer the wait below at once.
      await page.waitForURL((url) => url.pathname.includes('/queues/'))
      await page.waitForFunction(() => document.body.dataset.live === 'open')
      expect(await page.locator('h1').textContent()).toBe(`Queue ${queue}`)
    }
    const queueUrl = page.url()
    await page.click(`tr[data-job=${quoted(id)}] td:first-child a`)
    await page.waitForURL((url) => url.pathname.includes('/jobs/'))
    await page.waitForFunction(() => document.body.dataset.live === 'open')
    expect(await page.locator('main h1').textContent()).toBe(`Job ${id} waiting`)
    expect(await page.locator('dl.facts dd a').first().textContent()).toBe(queue)
    // The crumb leads back to the job's queue.
    expect(
      await page
        .locator('nav.crumbs a')
        .nth(1)
        .evaluate((a) => (a as HTMLAnchorElement).href),
    ).toBe(queueUrl)
    const before = await states()
    page.once('dialog', (dialog) => void dialog.accept())
    await page.click('button[data-action="cancel"]')
    await page.waitForSelector('[data-flash="ok"]')
    await page.waitForSelector('[data-state="canceled"]')
    expect(await states()).toEqual({ ...before, [`${queue} ${id}`]: 'canceled' })
    // The flash links to the page shown.
    expect(await page.locator('#flash a').evaluate((a) => (a as HTMLAnchorElement).href)).toBe(page.url())
    await page.goBack()
    await page.waitForFunction(() => document.body.dataset.live === 'open')
  }

  const ODD_IDS = ['.', '..', '%2e%2e', '.%2e', 'a/b', '../x', '?x', '#x', '%', '%2F', '=.']
  const ODD_QUEUES = ['.', '..', '%2e%2e']

  describe('ids and queue names a URL parser would change', () => {
    test(`${on} each job is reached through the links of a node:http mount, and its cancel button cancels that job only`, async () => {
      const replies = defineQueue('replies')
      for (const id of ODD_IDS) await enqueue(t.db, replies, { id }, { id })
      for (const queue of ODD_QUEUES) await enqueue(t.db, defineQueue(queue), { queue }, { id: '..' })
      const root = await nodeMount()
      const page = await newPage()
      for (const id of ODD_IDS) await openAndCancel(page, root, 'replies', id)
      for (const queue of ODD_QUEUES) await openAndCancel(page, root, queue, '..')
      expect(Object.values(await states()).every((state) => state === 'canceled')).toBe(true)
    })

    test(`${on} the same through Hono under /jobs; a queue named .. is paused by its own button`, async () => {
      const replies = defineQueue('replies')
      const ids = ['.', '..', '%2e%2e', 'a/b', '%']
      for (const id of ids) await enqueue(t.db, replies, { id }, { id })
      await enqueue(t.db, defineQueue('..'), null, { id: '.' })
      await enqueue(t.db, defineQueue('.'), null, { id: '.' })
      const root = await honoMount()
      const page = await newPage()
      for (const id of ids) await openAndCancel(page, root, 'replies', id)
      await openAndCancel(page, root, '..', '.')
      await page.goto(`${root}/`)
      await page.click(`tr[data-queue="."] td:first-child a`)
      await page.waitForURL((url) => url.pathname.includes('/queues/'))
      await page.waitForFunction(() => document.body.dataset.live === 'open')
      await page.click('button[data-action="pause"]')
      await page.waitForSelector('button[data-action="resume"]')
      expect((await queueCounts(t.db, '.')).paused).toBe(true)
      expect((await queueCounts(t.db, '..')).paused).toBe(false)
      expect((await queueCounts(t.db, 'replies')).paused).toBe(false)
    })
  })

  describe('ids another program wrote', () => {
    test(`${on} JOB-18 a job whose id is empty or 5,000 bytes long, written with plain SQL, is reached through the queue page's link, and its page goes live`, async () => {
      const replies = defineQueue('replies')
      const ids = ['', 'x'.repeat(5_000)]
      for (const [n, id] of ids.entries()) {
        await enqueue(t.db, replies, { n }, { id: `added-${n}` })
        await t.run(`update jobs_job set id = $1 where id = $2`, id, `added-${n}`)
      }
      const root = await nodeMount()
      const page = await newPage()
      for (const id of ids) {
        await page.goto(`${root}/queues/replies`)
        await page.waitForFunction(() => document.body.dataset.live === 'open')
        await page.click(`tr[data-job=${quoted(id)}] td:first-child a`)
        // The job's page, loaded: the queue page's own live flag would otherwise answer the wait below at once.
        await page.waitForURL((url) => url.pathname.includes('/queues/replies/jobs/'))
        await page.waitForFunction(() => document.body.dataset.live === 'open')
        expect(await page.locator('main h1').textContent()).toBe(`Job ${id === '' ? '(empty id)' : id} waiting`)
        expect(await page.locator('pre[data-value]').textContent()).toContain(`"n": ${ids.indexOf(id)}`)
      }
    })
  })

  describe('tokens', () => {
    test(`${on} two dashboards with their own tokens, on two ports of one host, both stay open in one browser`, async () => {
      const first = await nodeMount({ token: 'the-first-dashboard-secret' })
      const second = await nodeMount({ token: 'the-second-dashboard-secret' })
      await enqueue(t.db, defineQueue('replies'), null, { id: 'reply:1' })
      const page = await newPage()
      // Another local service's cookie of the old name, sent to every port of the host.
      await page.context().addCookies([{ name: 'drizzle_jobs_token', value: 'another-service', domain: '127.0.0.1', path: '/' }])
      expect((await page.goto(`${first}/?token=the-first-dashboard-secret`))?.status()).toBe(200)
      expect((await page.goto(`${second}/?token=the-second-dashboard-secret`))?.status()).toBe(200)
      for (const root of [first, second, first]) {
        const answer = await page.goto(`${root}/queues/replies`)
        expect(answer?.status(), root).toBe(200)
        await page.waitForFunction(() => document.body.dataset.live === 'open')
        expect(await page.locator('tr[data-job="reply:1"]').count()).toBe(1)
      }
    })
  })
})
