/**
 * One run's pipeline, the same for a worker and for `drain`: parse the job's
 * value, arm the run's timeout, call the handler, and turn how it ended into
 * the job's next state (outcome.ts). The executor owns the timeout: a run
 * that passed it ends as a timed-out attempt whatever the handler did after.
 */
import type { QueueDefinition } from './definition.js'
import { parseStoredValue } from '../stored.js'
import { timeoutError, transitionFor, type RunEnd, type Transition } from './outcome.js'
import type { Run, RunContext } from './run.js'
import { runEnded, runStarted } from '../telemetry/metrics.js'
import { runOutcome, startProcess } from '../telemetry/trace.js'

/** What the executor calls: a handler with its value type erased. @internal */
export type RunHandler = (value: unknown, run: Run) => unknown

/**
 * Runs `handler` for `run`, whose job's value is stored as `storedValue` (JSON text, unless another program wrote it), under the queue's timeout.
 * Answers the job's next state, or null when the run lost its lease: nothing it would write lands.
 * @internal
 */
export async function execute(
  queue: QueueDefinition,
  run: RunContext,
  storedValue: unknown,
  handler: RunHandler,
  clock: () => number,
): Promise<Transition | null> {
  const started = performance.now()
  runStarted(queue.name, run.runAt, clock())
  const span = startProcess({ queue: queue.name, id: run.id, attempt: run.attempt, traceContext: run.traceContext })
  run.trace = span
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    run.abort(timeoutError(queue.timeoutMs))
  }, queue.timeoutMs)
  let end: RunEnd
  try {
    const value = parseStoredValue(storedValue)
    const broken = value.ok ? attemptsBeyondMax(run) : value.error
    if (value.ok && broken === null) {
      // The handler runs in its run's span, so that its own spans are the run's children.
      const call = () => handler(value.value, run)
      end = await ended(run, span ? span.within(call) : call())
    } else end = { kind: 'returned', value: run.fail(broken ?? '') }
  } catch (error) {
    end = { kind: 'threw', error }
  }
  clearTimeout(timer)
  run.onPark = null
  if (run.parked !== null) end = { kind: 'parked', park: run.parked }
  else if (timedOut) end = { kind: 'threw', error: timeoutError(queue.timeoutMs) }
  const transition = run.lost ? null : transitionFor(queue, { attempt: run.attempt, maxAttempts: run.attempts }, end, clock())
  span?.end(transition)
  runEnded(queue.name, runOutcome(transition), performance.now() - started)
  return transition
}

/**
 * How a handler's call ended: with what it returned (a promise's value), or as its run parked (a sleep, a wait for an
 * event), whose call never answers; a throw or a rejection rejects.
 */
function ended(run: RunContext, returned: unknown): RunEnd | Promise<RunEnd> {
  if (!isThenable(returned)) return { kind: 'returned', value: returned }
  if (run.parked !== null) return { kind: 'parked', park: run.parked }
  return new Promise<RunEnd>((resolve, reject) => {
    run.onPark = (park) => resolve({ kind: 'parked', park })
    returned.then((value) => resolve({ kind: 'returned', value }), reject)
  })
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function'
}

/**
 * Why a claimed job must fail without running, when its row counted more attempts than it was given before this
 * claim (another program wrote it so; the engine never does): the column and its value, as the table protocol's
 * other rules say it. Null for every job the engine wrote.
 */
function attemptsBeyondMax(run: RunContext): string | null {
  const counted = run.attempt - 1
  if (counted <= run.attempts) return null
  return `attempts holds ${counted}, not a count of runs within max_attempts (${run.attempts}): the row breaks the table protocol`
}
