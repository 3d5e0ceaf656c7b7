/**
 * Generated job ids: UUID version 7 (RFC 9562), time-ordered. Ids made in
 * order land next to each other in the `(queue, id)` index, so adding a job
 * touches the same few index pages instead of a random one each time; that
 * is most of what a random id would cost an enqueue.
 */
import { randomFillSync } from 'node:crypto'

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'))
const pool = Buffer.alloc(4096)
let poolOffset = pool.length
let lastMs = -1
let counter = 0

function randomBytes8(): Buffer {
  if (poolOffset + 8 > pool.length) {
    randomFillSync(pool)
    poolOffset = 0
  }
  const bytes = pool.subarray(poolOffset, poolOffset + 8)
  poolOffset += 8
  return bytes
}

/** A new UUIDv7: 48 bits of ms time, a 12-bit counter that keeps ids of the same ms in order, 62 random bits. */
export function newJobId(now: number = Date.now()): string {
  if (now > lastMs) {
    lastMs = now
    counter = 0
  } else if (++counter > 0xfff) {
    lastMs++
    counter = 0
  }
  const ms = lastMs
  const random = randomBytes8()
  const high = Math.floor(ms / 0x10000)
  const low = ms % 0x10000
  return (
    HEX[(high >>> 24) & 0xff]! +
    HEX[(high >>> 16) & 0xff]! +
    HEX[(high >>> 8) & 0xff]! +
    HEX[high & 0xff]! +
    '-' +
    HEX[(low >>> 8) & 0xff]! +
    HEX[low & 0xff]! +
    '-' +
    HEX[0x70 | (counter >>> 8)]! +
    HEX[counter & 0xff]! +
    '-' +
    HEX[0x80 | (random[0]! & 0x3f)]! +
    HEX[random[1]!]! +
    '-' +
    HEX[random[2]!]! +
    HEX[random[3]!]! +
    HEX[random[4]!]! +
    HEX[random[5]!]! +
    HEX[random[6]!]! +
    HEX[random[7]!]!
  )
}
