import fc from 'fast-check'
import { expect, test } from 'vitest'
import { cutToBytes } from './text.js'

const strict = new TextDecoder('utf-8', { fatal: true })
/** The text with each lone surrogate as U+FFFD, as UTF-8 stores it (String.prototype.toWellFormed, ES2024). */
const wellFormed = (text: string): string => (text as string & { toWellFormed(): string }).toWellFormed()

test('cutToBytes keeps text within the limit whole, and cuts longer text to a well-formed head and a marker within it', () => {
  // Strings of any code units, lone surrogates among them, around a small limit.
  const text = fc.string({
    unit: fc.oneof(fc.constantFrom('a', 'é', '€', '😀', '\ud800', '\udc00'), fc.string({ unit: 'binary', maxLength: 1 })),
    maxLength: 300,
  })
  fc.assert(
    fc.property(text, fc.integer({ min: 40, max: 400 }), (input, maxBytes) => {
      const total = Buffer.byteLength(input)
      const output = cutToBytes(input, maxBytes)
      if (total <= maxBytes) {
        expect(output).toBe(input)
        return
      }
      const bytes = Buffer.from(output)
      expect(bytes.length).toBeLessThanOrEqual(maxBytes)
      expect(strict.decode(bytes)).toBe(output)
      const match = /… \[cut ([\d,]+) bytes\]$/.exec(output)!
      const head = output.slice(0, match.index)
      expect(wellFormed(input).startsWith(head)).toBe(true)
      expect(Number(match[1]!.replaceAll(',', ''))).toBe(total - Buffer.byteLength(head))
      // No more was cut than needed: the next character would not have fitted beside the longest marker.
      const next = String.fromCodePoint(wellFormed(input).codePointAt(head.length)!)
      const longestMarker = `… [cut ${total.toLocaleString('en-US')} bytes]`
      expect(Buffer.byteLength(head) + Buffer.byteLength(next) + Buffer.byteLength(longestMarker)).toBeGreaterThan(maxBytes)
    }),
    { numRuns: 2_000 },
  )
})

test('cutToBytes groups the count of bytes cut by thousands', () => {
  expect(cutToBytes('E'.repeat(5_000_000), 64 * 1024).slice(-25)).toBe('… [cut 4,934,489 bytes]'.padStart(25, 'E'))
  expect(cutToBytes('x'.repeat(1_000), 100)).toBe(`${'x'.repeat(79)}… [cut 921 bytes]`)
})
