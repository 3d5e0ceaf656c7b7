import { describe, expect, test } from 'vitest'
import { traceIdOf } from './trace-id.js'

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const PARENT_ID = '00f067aa0ba902b7'

/** The column's value as `send {queue}` stores it, with this traceparent. */
const stored = (traceparent: unknown) => JSON.stringify({ traceparent, tracestate: 'vendor=x' })

describe("a job's trace id, read from its stored trace context", () => {
  test('a valid traceparent gives its trace id, whatever its flags; a later version may carry fields after them', () => {
    expect(traceIdOf(stored(`00-${TRACE_ID}-${PARENT_ID}-01`))).toBe(TRACE_ID)
    expect(traceIdOf(stored(`00-${TRACE_ID}-${PARENT_ID}-00`))).toBe(TRACE_ID)
    expect(traceIdOf(JSON.stringify({ traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` }))).toBe(TRACE_ID)
    expect(traceIdOf(stored(`cc-${TRACE_ID}-${PARENT_ID}-01-what-comes-later`))).toBe(TRACE_ID)
  })

  test('uppercase hex, a trace id or parent id of zeros, version ff and fields after version 00 give null', () => {
    expect(traceIdOf(stored(`00-${TRACE_ID.toUpperCase()}-${PARENT_ID}-01`))).toBeNull()
    expect(traceIdOf(stored(`00-${TRACE_ID}-${PARENT_ID.toUpperCase()}-01`))).toBeNull()
    expect(traceIdOf(stored(`0A-${TRACE_ID}-${PARENT_ID}-01`))).toBeNull()
    expect(traceIdOf(stored(`00-${'0'.repeat(32)}-${PARENT_ID}-01`))).toBeNull()
    expect(traceIdOf(stored(`00-${TRACE_ID}-${'0'.repeat(16)}-01`))).toBeNull()
    expect(traceIdOf(stored(`ff-${TRACE_ID}-${PARENT_ID}-01`))).toBeNull()
    expect(traceIdOf(stored(`00-${TRACE_ID}-${PARENT_ID}-01-more`))).toBeNull()
  })

  test('a malformed traceparent gives null: short or long fields, other separators, spaces, other characters', () => {
    for (const traceparent of [
      '',
      `00-${TRACE_ID.slice(1)}-${PARENT_ID}-01`,
      `00-${TRACE_ID}0-${PARENT_ID}-01`,
      `00-${TRACE_ID}-${PARENT_ID.slice(1)}-01`,
      `00-${TRACE_ID}-${PARENT_ID}-1`,
      `0-${TRACE_ID}-${PARENT_ID}-01`,
      `00_${TRACE_ID}_${PARENT_ID}_01`,
      ` 00-${TRACE_ID}-${PARENT_ID}-01`,
      `00-${TRACE_ID}-${PARENT_ID}-01\n`,
      `00-${TRACE_ID.slice(0, 31)}g-${PARENT_ID}-01`,
      `00-${TRACE_ID}-${PARENT_ID}`,
    ]) {
      expect(traceIdOf(stored(traceparent)), JSON.stringify(traceparent)).toBeNull()
    }
  })

  test('no column value, or one that is not a JSON object holding a traceparent string, gives null and never throws', () => {
    for (const value of [
      null,
      undefined,
      42,
      Buffer.from(stored(`00-${TRACE_ID}-${PARENT_ID}-01`)),
      '',
      'not json',
      '{"traceparent":',
      'null',
      '"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"',
      `["00-${TRACE_ID}-${PARENT_ID}-01"]`,
      '{}',
      '{"tracestate":"vendor=x"}',
      stored(null),
      stored(42),
      stored([`00-${TRACE_ID}-${PARENT_ID}-01`]),
      `{"__proto__":{"traceparent":"00-${TRACE_ID}-${PARENT_ID}-01"}}`,
    ]) {
      expect(traceIdOf(value), String(value)).toBeNull()
    }
  })
})
