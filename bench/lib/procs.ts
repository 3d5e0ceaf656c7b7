/**
 * The parts of the multi-process and latency measurements that are the same
 * for every subject: starting worker processes together and watching the
 * file until they are done, and sampling pickup latency.
 */
import { nowMs, sleep } from './clock.js'
import { spawnTask, type Child, type Ctx } from './child.js'
import { median, quantile, randomGap } from './stats.js'
import type { PickupResult } from './tasks.js'

/** What the coordinator reads from the file, from its own connection, every few ms. */
export interface Observation {
  /** Jobs not yet ended (waiting, scheduled or running). */
  open: number
  /** Jobs in the running state now. */
  running: number
}

export interface CoordinatedRun<Answer extends { handled: number } = { handled: number }> {
  elapsedMs: number
  maxConcurrent: number
  perProcess: number[]
  capped: boolean
  /** Each worker's answer, in the order they were started. */
  answers: Answer[]
}

const OBSERVE_EVERY_MS = 2

/**
 * Starts `procs` worker processes (task `task` of `module`, default
 * `process-worker`), waits until each has warmed up and says `ready` (and
 * for the `gate`), sends `go` to all, and watches the store until no job is
 * open (or `capMs` passed). Each worker answers how many jobs its handler ran (and whatever
 * else its task answers) once told to `stop`.
 */
export async function coordinateWorkers<Answer extends { handled: number } = { handled: number }>(options: {
  module: string
  procs: number
  task?: string
  workerArgs: object
  observe: () => Observation | Promise<Observation>
  capMs?: number
  /** Awaited once every worker is ready, before `go`: another run's workers may be waited for there. */
  gate?: () => Promise<void>
}): Promise<CoordinatedRun<Answer>> {
  const children: Child[] = []
  for (let i = 0; i < options.procs; i++) children.push(spawnTask(options.module, options.task ?? 'process-worker', options.workerArgs))
  try {
    await Promise.all(children.map((child) => child.receive('ready')))
    await options.gate?.()
    const t0 = nowMs()
    const deadline = options.capMs === undefined ? Number.POSITIVE_INFINITY : t0 + options.capMs
    for (const child of children) child.send({ type: 'go', deadline: Number.isFinite(deadline) ? deadline : null })
    let maxConcurrent = 0
    let capped = false
    for (;;) {
      const seen = await options.observe()
      maxConcurrent = Math.max(maxConcurrent, seen.running)
      if (seen.open === 0) break
      if (nowMs() > deadline) {
        capped = true
        break
      }
      await sleep(OBSERVE_EVERY_MS)
    }
    const elapsedMs = nowMs() - t0
    for (const child of children) child.send({ type: 'stop' })
    const answers = (await Promise.all(children.map((child) => child.result))) as Answer[]
    return { elapsedMs, maxConcurrent, perProcess: answers.map((answer) => answer.handled), capped, answers }
  } finally {
    for (const child of children) if (child.process.exitCode === null) child.process.kill('SIGKILL')
  }
}

/** A gate for a run started together with others: tells the parent this run is ready, and waits for its `go`. */
export function parentGate(ctx: Ctx): () => Promise<void> {
  return async () => {
    ctx.send({ type: 'ready' })
    await ctx.receive('go', 600_000)
  }
}

/** The most intervals ([start, end] on the shared clock) open at one moment; one ending as another starts does not overlap. */
export function maxOverlap(intervals: ReadonlyArray<readonly [number, number]>): number {
  const events = intervals.flatMap(
    ([start, end]): Array<[number, number]> => [
      [start, 1],
      [end, -1],
    ],
  )
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  let open = 0
  let most = 0
  for (const [, change] of events) {
    open += change
    most = Math.max(most, open)
  }
  return most
}

/**
 * Samples pickup latency: waits a random gap, arms `started` (which answers
 * the handler's start time on the shared monotonic clock), adds one job and
 * takes the time once its add has committed, then waits for the handler.
 */
export async function samplePickups(options: {
  samples: number
  warmup: number
  gapMaxMs: number
  add: (i: number) => void | Promise<void>
  started: () => Promise<number>
}): Promise<PickupResult> {
  const latencies: number[] = []
  for (let i = 0; i < options.warmup + options.samples; i++) {
    await sleep(randomGap(options.gapMaxMs))
    const started = options.started()
    await options.add(i)
    const committed = nowMs()
    const start = await started
    if (i >= options.warmup) latencies.push(start - committed)
  }
  return { medianMs: median(latencies), p99Ms: quantile(latencies, 0.99), samples: latencies.length }
}
