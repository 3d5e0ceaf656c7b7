import { JobsError } from './errors.js'
import { MAX_JSON_DEPTH, MAX_NAME_BYTES } from './limits.js'

/**
 * Encodes `value` as JSON text, refusing what would not come back the same
 * from `JSON.parse`: BigInt, symbols, functions, non-finite numbers, cycles,
 * array holes or undefined elements, objects that are not plain (a Date,
 * a Map, a class instance), nesting deeper than 1,000 arrays and objects, and
 * a string or key holding the character U+0000, which PostgreSQL's jsonb cannot
 * store (refused on SQLite too, so that a value is good on both or on neither).
 * `undefined` object properties are dropped, as JSON does. A top-level
 * `undefined` is refused unless `allowUndefined`, in which case it encodes as
 * `null` SQL (the function returns `null`).
 *
 * Throws INVALID_VALUE naming the path of the first bad part (or, with the
 * error as its cause, when reading the value throws: a getter, a Proxy's
 * trap), and TOO_LARGE when the text is longer than `maxBytes` of UTF-8.
 * @internal
 */
export function encodeJson(value: unknown, what: string, maxBytes: number, allowUndefined = false): string | null {
  if (value === undefined) {
    if (allowUndefined) return null
    throw new JobsError('INVALID_VALUE', `${what} is undefined; pass a JSON value (null, a number, a string, an array or a plain object)`)
  }
  let text: string
  try {
    // The walk that names the bad part, with its paths and cycle set, runs only for a value the quick one refused.
    if (!isPlainJson(value, 1)) checkJson(value, what, new Set(), 1)
    text = JSON.stringify(value)
  } catch (error) {
    if (error instanceof JobsError) throw error
    throw new JobsError(
      'INVALID_VALUE',
      `${what} could not be read as JSON: reading it threw ${(error as Error)?.message ?? String(error)}`,
      { cause: error },
    )
  }
  if (text.length > maxBytes / 3 && Buffer.byteLength(text, 'utf8') > maxBytes) {
    throw new JobsError('TOO_LARGE', `${what} is ${Buffer.byteLength(text, 'utf8')} bytes of JSON; the limit is ${maxBytes}`)
  }
  return text
}

/**
 * Whether checkJson would pass `value`, answered without building a path for each part or keeping a set of
 * the objects on the way: a cycle fails here by its depth, and checkJson then names it.
 */
function isPlainJson(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case 'string':
      return storable(value)
    case 'boolean':
      return true
    case 'number':
      return Number.isFinite(value)
    case 'object': {
      if (value === null) return true
      if (depth > MAX_JSON_DEPTH) return false
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          if (!(i in value) || value[i] === undefined || !isPlainJson(value[i], depth + 1)) return false
        }
        return true
      }
      const proto = Object.getPrototypeOf(value)
      if (proto !== Object.prototype && proto !== null) return false
      for (const key of Object.keys(value)) {
        if (!storable(key)) return false
        const item = (value as Record<string, unknown>)[key]
        if (item !== undefined && !isPlainJson(item, depth + 1)) return false
      }
      return true
    }
    default:
      return false
  }
}

function checkJson(value: unknown, path: string, seen: Set<object>, depth: number): void {
  switch (typeof value) {
    case 'string':
      if (!storable(value)) throw bad(path, `a string holding ${unstorable(value)}, which PostgreSQL's jsonb cannot store`)
      return
    case 'boolean':
      return
    case 'number':
      if (!Number.isFinite(value)) throw bad(path, `the number ${value}, which JSON cannot hold`)
      return
    case 'object': {
      if (value === null) return
      if (seen.has(value)) throw bad(path, 'a cycle')
      if (depth > MAX_JSON_DEPTH)
        throw bad(path.length > 80 ? `${path.slice(0, 79)}…` : path, `nested deeper than ${MAX_JSON_DEPTH} arrays and objects`)
      seen.add(value)
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          if (!(i in value) || value[i] === undefined) throw bad(`${path}[${i}]`, 'undefined, which JSON turns into null')
          checkJson(value[i], `${path}[${i}]`, seen, depth + 1)
        }
      } else {
        const proto = Object.getPrototypeOf(value)
        if (proto !== Object.prototype && proto !== null) {
          const kind = (value as object).constructor?.name ?? 'object'
          throw bad(path, `a ${kind}, which does not come back from JSON the same (a Date: pass getTime() or toISOString())`)
        }
        for (const key of Object.keys(value)) {
          if (!storable(key))
            throw bad(
              path,
              `an object with a key holding ${unstorable(key)} (${JSON.stringify(key.slice(0, 40))}), which PostgreSQL's jsonb cannot store`,
            )
          const item = (value as Record<string, unknown>)[key]
          if (item !== undefined) checkJson(item, `${path}.${key}`, seen, depth + 1)
        }
      }
      seen.delete(value)
      return
    }
    default:
      throw bad(path, `a ${typeof value}, which JSON cannot hold`)
  }
}

/** Whether PostgreSQL can store `text` in text and jsonb: no U+0000, no lone surrogate. */
function storable(text: string): boolean {
  return !text.includes('\u0000') && (text as string & { isWellFormed(): boolean }).isWellFormed()
}

/** What makes `text` unstorable, and where: the character U+0000, or a lone surrogate. */
function unstorable(text: string): string {
  const nul = text.indexOf('\u0000')
  if (nul >= 0) return `the character U+0000 (at index ${nul})`
  const lone = text.search(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/)
  return `a lone surrogate (U+${text.charCodeAt(lone).toString(16).toUpperCase()} at index ${lone}, half of a UTF-16 pair)`
}

function bad(path: string, what: string): JobsError {
  return new JobsError('INVALID_VALUE', `${path} is ${what}`)
}

/**
 * Checks a name-like string (a queue name, an id, a group, a step name):
 * INVALID_OPTION when it is not a non-empty, well-formed string, TOO_LARGE past 1,024 bytes.
 * @internal
 */
export function checkName(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new JobsError('INVALID_OPTION', `${what} must be a non-empty string, got ${value === '' ? 'an empty string' : typeof value}`)
  }
  if (!(value as string & { isWellFormed(): boolean }).isWellFormed()) {
    throw new JobsError(
      'INVALID_OPTION',
      `${what} holds a lone surrogate (half of a UTF-16 pair), which neither SQLite nor PostgreSQL stores as text`,
    )
  }
  if (value.length > MAX_NAME_BYTES / 3 && Buffer.byteLength(value, 'utf8') > MAX_NAME_BYTES) {
    throw new JobsError('TOO_LARGE', `${what} is ${Buffer.byteLength(value, 'utf8')} bytes; the limit is ${MAX_NAME_BYTES}`)
  }
  if (value.includes('\u0000'))
    throw new JobsError('INVALID_OPTION', `${what} holds the character U+0000, which PostgreSQL cannot store as text`)
  return value
}
