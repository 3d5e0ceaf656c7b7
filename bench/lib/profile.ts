/**
 * Summarises V8 CPU profiles (.cpuprofile, from `node --cpu-prof`): the
 * functions with the most self time, with their share. For the benchmark's
 * children: BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=prof" npm run bench -- …,
 * then `npx tsx bench/lib/profile.ts prof/*.cpuprofile`.
 */
import { readFileSync } from 'node:fs'
import { relative } from 'node:path'
import { ROOT } from './child.js'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  hitCount?: number
  children?: number[]
}

interface Profile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
  startTime: number
  endTime: number
}

export interface SelfTime {
  name: string
  ms: number
  share: number
}

/** Self time per function (name and place), most first. */
export function selfTimes(profile: Profile): SelfTime[] {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const micros = new Map<string, number>()
  let total = 0
  profile.samples.forEach((id, i) => {
    const node = byId.get(id)
    if (!node) return
    const delta = profile.timeDeltas[i + 1] ?? profile.timeDeltas[i] ?? 0
    const { functionName, url, lineNumber } = node.callFrame
    const place = url ? `${relative(ROOT, url.replace(/^file:\/\//, ''))}:${lineNumber + 1}` : ''
    const key = `${functionName || '(anonymous)'}${place ? ` ${place}` : ''}`
    micros.set(key, (micros.get(key) ?? 0) + delta)
    total += delta
  })
  return [...micros.entries()].map(([name, us]) => ({ name, ms: us / 1000, share: us / total })).sort((a, b) => b.ms - a.ms)
}

if (process.argv[1] === import.meta.filename) {
  for (const file of process.argv.slice(2)) {
    const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
    const times = selfTimes(profile)
    console.log(`\n${file}: ${((profile.endTime - profile.startTime) / 1000).toFixed(0)} ms profiled`)
    for (const time of times.slice(0, Number(process.env.TOP ?? 25))) {
      console.log(`${time.ms.toFixed(1).padStart(9)} ms ${(time.share * 100).toFixed(1).padStart(5)}%  ${time.name}`)
    }
  }
}
