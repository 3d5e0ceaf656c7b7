/**
 * The parts of the multi-process and latency measurements that are the same
 * for every subject: starting worker processes together and watching the
 * file until they are done, and sampling pickup latency.
 */
import { nowMs, sleep } from './clock.js'
import { spawnTask, type Child } from './child.js'
import { median, quantile, randomGap } from './stats.js'
import type { PickupResult } from './tasks.js'

/** What the coordinator reads from the file, from its own connection, every few ms. */
export interface Observation {
  /** Jobs not yet ended (waiting, scheduled or running). */
  open: number
  /** Jobs in the running state now. */
  running: number
}

export interface CoordinatedRun {
  elapsedMs: number
  maxConcurrent: number
  perProcess: number[]
  capped: boolean
}

const OBSERVE_EVERY_MS = 2

/**
 * Starts `procs` worker processes (task `process-worker` of `module`), waits
 * until each has warmed up and says `ready`, sends `go` to all, and watches
 * the file until no job is open (or `capMs` passed). Each worker answers how
 * many jobs its handler ran once told to `stop`.
 */
export async function coordinateWorkers(options: {
  module: string
  procs: number
  workerArgs: object
  observe: () => Observation
  capMs?: number
}): Promise<CoordinatedRun> {
  const children: Child[] = []
  for (let i = 0; i < options.procs; i++) children.push(spawnTask(options.module, 'process-worker', options.workerArgs))
  try {
    await Promise.all(children.map((child) => child.receive('ready')))
    const t0 = nowMs()
    const deadline = options.capMs === undefined ? Number.POSITIVE_INFINITY : t0 + options.capMs
    for (const child of children) child.send({ type: 'go', deadline: Number.isFinite(deadline) ? deadline : null })
    let maxConcurrent = 0
    let capped = false
    for (;;) {
      const seen = options.observe()
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
    const answers = (await Promise.all(children.map((child) => child.result))) as Array<{ handled: number }>
    return { elapsedMs, maxConcurrent, perProcess: answers.map((answer) => answer.handled), capped }
  } finally {
    for (const child of children) if (child.process.exitCode === null) child.process.kill('SIGKILL')
  }
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
