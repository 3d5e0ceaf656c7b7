/** The one check that an options object names only options the call knows. */
import { JobsError } from './errors.js'

/** Throws INVALID_OPTION naming the first key of `options` that is not in `known`, and the known ones. @internal */
export function checkKnownOptions(options: object, known: ReadonlySet<string>, call: string): void {
  for (const key of Object.keys(options)) {
    if (!known.has(key)) throw new JobsError('INVALID_OPTION', `${key}: not an option of ${call} (known: ${[...known].join(', ')})`)
  }
}
