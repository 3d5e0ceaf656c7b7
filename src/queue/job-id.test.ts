import { expect, test } from 'vitest'
import { newJobId } from './job-id.js'

test('generated ids are UUIDv7, unique, and sort in the order they were made', () => {
  const ids = Array.from({ length: 10_000 }, (_, i) => newJobId(1_700_000_000_000 + Math.floor(i / 3_000)))
  for (const id of ids.slice(0, 50)) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  expect(new Set(ids).size).toBe(ids.length)
  expect([...ids].sort()).toEqual(ids)
  expect(newJobId(1_700_000_000_000 + 10_000).startsWith('018bcfe5')).toBe(true)
})
