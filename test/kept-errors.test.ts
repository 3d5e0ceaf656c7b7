/**
 * A kept error message and a kept stack are each at most 64 KiB of UTF-8: longer ones are cut on a
 * character boundary and end with a marker saying how many bytes were cut, the marker within the limit.
 */
import { expect, test } from 'vitest'
import { defineQueue, enqueue, work, type Handler, type Queue } from '../src/index.js'
import { drain } from '../src/testing/index.js'
import { eachFreshDb } from './helpers/db.js'
import { waitFor } from './helpers/wait.js'

const LIMIT = 64 * 1024
const MARKER = / \[cut ([\d,]+) bytes\]$/

const { t, workers } = eachFreshDb()

interface Kept {
  state: string
  error: string | null
  errorStack: string | null
  errorBytes: number | null
  stackBytes: number | null
  errorBlob: Buffer | null
}

function kept(id: string): Kept {
  return t.client
    .prepare(`select state, error, error_stack as errorStack, length(cast(error as blob)) as errorBytes,
      length(cast(error_stack as blob)) as stackBytes, cast(error as blob) as errorBlob from jobs_job where id = ?`)
    .get(id) as Kept
}

/** Runs one job of `queue` through a worker until it has failed for good; answers what was kept. */
async function failOnce(queue: Queue, handler: Handler<unknown>): Promise<Kept> {
  enqueue(t.db, queue, null, { id: 'job' })
  workers.push(work(t.db, queue, handler))
  await waitFor(() => kept('job').state === 'failed', 'the job to fail')
  return kept('job')
}

/** The bytes a marker says were cut, checked against what the text's bytes were. */
function cutBytes(text: string): number {
  const match = MARKER.exec(text)
  expect(match, `a marker ends ${JSON.stringify(text.slice(-40))}`).not.toBeNull()
  return Number(match![1]!.replaceAll(',', ''))
}

test('run.fail with 5,000,000 bytes keeps at most 64 KiB, its head then a marker of how much was cut', async () => {
  const row = await failOnce(defineQueue('huge-fail'), (_value, run) => run.fail('E'.repeat(5_000_000)))
  expect(row.errorBytes).toBeLessThanOrEqual(LIMIT)
  expect(row.errorBytes).toBeGreaterThan(LIMIT - 64)
  expect(row.error).toMatch(/^E+… \[cut [\d,]+ bytes\]$/)
  const head = row.error!.indexOf('…')
  expect(cutBytes(row.error!)).toBe(5_000_000 - head)
  expect(row.error).toContain('… [cut 4,934,489 bytes]')
})

test('a multi-byte error is cut on a character boundary: the bytes kept are valid UTF-8 and end with the marker', async () => {
  // 120,000 bytes of three-byte characters, and four-byte ones (surrogate pairs) shifted by one byte so that the
  // limit falls inside a character whichever way the marker's length goes.
  for (const [id, text] of [
    ['euros', '€'.repeat(40_000)],
    ['emoji', `a${'😀'.repeat(30_000)}`],
    ['emoji-2', `ab${'😀'.repeat(30_000)}`],
    ['emoji-3', `abc${'😀'.repeat(30_000)}`],
  ] as const) {
    const queue = defineQueue(`multi-byte-${id}`)
    enqueue(t.db, queue, null, { id })
    workers.push(work(t.db, queue, (_value, run) => run.fail(text)))
    await waitFor(() => kept(id).state === 'failed', `job ${id} to fail`)
    const row = kept(id)
    expect(row.errorBytes).toBeLessThanOrEqual(LIMIT)
    // The stored bytes decode strictly: no split character, no lone surrogate.
    const decoded = new TextDecoder('utf-8', { fatal: true }).decode(row.errorBlob!)
    expect(decoded).toBe(row.error)
    const head = row.error!.slice(0, row.error!.lastIndexOf('…'))
    expect(text.startsWith(head)).toBe(true)
    expect(Buffer.byteLength(head)).toBeGreaterThan(LIMIT - 64)
    expect(cutBytes(row.error!)).toBe(Buffer.byteLength(text) - Buffer.byteLength(head))
  }
})

test('a thrown Error with a huge message keeps its message and its stack at most 64 KiB each, each with its marker', async () => {
  const row = await failOnce(defineQueue('huge-throw', { attempts: 1 }), () => {
    throw new Error('€'.repeat(2_000_000))
  })
  expect(row.errorBytes).toBeLessThanOrEqual(LIMIT)
  expect(row.stackBytes).toBeLessThanOrEqual(LIMIT)
  expect(cutBytes(row.error!)).toBeGreaterThan(5_900_000)
  expect(row.errorStack).toMatch(/^Error: €+… \[cut [\d,]+ bytes\]$/)
  expect(cutBytes(row.errorStack!)).toBeGreaterThan(5_900_000)
})

test('an error within 64 KiB is kept whole, with no marker', async () => {
  const reason = '€'.repeat(10_000) + 'x'.repeat(LIMIT - 30_000)
  expect(Buffer.byteLength(reason)).toBe(LIMIT)
  const row = await failOnce(defineQueue('fits'), (_value, run) => run.fail(reason))
  expect(row.error).toBe(reason)
})

test('a retry scheduled after a huge error keeps it cut too, and drain cuts as a worker does', async () => {
  const queue = defineQueue('huge-drain', { attempts: 2, backoff: { initial: '1h' } })
  enqueue(t.db, queue, null, { id: 'job' })
  const result = await drain(t.db, queue, () => {
    throw new Error('E'.repeat(1_000_000))
  })
  expect(result.runs).toHaveLength(1)
  const row = kept('job')
  expect(row.state).toBe('scheduled')
  expect(row.errorBytes).toBeLessThanOrEqual(LIMIT)
  expect(row.stackBytes).toBeLessThanOrEqual(LIMIT)
  expect(result.runs[0]!.error).toBe(row.error)
  expect(cutBytes(row.error!)).toBe(1_000_000 - row.error!.indexOf('…'))
})
