/**
 * Unique windows (JOB-25): the `unique` option of a queue or an add, checked once, and the key it stores with each
 * job. No two jobs of a queue hold one stored key in the states of their `unique_states`: the partial unique index
 * jobs_job_unique makes that exact under racing transactions, on every database.
 */
import { describe, toMs, type Duration } from '../duration.js'
import { JobsError } from '../errors.js'
import { checkName } from '../json.js'
import { STATES, type JobState } from '../types.js'

/** The fields of a value that a unique key may name: any name where the value's type has no fields the compiler knows. */
export type UniqueField<T> = [keyof T] extends [never] ? string : keyof T & string

/**
 * `unique` on a queue or an add (JOB-25): an add whose key a job of the queue holds adds nothing, and answers that
 * job's id with `added: false, matched: 'unique'`.
 */
export interface UniqueOptions<T = unknown> {
  /**
   * What makes two jobs the same: the key itself (a string), a function of the value that answers it, or the names of
   * fields of the value, whose key is then those fields as JSON (`['userId']` makes `{"userId":42}`; a field the value
   * lacks is left out). A key is 1 to 1,024 bytes.
   */
  key: string | ((value: T) => string) | readonly UniqueField<NoInfer<T>>[]
  /**
   * The window: with `for`, a key is held only within one window of that length, windows aligned to multiples of it
   * since the epoch (`'1h'`: each hour of UTC), the job's window the one its run time falls in. Without it, a key is
   * held with no end but the holder's leaving the states below.
   */
  for?: Duration
  /**
   * The states in which a job holds its key. They include `waiting`, `scheduled` and `running`, between which a job
   * moves without being added again, and may add `done`, `failed` and `canceled`. Defaults to waiting, scheduled,
   * running and done: a job that failed or was canceled lets the key go.
   */
  states?: readonly JobState[]
}

/** A `unique` option checked: how to make a value's key, its window, and its states as `unique_states` stores them. @internal */
export interface UniqueRule {
  readonly key: (value: unknown) => string
  /** The window's length in ms, or null for none. */
  readonly forMs: number | null
  /** The states, as stored: `,waiting,scheduled,running,done,`. */
  readonly states: string
}

/** The states every unique key is held in: a job moves between them without a new add, so they cannot let it go. */
const HELD_ALWAYS: readonly JobState[] = ['waiting', 'scheduled', 'running']
const DEFAULT_STATES = ',waiting,scheduled,running,done,'
const OPTIONS = ['key', 'for', 'states']

/**
 * Checks a `unique` option (of `defineQueue` or of an add: `option` names it in errors); throws INVALID_OPTION naming
 * what is wrong. @internal
 */
export function uniqueRule(value: unknown, option: string): UniqueRule {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new JobsError('INVALID_OPTION', `${option}: expected { key, for?, states? }, got ${describe(value)}`)
  for (const name of Object.keys(value))
    if (!OPTIONS.includes(name)) throw new JobsError('INVALID_OPTION', `${option}.${name}: not an option (known: ${OPTIONS.join(', ')})`)
  const options = value as Record<string, unknown>
  if (options.key === undefined)
    throw new JobsError('INVALID_OPTION', `${option}.key: required: the key itself, a function of the value, or the names of its fields`)
  let forMs: number | null = null
  if (options.for !== undefined) {
    forMs = toMs(options.for, `${option}.for`)
    if (forMs < 1) throw new JobsError('INVALID_OPTION', `${option}.for: a window must be at least 1 ms`)
  }
  return Object.freeze({ key: keyMaker(options.key, `${option}.key`), forMs, states: storedStates(options.states, `${option}.states`) })
}

/** The stored key of a job of `value` due at `runAt`: the key, then `@` and its window's start (ISO 8601, UTC) where there is a window. @internal */
export function uniqueKeyOf(rule: UniqueRule, value: unknown, runAt: number): string {
  const key = rule.key(value)
  if (rule.forMs === null) return key
  return `${key}@${new Date(Math.floor(runAt / rule.forMs) * rule.forMs).toISOString()}`
}

function keyMaker(key: unknown, option: string): (value: unknown) => string {
  if (typeof key === 'string') {
    const fixed = checkName(key, option)
    return () => fixed
  }
  if (typeof key === 'function') return (value) => checkName(key(value), `${option} (the function's answer)`)
  if (Array.isArray(key) && key.length > 0 && key.every((field) => typeof field === 'string' && field.length > 0)) {
    const fields = [...(key as string[])]
    return (value) => {
      if (typeof value !== 'object' || value === null || Array.isArray(value))
        throw new JobsError('INVALID_OPTION', `${option}: names fields of the value, but the value is ${describe(value)}`)
      const picked: Record<string, unknown> = {}
      for (const field of fields) picked[field] = (value as Record<string, unknown>)[field]
      return checkName(JSON.stringify(picked), `${option} (the fields ${fields.join(', ')} as JSON)`)
    }
  }
  throw new JobsError(
    'INVALID_OPTION',
    `${option}: expected the key (a string), a function of the value, or the names of its fields (a non-empty array of strings), got ${describe(key)}`,
  )
}

/** The states as unique_states stores them, in the order a job meets them: `,waiting,scheduled,running,done,`. */
function storedStates(states: unknown, option: string): string {
  if (states === undefined) return DEFAULT_STATES
  if (!Array.isArray(states)) throw new JobsError('INVALID_OPTION', `${option}: expected an array of states, got ${describe(states)}`)
  for (const state of states)
    if (!STATES.includes(state))
      throw new JobsError('INVALID_OPTION', `${option}: '${String(state)}' is not a state (known: ${STATES.join(', ')})`)
  const missing = HELD_ALWAYS.filter((state) => !states.includes(state))
  if (missing.length > 0)
    throw new JobsError(
      'INVALID_OPTION',
      `${option}: must include ${missing.join(', ')}: a job moves between waiting, scheduled and running without being added again (a retry, a delay), and would meet another holder of its key on the way back`,
    )
  return `,${STATES.filter((state) => states.includes(state)).join(',')},`
}
