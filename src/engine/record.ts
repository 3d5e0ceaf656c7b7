/**
 * Recording how runs ended: each transition is written through one of the
 * fenced end statements (`endRun`, or `endRuns` for ends that share all
 * but their finish time and result), which clears the job's owner only
 * where the fence held (the job running that attempt for that owner); for
 * an ended job it then drops the steps (JOB-14, JOB-16). A rescue names the
 * attempt it takes and when it found the worker's lease expired, so it can
 * neither end a later attempt nor take a lease renewed since. The caller writes the counts of the ends that landed
 * (engine/counts.ts).
 */
import { ask, type Executor, type Program, type RunEndOf } from '../dialect/index.js'
import { shift, type CountShift } from '../engine/counts.js'
import { ENDED_STATES, type EndedState } from '../types.js'
import type { Transition } from './outcome.js'

export interface RunEndRecord {
  seq: number
  owner: string
  attempt: number
  transition: Transition
  /** For a rescue of an expired lease: the time (ms) by which the rescuer found it expired; a lease renewed since is not taken. */
  expiredBy?: number | null
}

/** Writes each end of runs, counting in `moved` the ones that landed; answers, per record, whether it landed (false: the lease was lost). */
export function* recordEnds(db: Executor, records: readonly RunEndRecord[], moved: CountShift): Program<boolean[]> {
  const landed = records.map(() => false)
  for (const group of alike(records)) {
    if (group.length === 1) {
      const { seq, owner, attempt, transition, expiredBy = null } = records[group[0]!]!
      landed[group[0]!] = yield* ask(db.jobSetStateIfLeased({ ...transition, seq, owner, attempt, expiredBy }))
      continue
    }
    const { owner, transition, expiredBy = null } = records[group[0]!]!
    const runs = group.map(
      (i): RunEndOf => [records[i]!.seq, records[i]!.attempt, records[i]!.transition.finishedAt, records[i]!.transition.result],
    )
    const ended = new Set((yield* ask(db.jobSetStateIfLeasedMany({ ...transition, owner, runs, expiredBy }))).map((row) => row.seq))
    for (const i of group) landed[i] = ended.has(records[i]!.seq)
  }
  const finished: number[] = []
  records.forEach(({ seq, transition }, i) => {
    if (!landed[i]) return
    if (ENDED_STATES.includes(transition.state as EndedState)) finished.push(seq)
    shift(moved, 'running', transition.state)
  })
  if (finished.length > 0) yield* ask(db.stepDeleteMany(finished))
  return landed
}

/** The records' indexes, grouped where one endRuns statement may write them all: same owner, same fence, same transition but for finish time and result. */
function alike(records: readonly RunEndRecord[]): number[][] {
  const groups = new Map<string, number[]>()
  records.forEach(({ owner, expiredBy = null, transition: t }, i) => {
    const key = JSON.stringify([owner, expiredBy, t.state, t.runAt, t.error, t.errorStack, t.refund, t.abandoned])
    const group = groups.get(key)
    if (group) group.push(i)
    else groups.set(key, [i])
  })
  return [...groups.values()]
}
