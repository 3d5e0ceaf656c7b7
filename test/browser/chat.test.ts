/**
 * The chat example in headless Chromium, against the real app: several web
 * processes on one SQLite file, and on one PostgreSQL database, replies as
 * jobs watched over server-sent events. The page must show "N ahead",
 * "thinking" and each reply exactly once, also when a web process is
 * SIGKILLed in the middle of a reply. The test names carry the database:
 * `JOB-05 [postgres] …`.
 */
import { resolve } from 'node:path'
import Database from 'better-sqlite3'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { launchBrowser, screenshot, startWebProcess, type WebProcess } from '../helpers/browser.js'
import { STARTUP_MS } from '../helpers/processes.js'
import { removeTempDirs, tempDir } from '../helpers/db.js'
import { DIALECTS, type DialectName } from '../helpers/dialects.js'
import { freshPgDb } from '../helpers/pg.js'
import { waitFor } from '../helpers/wait.js'

const CHAT = resolve(import.meta.dirname, '../../examples/chat/main.ts')

let browser: Browser
const chats: WebProcess[] = []
const contexts: BrowserContext[] = []
/** What each test opened on its database: readers, samplers, and the PostgreSQL database itself, closed, stopped or dropped after the chat stops. */
const closers: (() => Promise<void> | void)[] = []

beforeAll(async () => {
  browser = await launchBrowser()
})
afterEach(async () => {
  for (const context of contexts.splice(0)) await context.close()
  await Promise.all(chats.splice(0).map((chat) => chat.stop()))
  for (const close of closers.splice(0).reverse()) await close()
  removeTempDirs()
})
afterAll(async () => {
  await browser?.close()
})

/** Reads the chat's database with plain SQL (`$1`… for parameters), beside the chat's own processes. */
interface ChatDatabase {
  query<T>(sql: string, ...params: unknown[]): Promise<T[]>
}

interface Chat {
  url: string
  db: ChatDatabase
  web: WebProcess
}

/**
 * Starts the chat with deterministic misbehaviour only (`!fail`, `!slow`): on a fresh SQLite file, or on a
 * fresh PostgreSQL database of the run's server, given to the chat's processes as DATABASE_URL.
 */
async function startChat(dialect: DialectName, processes: number, modelMs: string, extraFlags: string[] = []): Promise<Chat> {
  const flags = [
    '--port',
    '0',
    '--processes',
    String(processes),
    '--model-ms',
    modelMs,
    '--fail-rate',
    '0',
    '--slow-down-rate',
    '0',
    '--slow-down-ms',
    '300',
    '--backoff',
    '200ms',
    ...extraFlags,
  ]
  if (dialect === 'sqlite') {
    const file = resolve(tempDir('chat-'), 'chat.db')
    const web = await startWebProcess(CHAT, [...flags, '--db', file], undefined, { DATABASE_URL: undefined })
    chats.push(web)
    const client = new Database(file, { readonly: true })
    closers.push(() => void client.close())
    const db: ChatDatabase = {
      query: async <T>(sql: string, ...params: unknown[]) => client.prepare(sql.replace(/\$\d+/g, '?')).all(...params) as T[],
    }
    return { url: web.url, db, web }
  }
  // An empty database: the chat migrates it at start, as it does its SQLite file.
  const pg = await freshPgDb({ migrate: false })
  closers.push(() => pg.drop())
  const web = await startWebProcess(CHAT, flags, undefined, { DATABASE_URL: pg.url })
  chats.push(web)
  const db: ChatDatabase = { query: async <T>(sql: string, ...params: unknown[]) => (await pg.pool.query(sql, params)).rows as T[] }
  return { url: web.url, db, web }
}

/** A user: a browser context of their own (their own chat), whose page records every status and state each reply shows. */
async function openUser(url: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 900, height: 900 } })
  contexts.push(context)
  await context.addInitScript(() => {
    const seen: { reply: string; status?: string; state?: string }[] = []
    ;(window as unknown as { seen: typeof seen }).seen = seen
    new MutationObserver((mutations) => {
      for (const mutation of mutations) {
        const target = mutation.target as Element
        const reply = target.closest?.('[data-reply-to]') as HTMLElement | null
        if (!reply) continue
        if (mutation.type === 'attributes') seen.push({ reply: reply.dataset.replyTo!, state: reply.dataset.state! })
        else if (target.classList?.contains('status') && target.textContent)
          seen.push({ reply: reply.dataset.replyTo!, status: target.textContent })
      }
    }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-state'] })
  })
  const page = await context.newPage()
  await page.goto(url)
  await page.waitForSelector('body[data-ready="true"]')
  return page
}

