/** Text the engine keeps under a byte limit. */

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/**
 * Cuts `text` to at most `maxBytes` of UTF-8, its marker included: the head is kept, cut between two
 * characters (never inside one, nor between the halves of a surrogate pair), followed by a marker such as
 * `… [cut 4,934,489 bytes]`. Text within the limit comes back as it is. `maxBytes` must leave room for
 * the marker (at most 33 bytes).
 * @internal
 */
export function cutToBytes(text: string, maxBytes: number): string {
  // A UTF-16 code unit takes at most 3 bytes of UTF-8 (a surrogate pair, two units, takes 4).
  if (text.length * 3 <= maxBytes) return text
  const total = Buffer.byteLength(text, 'utf8')
  if (total <= maxBytes) return text
  // The marker for all of it is the longest one the cut can need.
  const head = new Uint8Array(maxBytes - Buffer.byteLength(cutMarker(total), 'utf8'))
  // encodeInto writes whole characters only, and a lone surrogate as U+FFFD, as Buffer.byteLength counts it.
  const { written } = encoder.encodeInto(text, head)
  return decoder.decode(head.subarray(0, written)) + cutMarker(total - written)
}

/**
 * Kept text that the caller cannot be asked to change (a thrown error's message, its stack, a reason given to
 * `run.fail`), made storable in PostgreSQL's text columns and alike on SQLite: the character U+0000 and each lone
 * surrogate (half of a UTF-16 pair) become U+FFFD, the replacement character. Other text comes back as it is.
 * @internal
 */
export function storableText(text: string): string {
  const wellFormed = (text as string & { toWellFormed(): string }).toWellFormed()
  return wellFormed.includes('\u0000') ? wellFormed.replaceAll('\u0000', '\uFFFD') : wellFormed
}

function cutMarker(bytes: number): string {
  return `… [cut ${String(bytes).replace(/\B(?=(\d{3})+$)/g, ',')} bytes]`
}

/** Cuts text to one line of at most `max` characters, its runs of white space made one space; null is ''. @internal */
export function oneLine(text: string | null, max: number): string {
  if (text === null) return ''
  const flat = text.replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}
