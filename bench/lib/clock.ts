/**
 * The benchmark's clock: CLOCK_MONOTONIC through process.hrtime, in
 * milliseconds. It is one clock for every process of the machine, so a
 * time taken in a worker process can be compared with one taken here.
 */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** Polls `condition` every `everyMs` until it holds; throws after `timeoutMs`. */
export async function waitFor(condition: () => boolean, what: string, timeoutMs = 60_000, everyMs = 5): Promise<void> {
  const deadline = nowMs() + timeoutMs
  while (!condition()) {
    if (nowMs() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(everyMs)
  }
}
