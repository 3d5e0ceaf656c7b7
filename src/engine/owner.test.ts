import { spawnSync } from 'node:child_process'
import { describe, expect, test } from 'vitest'
import { isOwnerGone, isOwnOwner, newOwner } from './owner.js'

/** An owner as another copy of this module in this process (a worker thread, a second copy of the package) names itself. */
function otherCopysOwner(own: string): string {
  const [host, pid, startTime] = own.split('/')
  return `${host}/${pid}/${startTime}/0123456789ab/1`
}

describe('JOB-05 whose process is gone', () => {
  test('a worker of another copy of the package in this process, or of a worker thread, is alive: same pid and start time, another token', () => {
    const other = otherCopysOwner(newOwner())
    expect(isOwnOwner(other)).toBe(false)
    expect(isOwnerGone(other)).toBe(false)
  })

  test("a process that ran under this process's pid but started at another time is gone (the pid was reused)", () => {
    const [host, pid, startTime, token] = newOwner().split('/')
    if (startTime === '') return expect(isOwnerGone(`${host}/${pid}//${token}/1`)).toBe(false)
    expect(isOwnerGone(`${host}/${pid}/${Number(startTime) - 1}/${token}/1`)).toBe(true)
  })

  test('a process of this host that exited is gone; one of another host, or a name that is not an owner, never is', () => {
    const exited = spawnSync(process.execPath, ['-e', '']).pid
    const [host, , startTime, token] = newOwner().split('/')
    expect(isOwnerGone(`${host}/${exited}/${startTime}/${token}/1`)).toBe(true)
    expect(isOwnerGone(`another-host/${exited}/${startTime}/${token}/1`)).toBe(false)
    expect(isOwnerGone('dead')).toBe(false)
  })
})
