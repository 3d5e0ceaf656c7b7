import { describe, expect, test } from 'vitest'
import { ClaimWaiters } from './fair-share.js'

const T = 1_700_000_000_000
const WAIT = 1_000

describe('shares of a concurrency', () => {
  test('with no other waiter a claimer may take what the limit leaves: nothing changes', () => {
    expect(new ClaimWaiters(null, T).room('a', 4, 3)).toBe(Infinity)
    expect(new ClaimWaiters(JSON.stringify({ a: T + 500 }), T).room('a', 4, 3)).toBe(Infinity)
  })

  test('while others wait a claimer takes its share, rounded up, less what it holds', () => {
    const waiters = new ClaimWaiters({ b: T + 500, c: T + 500, d: T + 500 }, T)
    expect(waiters.room('a', 4, 0)).toBe(1)
    expect(waiters.room('a', 4, 1)).toBe(0)
    expect(waiters.room('a', 4, 3)).toBe(0)
    expect(waiters.room('b', 4, 0)).toBe(2)
    expect(new ClaimWaiters({ b: T + 500 }, T).room('a', 5, 1)).toBe(2)
  })

  test('expired entries and values another program broke count as no waiters', () => {
    expect(new ClaimWaiters({ b: T, c: T - 1 }, T).room('a', 4, 3)).toBe(Infinity)
    for (const broken of ['not json', '[1,2]', '{"b":"soon"}', 42]) expect(new ClaimWaiters(broken, T).room('a', 4, 3)).toBe(Infinity)
  })

  test('a waiter writes its entry when missing or half gone, dropping the expired ones; else writes nothing', () => {
    expect(new ClaimWaiters(null, T).next('a', true, WAIT)).toBe(JSON.stringify({ a: T + WAIT }))
    expect(new ClaimWaiters({ a: T + 600, b: T + 100 }, T).next('a', true, WAIT)).toBeUndefined()
    expect(new ClaimWaiters({ a: T + 400, b: T + 100, old: T - 5 }, T).next('a', true, WAIT)).toBe(
      JSON.stringify({ a: T + WAIT, b: T + 100 }),
    )
    const waiters = new ClaimWaiters({ a: T + 400 }, T)
    waiters.next('a', true, WAIT)
    expect(waiters.remaining('a')).toBe(WAIT)
  })

  test('a claimer that got what it wanted leaves, writing only when it was there', () => {
    expect(new ClaimWaiters({ b: T + 100 }, T).next('a', false, WAIT)).toBeUndefined()
    expect(new ClaimWaiters({ a: T + 100, b: T + 100 }, T).next('a', false, WAIT)).toBe(JSON.stringify({ b: T + 100 }))
    expect(new ClaimWaiters({ a: T + 100 }, T).next('a', false, WAIT)).toBeNull()
    expect(new ClaimWaiters({ a: T + 100 }, T).remaining('b')).toBe(0)
  })
})
