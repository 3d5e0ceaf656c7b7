/**
 * JOB-21 across processes, once per dialect: four worker processes race for the slots of one schedule that
 * fires every second, for 30 s. Each slot makes exactly one job, and none is missing between the first and
 * the last. The schedule has a backfill of a minute, so that a slot all four processes were too busy to
 * add within its second (a loaded machine) is added late, not skipped: what is tested is that racing
 * processes add each slot once. The race ends once 30 slots are in, not after 30 s by the wall clock, which
 * a loaded machine may leave with the last slots still to add.
 */
import { describe, expect, test } from 'vitest'
import { PROCESS_DATABASES, eachContractDb } from '../helpers/dialects.js'
import { STARTUP_MS, started, startFixture } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

const RACE_MS = 30_000

describe.each(PROCESS_DATABASES)('%s', (dialect) => {
  const { t } = eachContractDb(dialect)
  const on = `[${dialect}]`

  test(
    `JOB-21 ${on} four worker processes and a schedule every second for 30 s: each slot has exactly one job, none missing between the first and the last`,
    async () => {
      const children = Array.from({ length: 4 }, () => startFixture('schedule-child.ts', [t.address]))
      await started(children, 'working', 'the four worker processes to start')
      await waitFor(
        async () =>
          Number((await t.query<{ n: number | string }>(`select count(*) as n from jobs_job where queue = 'ticks'`))[0]!.n) >=
          RACE_MS / 1_000,
        `the jobs of ${RACE_MS / 1_000} slots`,
        RACE_MS + 60_000,
      )
      for (const child of children) child.process.kill('SIGKILL')
      await Promise.all(children.map((child) => child.exited))

      const ids = (await t.query<{ id: string }>(`select id from jobs_job where queue = 'ticks'`)).map((row) => row.id)
      expect(await t.query('select 1 from jobs_schedule')).toHaveLength(1)
      const slots = ids
        .map((id) => {
          expect(id).toMatch(/^every-second@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/)
          return Date.parse(id.slice('every-second@'.length))
        })
        .sort((a, b) => a - b)
      expect(new Set(slots).size).toBe(slots.length)
      expect(slots.length).toBeGreaterThan(RACE_MS / 1_000 - 5)
      const missing = []
      for (let i = 1; i < slots.length; i++)
        if (slots[i]! - slots[i - 1]! !== 1_000) missing.push(new Date(slots[i - 1]! + 1_000).toISOString())
      expect(missing).toEqual([])
    },
    STARTUP_MS + RACE_MS + 90_000,
  )
})
