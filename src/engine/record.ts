/**
 * Recording how runs ended: the ends of one owner and one fence are written
 * by one request (Executor.jobEndMany), each with its own next state, which
 * clears the job's owner only where the fence held (the job running that
 * attempt for that owner), and drops the steps of the jobs that ended
 * (JOB-14, JOB-16). A rescue names the
 * attempt it takes and when it found the worker's lease expired, so it can
 * neither end a later attempt nor take a lease renewed since. The caller writes the counts of the ends that landed
 * (engine/counts.ts).
 */
import { ask, type Executor, type Program } from '../dialect/index.js'
import { shift, type CountShift } from '../engine/counts.js'
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
export function* jobEndMany(db: Executor, records: readonly RunEndRecord[], moved: CountShift): Program<boolean[]> {
  const landed = records.map(() => false)
  for (const group of byFence(records)) {
    const { owner, expiredBy = null } = records[group[0]!]!
    const ended = new Set(yield* ask(db.jobEndMany({ owner, expiredBy, ends: group.map((i) => records[i]!) })))
    for (const i of group) landed[i] = ended.has(records[i]!.seq)
  }
  records.forEach(({ transition }, i) => {
    if (landed[i]) shift(moved, 'running', transition.state)
  })
  return landed
}

/** The records' indexes, grouped where one end request may write them all: the same owner and the same fence. */
function byFence(records: readonly RunEndRecord[]): number[][] {
  const groups = new Map<string, number[]>()
  records.forEach(({ owner, expiredBy = null }, i) => {
    const key = `${expiredBy} ${owner}`
    const group = groups.get(key)
    if (group) group.push(i)
    else groups.set(key, [i])
  })
  return [...groups.values()]
}
