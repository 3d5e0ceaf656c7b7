/**
 * JOB-21 on the dashboard, in headless Chromium: a queue's page has a
 * schedules panel with each schedule's cron, zone, next and last slots, and
 * a link to the last slot's job showing its state; a queue without schedules
 * says so. The screenshot goes to test-artifacts/dashboard-schedules.png.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Browser } from 'playwright-core'
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest'
import { dashboard } from '../../src/dashboard/index.js'
import { defineQueue, enqueue, schedule } from '../../src/index.js'
import { drain, runSchedule } from '../../src/testing/index.js'
import { launchBrowser, screenshot } from '../helpers/browser.js'
import { freshDb, removeTempDirs, type TestDb } from '../helpers/db.js'

let browser: Browser
let t: TestDb | undefined

beforeAll(async () => {
  browser = await launchBrowser()
})
afterAll(async () => {
  await browser?.close()
})
afterEach(() => {
  t?.close()
  removeTempDirs()
})

test("JOB-21 the queue page shows its schedules, their next and last slots, and links the last slot's job with its state", async () => {
  t = freshDb('chat.db')
  const digests = defineQueue<{ kind: string }>('digests')
  const replies = defineQueue('replies')
  schedule(t.db, digests, 'daily-digest', { cron: '0 8 * * *', tz: 'Europe/Paris', value: { kind: 'daily' } })
  schedule(t.db, digests, 'weekly-digest', { cron: '0 9 * * 1', value: { kind: 'weekly' } })
  const fired = runSchedule(t.db, digests, 'daily-digest')
  drain(t.db, digests, () => {})
  enqueue(t.db, replies, null)

  const board = dashboard(t.db)
  const server = createServer(board.node)
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const context = await browser.newContext()
  try {
    const page = await context.newPage()
    await page.goto(`${base}/queues/digests`)
    const rows = page.locator('[data-live="schedules"] tr[data-schedule]')
    await expect.poll(() => rows.count()).toBe(2)
    const daily = page.locator('tr[data-schedule="daily-digest"]')
    expect(await daily.locator('td').nth(1).textContent()).toBe('0 8 * * *')
    expect(await daily.locator('td').nth(2).textContent()).toBe('Europe/Paris')
    expect(await daily.locator('td').nth(3).textContent()).toMatch(/^in /)
    expect(await daily.locator('td').nth(4).textContent()).toMatch(/ago$|^in /)
    expect(await daily.locator('td').nth(5).textContent()).toBe('done')
    expect(await page.locator('tr[data-schedule="weekly-digest"] td').nth(5).textContent()).toBe('–')
    await screenshot(page, 'dashboard-schedules')
    await daily.locator('td').nth(5).locator('a').click()
    await page.waitForURL((url) => decodeURIComponent(url.pathname).endsWith(fired.id))
    expect(await page.locator('h1').textContent()).toContain(fired.id)

    await page.goto(`${base}/queues/replies`)
    expect(await page.locator('[data-live="schedules"]').textContent()).toContain('No schedule adds jobs to this queue.')
  } finally {
    await context.close()
    board.close()
    server.closeAllConnections()
    await new Promise<void>((closed) => server.close(() => closed()))
  }
})
