/** Small statistics over measured samples. */

export function median(values: readonly number[]): number {
  return quantile(values, 0.5)
}

/** The q-quantile by linear interpolation between the closest ranks (q = 0.99 is p99). */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const position = (sorted.length - 1) * q
  const below = Math.floor(position)
  const above = Math.ceil(position)
  const low = sorted[below] as number
  const high = sorted[above] as number
  return low + (high - low) * (position - below)
}

/** Uniform in [0, max). */
export function randomGap(max: number): number {
  return Math.random() * max
}
