/**
 * Batch handlers (`work(db, queue, handler, { batch: { size, wait } })`): the worker's runs are gathered into batches
 * of up to `size`, waiting at most `wait` for a batch to fill, and the handler is called once per batch. Each job is
 * still a run of its own, through the one executor: its lease, its timeout, its attempt and its outcome; the queue's
 * limits count each job. What this module adds is the gathering: a run's handler is a call that joins the batch
 * under way, and answers its own element of what the batch's call returned.
 */
import { describe, toMs, type Duration } from '../duration.js'
import { JobsError } from '../errors.js'
import type { Outcome } from '../engine/outcome.js'
import type { Run, RunContext } from '../engine/run.js'
import type { Json } from '../types.js'

/** The options of a batch handler. */
export interface BatchOptions {
  /** The most jobs a call of the handler gets: 1 to 1,000. The worker's `slots` default to it. */
  size: number
  /** How long a batch waits to fill after its first job, before the handler is called with fewer. Defaults to `'20ms'`. */
  wait?: Duration
}

/** One job of a batch: its value and its run. */
export interface BatchJob<T> {
  value: T
  run: Run
}

/**
 * A batch handler: given up to `size` jobs, answers one result or outcome (`job.run.fail(…)`, `retry`, `snooze`) per
 * job, in the order given, at once or as a promise. A throw fails every job's attempt.
 */
export type BatchHandler<T, R = Json> = (jobs: BatchJob<T>[]) => BatchAnswer<R> | Promise<BatchAnswer<R>>

/** What a batch handler answers: one result or outcome per job. */
export type BatchAnswer<R> = ReadonlyArray<(Json extends R ? Json | void : R) | Outcome>

/** The largest batch. */
export const MAX_BATCH_SIZE = 1_000
const DEFAULT_BATCH_WAIT_MS = 20

/** A batch's settings, checked. */
export interface BatchSettings {
  size: number
  waitMs: number
}

/** Checks a `batch` option; throws INVALID_OPTION naming what is wrong. */
export function batchSettings(batch: unknown): BatchSettings {
  if (typeof batch !== 'object' || batch === null || Array.isArray(batch))
    throw new JobsError('INVALID_OPTION', `batch: expected { size, wait? }, got ${describe(batch)}`)
  const { size, wait, ...rest } = batch as { size?: unknown; wait?: unknown }
  const unknown = Object.keys(rest)
  if (unknown.length > 0) throw new JobsError('INVALID_OPTION', `batch: unknown option '${unknown[0]}' (known: size, wait)`)
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 1 || size > MAX_BATCH_SIZE)
    throw new JobsError('INVALID_OPTION', `batch.size: expected a whole number from 1 to ${MAX_BATCH_SIZE}, got ${describe(size)}`)
  const waitMs = wait === undefined ? DEFAULT_BATCH_WAIT_MS : toMs(wait as Duration, 'batch.wait')
  return { size, waitMs }
}

interface Pending {
  job: BatchJob<unknown>
  resolve: (answer: unknown) => void
  reject: (error: unknown) => void
}

/**
 * The per-run handler that gathers runs into batches for `handler`: a batch is called once it holds `size` runs, or
 * `waitMs` after its first run joined, whichever comes first.
 */
export function batched(handler: BatchHandler<unknown, unknown>, { size, waitMs }: BatchSettings) {
  let gathering: Pending[] = []
  let timer: NodeJS.Timeout | null = null

  const call = () => {
    if (timer !== null) clearTimeout(timer)
    timer = null
    const batch = gathering
    gathering = []
    let answer: unknown
    try {
      answer = handler(batch.map((pending) => pending.job))
    } catch (error) {
      for (const pending of batch) pending.reject(error)
      return
    }
    Promise.resolve(answer).then(
      (answers) => {
        if (!Array.isArray(answers) || answers.length !== batch.length) {
          const error = new JobsError(
            'INVALID_VALUE',
            `the batch handler answered ${Array.isArray(answers) ? `${answers.length} answers` : describe(answers)} for ${batch.length} jobs: it must answer an array of one result or outcome per job, in order`,
          )
          for (const pending of batch) pending.reject(error)
          return
        }
        for (const [i, pending] of batch.entries()) pending.resolve(answers[i])
      },
      (error: unknown) => {
        for (const pending of batch) pending.reject(error)
      },
    )
  }

  return (value: unknown, run: Run): Promise<unknown> =>
    new Promise((resolve, reject) => {
      // A run of a batch cannot park: the batch's call would wait for it for ever, and the other jobs with it.
      ;(run as RunContext).parkable = false
      gathering.push({ job: { value, run }, resolve, reject })
      if (gathering.length >= size) call()
      else if (timer === null) timer = setTimeout(call, waitMs)
    })
}