async function post(page: Page, texts: string[]): Promise<void> {
  for (const text of texts) {
    const before = await page.locator('#log li').count()
    await page.fill('#text', text)
    await page.press('#text', 'Enter')
    await page.waitForFunction((n) => document.querySelectorAll('#log li').length > n, before)
  }
}

interface Seen {
  reply: string
  status?: string
  state?: string
}

function seenOn(page: Page): Promise<Seen[]> {
  return page.evaluate(() => (window as unknown as { seen: Seen[] }).seen)
}

/** Waits until every reply on the page is done; answers the page's replies by message id. */
async function allReplied(page: Page, count: number): Promise<Map<string, string>> {
  await page.waitForFunction((n) => document.querySelectorAll('.reply[data-state="done"]').length === n, count, { timeout: 40_000 })
  const replies = await page.$$eval('.reply', (nodes) =>
    nodes.map((node) => [(node as HTMLElement).dataset.replyTo!, node.querySelector('.text')!.textContent!] as const),
  )
  return new Map(replies)
}

/** The replies in the database: each user message must have exactly one. */
async function storedReplies(
  db: ChatDatabase,
): Promise<{ asked: number[]; failing: number | undefined; replies: Map<string, string>; copies: number[] }> {
  const asked = (await db.query<{ id: number }>(`select id from messages where role = 'user' order by id`)).map((row) => row.id)
  const [failing] = await db.query<{ id: number }>(`select id from messages where role = 'user' and text like '%!fail%'`)
  const rows = await db.query<{ replyTo: number; text: string }>(
    `select reply_to as "replyTo", text from messages where role = 'assistant'`,
  )
  // PostgreSQL's count is a bigint, which node-postgres answers as text.
  const copies = (
    await db.query<{ n: number | string }>(`select count(*) as n from messages where role = 'assistant' group by reply_to`)
  ).map((row) => Number(row.n))
  return { asked, failing: failing?.id, replies: new Map(rows.map((row) => [String(row.replyTo), row.text])), copies }
}

/**
 * Calls `read` every 15 ms, one call at a time, until the answered `stop`, which waits for the call under way and
 * throws what a call threw (the first failed call ends the sampling). The test's end stops it too, before the
 * database it reads is closed: a test that failed before its own stop leaves no read behind it.
 */
function sampleEvery15ms(read: () => Promise<void>): () => Promise<void> {
  let reading: Promise<void> | null = null
  let failed: { error: unknown } | null = null
  const timer = setInterval(() => {
    reading ??= read()
      .catch((error: unknown) => {
        failed ??= { error }
        clearInterval(timer)
      })
      .finally(() => (reading = null))
  }, 15)
  const stopped = async () => {
    clearInterval(timer)
    await reading
  }
  closers.push(stopped)
  return async () => {
    await stopped()
    if (failed) throw failed.error
  }
}

/** Samples the runs under way across every process from the database, to check the queue's concurrency of 4. */
function sampleRunning(db: ChatDatabase): { max(): number; stop(): Promise<void> } {
  let max = 0
  const stop = sampleEvery15ms(async () => {
    const [row] = await db.query<{ n: number | string }>(`select count(*) as n from jobs_job where queue = 'replies' and owner is not null`)
    max = Math.max(max, Number(row!.n))
  })
  return { max: () => max, stop }
}

/**
 * Samples the reply queue's log of run starts, as the claims of every process stamp them in `jobs_queue.rate_starts`,
 * and keeps each start it sees. At a limit of 1 the log holds the latest start, which stays there a whole window, so
 * a sample every 15 ms sees every start.
 */
function sampleRateStarts(db: ChatDatabase): { starts(): number[]; stop(): Promise<void> } {
  const seen = new Set<number>()
  const stop = sampleEvery15ms(async () => {
    const [row] = await db.query<{ log: string | { starts?: number[] } | null }>(
      `select rate_starts as log from jobs_queue where name = 'replies'`,
    )
    const log = typeof row?.log === 'string' ? (JSON.parse(row.log) as { starts?: number[] }) : row?.log
    for (const start of log?.starts ?? []) seen.add(Number(start))
  })
  return { starts: () => [...seen].sort((a, b) => a - b), stop }
}

