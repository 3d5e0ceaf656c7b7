/**
 * Recording how runs ended: each transition is written through the one
 * fenced `endRun` statement, and only when the lease still held does it
 * drop the lease and, for an ended job, its steps (JOB-14, JOB-16). The
 * ends that landed are counted in one write to the queue's counters.
 * @internal
 */
import type { Connection } from '../connection.js'
import { noShift, shift, writeShift } from '../queue/counts.js'
import { ENDED_STATES, type EndedState } from '../types.js'
import type { Transition } from './outcome.js'

export interface RunEndRecord {
  seq: number
  owner: string
  attempt: number
  transition: Transition
}

/** Writes each end of runs of `queue`, and counts them; answers, per record, whether it landed (false: the lease was lost). */
export function recordEnds(connection: Connection, queue: string, records: readonly RunEndRecord[]): boolean[] {
  const { sql } = connection
  const counts = noShift()
  const landed = records.map(({ seq, owner, attempt, transition }) => {
    const changed = sql.endRun.run({ ...transition, seq, owner, attempt }).changes === 1
    if (changed) {
      sql.deleteLease.run(seq)
      if (ENDED_STATES.includes(transition.state as EndedState)) sql.deleteSteps.run(seq)
      shift(counts, 'running', transition.state)
    }
    return changed
  })
  writeShift(connection, queue, counts)
  return landed
}
