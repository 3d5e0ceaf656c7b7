/**
 * The trace id of a job's stored trace context, for the readers that show it (`inspectJob`, the dashboard, the
 * command-line tool). Pure: it reads the stored JSON text itself and never loads `@opentelemetry/api`.
 */

/**
 * A traceparent as W3C Trace Context (level 1) writes it, in lowercase hex: version, trace id, parent id, flags, and,
 * in a later version than 00, fields after them.
 */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?$/

/**
 * traceIdOf answers the trace id of the traceparent in `stored`, the value of `jobs_job.trace_context` (a JSON
 * object of W3C trace context fields, as `send {queue}` stores it: telemetry/trace.ts), or null where there is none.
 *
 * Another program may store anything in the column, so anything that is not such an object holding a valid
 * traceparent answers null, never an error: not a string, not JSON, no traceparent, version `ff`, extra fields after
 * version 00, uppercase hex, a trace id or parent id of zeros.
 *
 * @example
 * traceIdOf('{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}')
 * // '4bf92f3577b34da6a3ce929d0e0e4736'
 */
export function traceIdOf(stored: unknown): string | null {
  const carrier = storedCarrier(stored)
  if (carrier === null) return null
  const traceparent = carrier.traceparent
  if (typeof traceparent !== 'string') return null
  const match = TRACEPARENT.exec(traceparent)
  if (match === null) return null
  const [, version, traceId, parentId, rest] = match
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null
  if (/^0+$/.test(traceId!) || /^0+$/.test(parentId!)) return null
  return traceId!
}

/**
 * The carrier of a stored trace context: `jobs_job.trace_context` read as the JSON object of W3C trace context
 * fields a propagator extracts from, or null where it is not such an object (another program may store anything).
 */
export function storedCarrier(stored: unknown): Record<string, unknown> | null {
  if (typeof stored !== 'string') return null
  let carrier: unknown
  try {
    carrier = JSON.parse(stored)
  } catch {
    return null
  }
  return typeof carrier === 'object' && carrier !== null ? (carrier as Record<string, unknown>) : null
}
