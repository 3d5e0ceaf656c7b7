import { describe, expect, test } from 'vitest'
import { RateLog, rateLimitedUntil, rateOf, rateWindowMs, type Rate } from './rate.js'

const TEN_PER_SECOND: Rate = { limit: 10, perMs: 1_000, perGroup: null }
const GROUPED: Rate = { limit: 10, perMs: 1_000, perGroup: 2 }
const T = 1_700_000_000_000

describe('rate arithmetic', () => {
  test('the window is per plus a slack of at most 100 ms, a tenth of per when less', () => {
    expect(rateWindowMs(TEN_PER_SECOND)).toBe(1_100)
    expect(rateWindowMs({ limit: 1, perMs: 60_000, perGroup: null })).toBe(60_100)
    expect(rateWindowMs({ limit: 1, perMs: 100, perGroup: null })).toBe(110)
    expect(rateWindowMs({ limit: 1, perMs: 9, perGroup: null })).toBe(9)
  })

  test('an empty or missing log leaves the whole limit', () => {
    expect(new RateLog(TEN_PER_SECOND, null, T).room()).toBe(10)
    expect(new RateLog(TEN_PER_SECOND, '{"starts":[],"groups":{}}', T).room()).toBe(10)
  })

  test('room is the limit less the starts still in the window; older starts are dropped', () => {
    const stored = JSON.stringify({ starts: [T - 2_000, T - 1_100, T - 1_099, T - 10, T], groups: {} })
    const log = new RateLog(TEN_PER_SECOND, stored, T)
    expect(log.room()).toBe(7)
    expect(log.toJSON().starts).toEqual([T - 1_099, T - 10, T])
  })

  test('a full window opens when its oldest start leaves it', () => {
    const starts = Array.from({ length: 10 }, (_, i) => T - 900 + i * 10)
    const log = new RateLog(TEN_PER_SECOND, { starts, groups: {} }, T)
    expect(log.room()).toBe(0)
    expect(log.opensAt()).toBe(T - 900 + 1_100)
    expect(new RateLog(TEN_PER_SECOND, { starts: starts.slice(1), groups: {} }, T).opensAt()).toBe(T)
  })

  test('adding starts fills the window, and the stored log keeps at most limit starts, ascending', () => {
    const log = new RateLog(TEN_PER_SECOND, { starts: [T - 500, T - 600], groups: {} }, T)
    for (let i = 0; i < 8; i++) log.add(null)
    expect(log.room()).toBe(0)
    expect(log.opensAt()).toBe(T - 600 + 1_100)
    const stored = log.toJSON()
    expect(stored.starts).toHaveLength(10)
    expect(stored.starts[0]).toBe(T - 600)
    expect(stored.groups).toEqual({})
  })

  test('the starts a claim makes are stamped when it writes the log, never before its now', () => {
    const log = new RateLog(GROUPED, { starts: [T - 500], groups: { a: [T - 500] } }, T)
    log.add('a')
    log.add(null)
    expect(log.groupHasRoom('a')).toBe(false)
    log.stamp(T + 40)
    expect(log.toJSON()).toEqual({ starts: [T - 500, T + 40, T + 40], groups: { a: [T - 500, T + 40] } })
    log.stamp(T - 1_000)
    expect(log.toJSON().starts).toEqual([T - 500, T, T])
  })

  test('a claim is handed the room each group has left: the groups in the window, and the cap for any other, even one named like a property of Object', () => {
    expect(new RateLog(TEN_PER_SECOND, null, T).groupRooms()).toBeNull()
    const stored = JSON.parse(
      `{"starts":[${T - 500},${T - 400}],"groups":{"a":[${T - 500}],"__proto__":[${T - 400}],"old":[${T - 5_000}]}}`,
    )
    const log = new RateLog(GROUPED, stored, T)
    const rooms = log.groupRooms()!
    expect(rooms.other).toBe(GROUPED.perGroup)
    expect(Object.entries(rooms.listed).sort()).toEqual([
      ['__proto__', GROUPED.perGroup! - 1],
      ['a', GROUPED.perGroup! - 1],
    ])
    expect(JSON.parse(JSON.stringify(rooms.listed))).toEqual(
      JSON.parse(`{"a":${GROUPED.perGroup! - 1},"__proto__":${GROUPED.perGroup! - 1}}`),
    )
    // The log written back keeps that group's starts too.
    log.add('__proto__')
    expect(JSON.stringify(log.toJSON().groups)).toBe(`{"a":[${T - 500}],"__proto__":[${T - 400},${T}]}`)
  })

  test('a lowered limit counts every start in the window, and keeps only the latest `limit`', () => {
    const starts = Array.from({ length: 10 }, (_, i) => T - 100 + i)
    const log = new RateLog({ limit: 3, perMs: 1_000, perGroup: null }, { starts, groups: {} }, T)
    expect(log.room()).toBe(0)
    // Three starts must leave the window before fewer than three remain: the 8th from the end.
    expect(log.opensAt()).toBe(starts[7]! + 1_100)
    expect(log.toJSON().starts).toEqual(starts.slice(-3))
  })

  test('perGroup caps each group; a job with no group is capped by the limit alone', () => {
    const log = new RateLog(GROUPED, { starts: [T - 100, T - 50], groups: { a: [T - 100, T - 50], b: [T - 2_000] } }, T)
    expect(log.room()).toBe(8)
    expect(log.groupHasRoom('a')).toBe(false)
    expect(log.groupHasRoom('b')).toBe(true)
    expect(log.groupHasRoom(null)).toBe(true)
    expect(log.groupOpensAt('a')).toBe(T - 100 + 1_100)
    expect(log.groupOpensAt('b')).toBe(T)
    log.add('b')
    log.add('b')
    expect(log.groupHasRoom('b')).toBe(false)
    expect(log.toJSON().groups).toEqual({ a: [T - 100, T - 50], b: [T, T] })
  })

  test('a start stamped after now (a clock set back) still counts', () => {
    const log = new RateLog({ limit: 1, perMs: 1_000, perGroup: null }, { starts: [T + 500], groups: {} }, T)
    expect(log.room()).toBe(0)
    expect(log.opensAt()).toBe(T + 500 + 1_100)
  })

  test('a log another program broke reads as no starts', () => {
    for (const stored of ['not json', '[1,2]', '{"starts":"x"}', 42, { starts: ['a', null, T], groups: { a: 'x' } }]) {
      const log = new RateLog(TEN_PER_SECOND, stored, T)
      expect(log.room()).toBeGreaterThanOrEqual(9)
    }
  })

  test('rateOf reads the stored columns: null unless limit and per are whole numbers of at least 1', () => {
    expect(rateOf({ rateLimit: 60, ratePer: 60_000, ratePerGroup: null })).toEqual({ limit: 60, perMs: 60_000, perGroup: null })
    expect(rateOf({ rateLimit: 60, ratePer: 60_000, ratePerGroup: 5 })).toEqual({ limit: 60, perMs: 60_000, perGroup: 5 })
    expect(rateOf({ rateLimit: null, ratePer: null, ratePerGroup: null })).toBeNull()
    expect(rateOf({ rateLimit: 0, ratePer: 1_000, ratePerGroup: null })).toBeNull()
    expect(rateOf(undefined)).toBeNull()
  })

  test('rateLimitedUntil: when a waiting job may start while the window is full, else null', () => {
    const full = { starts: Array.from({ length: 10 }, (_, i) => T - 500 + i), groups: {} }
    const row = {
      state: 'waiting',
      grp: null,
      rateLimit: 10,
      ratePer: 1_000,
      ratePerGroup: null,
      rateStarts: JSON.stringify(full),
      rateNow: null,
    }
    expect(rateLimitedUntil(row, T)).toBe(T - 500 + 1_100)
    expect(rateLimitedUntil({ ...row, rateNow: T + 1_000 }, T)).toBeNull()
    expect(rateLimitedUntil({ ...row, state: 'running' }, T)).toBeNull()
    expect(rateLimitedUntil({ ...row, rateLimit: null }, T)).toBeNull()
    expect(rateLimitedUntil({ ...row, rateStarts: null }, T)).toBeNull()
    const grouped = { ...row, grp: 'a', ratePerGroup: 1, rateStarts: JSON.stringify({ starts: [T - 10], groups: { a: [T - 10] } }) }
    expect(rateLimitedUntil(grouped, T)).toBe(T - 10 + 1_100)
    expect(rateLimitedUntil({ ...grouped, grp: 'b' }, T)).toBeNull()
  })
})
