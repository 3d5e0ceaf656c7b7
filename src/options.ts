/** The one check that an options object names only options the call knows. */
import { JobsError } from './errors.js'

/**
 * Throws INVALID_OPTION naming the first key of `options` that is not in `known`, and the known ones. `beside`
 * is a key that may sit with the options without being one (an item's `value` in enqueueMany). @internal
 */
export function checkKnownOptions(options: object, known: ReadonlySet<string>, call: string, beside?: string): void {
  for (const key of Object.keys(options)) {
    if (!known.has(key) && key !== beside)
      throw new JobsError('INVALID_OPTION', `${key}: not an option of ${call} (known: ${[...known].join(', ')})`)
  }
}
