/**
 * Time-ordered ids in UUIDv7 form (48 bits of ms time, a 12-bit counter for
 * ids of the same ms, random bits) for the floor, so that its `(queue, id)`
 * index is written in order as drizzle-jobs' is: a random id would touch a
 * random index page on every add and cost several times the insert.
 */
import { randomFillSync } from 'node:crypto'

const pool = Buffer.alloc(4096)
let offset = pool.length
let lastMs = -1
let counter = 0

export function uuid7(now: number = Date.now()): string {
  if (now > lastMs) {
    lastMs = now
    counter = 0
  } else if (++counter > 0xfff) {
    lastMs++
    counter = 0
  }
  if (offset + 8 > pool.length) {
    randomFillSync(pool)
    offset = 0
  }
  const time = lastMs.toString(16).padStart(12, '0')
  const random = pool.toString('hex', offset, offset + 8)
  offset += 8
  const variant = (8 + (parseInt(random[0] as string, 16) & 3)).toString(16)
  return `${time.slice(0, 8)}-${time.slice(8)}-7${counter.toString(16).padStart(3, '0')}-${variant}${random.slice(1, 4)}-${random.slice(4, 16)}`
}