/** A chat test's timeout: the chat's start (its processes', node --import tsx each), then its waits (20 s each, 40 s for the replies). */
const CHAT_TEST_MS = STARTUP_MS + 120_000

describe.each(DIALECTS)('%s', (dialect) => {
  const on = `[${dialect}]`
  /** Screenshots of the SQLite chat keep their names; the PostgreSQL chat's are named after it. */
  const shot = (page: Page, name: string) => screenshot(page, dialect === 'sqlite' ? name : name.replace('chat-', 'chat-pg-'))

  test(
    `JOB-11 ${on} the chat page shows "N ahead", "thinking" and every reply once, with two web processes and concurrency 4 across them`,
    async () => {
      const chat = await startChat(dialect, 2, '1000-1400')
      const running = sampleRunning(chat.db)
      const [alice, bob] = [await openUser(chat.url), await openUser(chat.url)]
      const asks = {
        alice: ['Hello there !fail', 'What is SQLite?', 'Tell me a joke', 'How are you?'],
        bob: ['Hi !slow', 'What is Drizzle?', 'Why a queue?', 'Thanks'],
      }
      await Promise.all([post(alice, asks.alice), post(bob, asks.bob)])
      // Eight replies, four at once: some wait, and say how many are ahead of them.
      await waitFor(
        async () => (await Promise.all([alice, bob].map(seenOn))).flat().some((s) => /\d+ ahead/.test(s.status ?? '')),
        'a reply waiting its turn',
      )
      await shot(alice, 'chat-waiting')
      await waitFor(async () => (await seenOn(bob)).some((s) => s.status === 'thinking…'), 'a reply thinking')
      await shot(bob, 'chat-thinking')

      const shown = await Promise.all([allReplied(alice, 4), allReplied(bob, 4)])
      await running.stop()
      await shot(alice, 'chat-replied')
      const stored = await storedReplies(chat.db)
      expect(stored.asked).toHaveLength(8)
      expect(stored.copies).toEqual(Array(8).fill(1))
      for (const replies of shown) {
        for (const [messageId, text] of replies) {
          expect(text.length).toBeGreaterThan(0)
          expect(text).toBe(stored.replies.get(messageId))
        }
      }
      const seen = [...(await seenOn(alice)), ...(await seenOn(bob))]
      const byReply = new Map<string, Seen[]>()
      for (const s of seen) byReply.set(s.reply, [...(byReply.get(s.reply) ?? []), s])
      expect(byReply.size).toBe(8)
      for (const [reply, events] of byReply) {
        // Each reply arrived once: it entered "done" a single time, and showed "thinking" while it ran.
        expect(
          events.filter((e) => e.state === 'done'),
          `reply to ${reply}`,
        ).toHaveLength(1)
        expect(
          events.some((e) => e.status === 'thinking…'),
          `reply to ${reply} thinking`,
        ).toBe(true)
      }
      expect(seen.some((s) => /^\d+ ahead$/.test(s.status ?? '') && s.status !== '0 ahead')).toBe(true)
      // The reply that failed once shows its retry, and the one told to slow down its snooze.
      // Found by its text: the two users post at once, so either may have the first message.
      const failedOnce = stored.failing
      expect(
        byReply.get(String(failedOnce))!.some((e) => /attempt 1 of 5 failed \(the model is overloaded.*trying again/.test(e.status ?? '')),
      ).toBe(true)
      const slowed = await bob.$$eval('[data-reply-to]', (nodes) => (nodes[0] as HTMLElement).dataset.replyTo!)
      expect(byReply.get(slowed)!.some((e) => /slow down; trying again/.test(e.status ?? ''))).toBe(true)
      expect(running.max()).toBe(4)
    },
    CHAT_TEST_MS,
  )

  test(
    `JOB-05 ${on} a web process SIGKILLed in the middle of a reply: the reply still arrives, once, on the page`,
    async () => {
      const chat = await startChat(dialect, 2, '1800-2200')
      const carol = await openUser(chat.url)
      await post(carol, ['First question', 'Second question', 'Third question'])
      await waitFor(async () => (await seenOn(carol)).filter((s) => s.status === 'thinking…').length >= 2, 'replies thinking')
      const lease = await waitFor(
        async () =>
          (
            await chat.db.query<{ id: string; owner: string }>(
              `select id, owner from jobs_job where owner is not null order by seq limit 1`,
            )
          )[0],
        'a running reply',
      )
      const pid = Number(lease.owner.split('/')[1])
      expect(pid).not.toBe(chat.web.process.pid)
      process.kill(pid, 'SIGKILL')
      await shot(carol, 'chat-killed')
      await waitFor(() => chat.web.output().includes(`web process ${pid} ended (SIGKILL)`), 'the chat to notice the killed process')

      const shown = await allReplied(carol, 3)
      await shot(carol, 'chat-recovered')
      const [{ attempts }] = (await chat.db.query<{ attempts: number }>(`select attempts from jobs_job where id = $1`, lease.id)) as [
        { attempts: number },
      ]
      expect(attempts).toBe(2)
      const stored = await storedReplies(chat.db)
      expect(stored.copies).toEqual([1, 1, 1])
      for (const [messageId, text] of shown) expect(text).toBe(stored.replies.get(messageId))
      const killedReply = lease.id.replace('reply:', '')
      const events = (await seenOn(carol)).filter((e) => e.reply === killedReply)
      expect(events.filter((e) => e.state === 'done')).toHaveLength(1)
      expect(events.filter((e) => e.status === 'thinking…').length).toBeGreaterThanOrEqual(1)
    },
    CHAT_TEST_MS,
  )

  test(
    `JOB-22 ${on} a reply the model's rate limit holds back says so on the page, then arrives`,
    async () => {
      // One reply started per 4 s across both web processes.
      const chat = await startChat(dialect, 2, '300-500', ['--rate', '1/4s'])
      const stamped = sampleRateStarts(chat.db)
      const dave = await openUser(chat.url)
      await post(dave, ['First question', 'Second question'])
      await waitFor(
        async () => (await seenOn(dave)).some((s) => /^waiting for the model's rate limit \(\d+ s\)/.test(s.status ?? '')),
        'a reply waiting for the rate limit',
        20_000,
      )
      await shot(dave, 'chat-rate-limited')
      const shown = await allReplied(dave, 2)
      const stored = await storedReplies(chat.db)
      expect(stored.copies).toEqual([1, 1])
      for (const [messageId, text] of shown) expect(text).toBe(stored.replies.get(messageId))
      // The held reply showed the wait, then ran: "thinking" came after it.
      const [, second] = stored.asked.map(String) as [string, string]
      const events = (await seenOn(dave)).filter((e) => e.reply === second)
      const waited = events.findIndex((e) => /rate limit/.test(e.status ?? ''))
      expect(waited).toBeGreaterThanOrEqual(0)
      expect(events.slice(waited).some((e) => e.status === 'thinking…')).toBe(true)
      // The rate held across both processes: the starts the claims stamped, one per reply (and one more for a run handed
      // back unstarted, which the first reply may show too on a loaded machine: a run that cannot begin within 100 ms of
      // its stamped start goes back, and waits for the window like any other), are each a window (4 s) apart. Starts
      // stamped together by two processes would leave one in the log, and fewer starts than replies.
      await stamped.stop()
      const starts = stamped.starts()
      expect(starts.length).toBeGreaterThanOrEqual(2)
      for (const [i, start] of starts.slice(1).entries()) expect(start - starts[i]!).toBeGreaterThanOrEqual(4_000)
      // And each reply ended after a start of its own: the second ended after the last start.
      const finished = await chat.db.query<{ t: number | string }>(
        dialect === 'sqlite'
          ? `select finished_at as t from jobs_job where queue = 'replies' order by finished_at`
          : `select extract(epoch from finished_at) * 1000 as t from jobs_job where queue = 'replies' order by finished_at`,
      )
      expect(finished).toHaveLength(2)
      expect(Number(finished[0]!.t)).toBeGreaterThan(starts[0]!)
      expect(Number(finished[1]!.t)).toBeGreaterThan(starts.at(-1)!)
    },
    CHAT_TEST_MS,
  )
})
