/**
 * JOB-21, once per dialect: a schedule is an upsert that writes nothing when called again alike; a worker
 * adds the job of each due slot once, with the id `name@slot`; after downtime (a worker whose clock is moved
 * forward) missed slots follow `backfill`; bad input writes nothing. The days the clocks change are tested on
 * the slot arithmetic itself, which both dialects share.
 */
import { describe, expect, test } from 'vitest'
import { defineQueue, enqueue, isJobsError, listSchedules, schedule, unschedule, work } from '../../src/index.js'
import { drain, runSchedule } from '../../src/testing/index.js'
import { dueSlots, slotRule } from '../../src/engine/slots.js'
import { addSlotJobs, planSlots, runSchedulePass } from '../../src/engine/schedules.js'
import { connectionOf } from '../../src/dialect/open.js'
import { MAX_BACKFILL_SLOTS } from '../../src/limits.js'
import { CONTRACT_DATABASES, CONTRACT_TEST_MS, eachContractDb } from '../helpers/dialects.js'
import { cpuWait, serverPids } from '../helpers/load.js'
import { waitFor } from '../helpers/wait.js'

const HOUR = 3_600_000

describe.each(CONTRACT_DATABASES)('%s', { timeout: CONTRACT_TEST_MS }, (dialect) => {
  const { t, workers } = eachContractDb(dialect)
  const on = `[${dialect}]`

  const jobIds = async (queue: string) =>
    (await t.query<{ id: string }>('select id from jobs_job where queue = $1 order by seq', queue)).map((row) => row.id)
  const scheduleCount = async () => Number((await t.query<{ n: number | string }>('select count(*) as n from jobs_schedule'))[0]!.n)

  test(`JOB-21 ${on} schedule is an upsert: called again with the same arguments it changes nothing, not even updated_at or next_at`, async () => {
    const digests = defineQueue<{ kind: string }>('digests')
    const options = { cron: '0 8 * * *', tz: 'Europe/Paris', value: { kind: 'daily' } }
    expect(await schedule(t.db, digests, 'daily-digest', options)).toBe(true)
    const [first] = await listSchedules(t.db, digests)
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(await schedule(t.db, digests, 'daily-digest', { ...options, value: { kind: 'daily' } })).toBe(false)
    const [again] = await listSchedules(t.db, digests)
    expect(again).toEqual(first)
    expect(first).toMatchObject({
      queue: 'digests',
      name: 'daily-digest',
      cron: '0 8 * * *',
      tz: 'Europe/Paris',
      value: { kind: 'daily' },
      backfill: null,
      lastSlot: null,
      lastJob: null,
    })
    expect(first!.nextAt.getTime()).toBe(slotRule('0 8 * * *', 'Europe/Paris').next(first!.updatedAt.getTime()))
    expect(await scheduleCount()).toBe(1)
  })

  test(`JOB-21 ${on} new arguments replace the schedule and recompute its next slot`, async () => {
    const digests = defineQueue<{ kind: string }>('digests')
    await schedule(t.db, digests, 'digest', { cron: '0 8 * * *', value: { kind: 'daily' } })
    const [before] = await listSchedules(t.db)
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(
      await schedule(t.db, digests, 'digest', { cron: '30 9 * * 1', tz: 'America/New_York', value: { kind: 'weekly' }, backfill: '6h' }),
    ).toBe(true)
    const [after] = await listSchedules(t.db)
    expect(after).toMatchObject({ cron: '30 9 * * 1', tz: 'America/New_York', value: { kind: 'weekly' }, backfill: 6 * HOUR })
    expect(after!.updatedAt.getTime()).toBeGreaterThan(before!.updatedAt.getTime())
    expect(after!.nextAt.getTime()).toBe(slotRule('30 9 * * 1', 'America/New_York').next(after!.updatedAt.getTime()))
    // A value alone changing is a change too.
    expect(
      await schedule(t.db, digests, 'digest', { cron: '30 9 * * 1', tz: 'America/New_York', value: { kind: 'other' }, backfill: '6h' }),
    ).toBe(true)
    expect(await scheduleCount()).toBe(1)
  })

  test(`JOB-21 ${on} unschedule removes a schedule and answers whether it removed one`, async () => {
    const digests = defineQueue('digests')
    await schedule(t.db, digests, 'a', { cron: '0 8 * * *', value: null })
    await schedule(t.db, digests, 'b', { cron: '0 9 * * *', value: null })
    expect(await unschedule(t.db, digests, 'a')).toBe(true)
    expect(await unschedule(t.db, 'digests', 'a')).toBe(false)
    expect((await listSchedules(t.db)).map((s) => s.name)).toEqual(['b'])
  })

  test(`JOB-21 ${on} a bad expression, zone, backfill, name or value throws naming it and writes nothing`, async () => {
    const digests = defineQueue('digests')
    const refused = async (call: () => unknown, code: string, names: string) => {
      let error: unknown
      try {
        await call()
      } catch (thrown) {
        error = thrown
      }
      expect(isJobsError(error, code as never), String(error)).toBe(true)
      expect((error as Error).message).toContain(names)
    }
    await refused(() => schedule(t.db, digests, 'x', { cron: 'every day', value: null }), 'INVALID_OPTION', "'every day'")
    await refused(() => schedule(t.db, digests, 'x', { cron: '61 * * * *', value: null }), 'INVALID_OPTION', "'61 * * * *'")
    await refused(() => schedule(t.db, digests, 'x', { cron: '0 0 0 1 1 * 2020', value: null }), 'INVALID_OPTION', 'cron')
    await refused(() => schedule(t.db, digests, 'x', { cron: '0 0 30 2 *', value: null }), 'INVALID_OPTION', "'0 0 30 2 *'")
    await refused(
      () => schedule(t.db, digests, 'x', { cron: '0 8 * * *', tz: 'Mars/Olympus', value: null }),
      'INVALID_OPTION',
      "'Mars/Olympus'",
    )
    await refused(
      () => schedule(t.db, digests, 'x', { cron: '0 8 * * *', value: null, backfill: 'soon' as never }),
      'INVALID_OPTION',
      'backfill',
    )
    await refused(() => schedule(t.db, digests, 'x', { cron: '0 8 * * *', value: null, every: 1 } as never), 'INVALID_OPTION', 'every')
    await refused(() => schedule(t.db, digests, 'x', { cron: '0 8 * * *', value: 10n as never }), 'INVALID_VALUE', 'value')
    await refused(() => schedule(t.db, digests, '', { cron: '0 8 * * *', value: null }), 'INVALID_OPTION', 'schedule name')
    await refused(() => schedule(t.db, digests, 'n'.repeat(1_000), { cron: '0 8 * * *', value: null }), 'TOO_LARGE', 'schedule name')
    expect(await scheduleCount()).toBe(0)
  })

  test(`JOB-21 ${on} a worker adds the job of each due slot once, within moments, with the id name@slot`, async () => {
    const ticks = defineQueue<{ n: number }>('ticks')
    // A backfill of a minute: a slot the loaded machine keeps the worker from adding within its second is added late, not skipped.
    await schedule(t.db, ticks, 'second', { cron: '* * * * * *', value: { n: 1 }, backfill: '1m' })
    const values: unknown[] = []
    const load = cpuWait([process.pid, ...(dialect === 'postgres' ? await serverPids((sql) => t.query(sql)) : [])], { everyMs: 20 })
    workers.push(work(t.db, ticks, (value) => void values.push(value)))
    const ids = await waitFor(async () => {
      const ids = await jobIds('ticks')
      return ids.length >= 4 && ids
    }, 'four slots')
    const slots = ids.map((id) => Date.parse(id.slice('second@'.length)))
    for (const [i, id] of ids.entries()) expect(id).toBe(`second@${new Date(slots[i]!).toISOString()}`)
    for (let i = 1; i < slots.length; i++) expect(slots[i]! - slots[i - 1]!).toBe(1_000)
    // Within moments: the timer armed for the next slot adds its job as it falls due, not on the next tick. The
    // time this process (and the server's) waited for a CPU between a slot and its job's add is the machine's load,
    // not the timer's: it is not counted.
    load.stop()
    const created = await t.query<{ id: string; createdAt: number | Date }>(
      t.dialect === 'postgres'
        ? `select id, created_at as "createdAt" from jobs_job where queue = 'ticks'`
        : `select id, created_at as createdAt from jobs_job where queue = 'ticks'`,
    )
    const delays = created
      .filter((row) => row.id !== ids[0])
      .map((row) => {
        const slot = Date.parse(row.id.slice('second@'.length))
        const added = new Date(row.createdAt).getTime()
        return added - slot - load.between(slot, added)
      })
      .sort((a, b) => a - b)
    expect(delays[Math.floor(delays.length / 2)], `each job's add after its slot, less the wait for a CPU: ${delays}`).toBeLessThan(900)
    await waitFor(() => values.length >= 3, 'the jobs to run')
    expect(values[0]).toEqual({ n: 1 })
  })

  test(`JOB-21 ${on} after downtime with backfill unset, only the latest missed slot is added`, async () => {
    const hourly = defineQueue('hourly')
    await schedule(t.db, hourly, 'hourly', { cron: '0 * * * *', value: null })
    const later = Date.now() + 10 * HOUR
    const clock = () => Date.now() + 10 * HOUR
    workers.push(work(t.db, hourly, () => {}, { clock }))
    await waitFor(async () => (await listSchedules(t.db))[0]!.lastSlot !== null, 'the pass')
    const latest = slotRule('0 * * * *', 'UTC').previous(1, later + 1)[0]!
    // A few more passes: still only the one.
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect(await jobIds('hourly')).toEqual([`hourly@${new Date(latest).toISOString()}`])
    const [info] = await listSchedules(t.db)
    expect(info!.lastSlot!.getTime()).toBe(latest)
    expect(info!.nextAt.getTime()).toBe(latest + HOUR)
  })

  test(`JOB-21 ${on} after downtime with backfill 6h, every missed slot within six hours is added, oldest first`, async () => {
    const hourly = defineQueue('hourly')
    await schedule(t.db, hourly, 'hourly', { cron: '0 * * * *', value: null, backfill: '6h' })
    const clock = () => Date.now() + 10 * HOUR
    const started = clock()
    workers.push(work(t.db, hourly, () => {}, { clock }))
    await waitFor(async () => (await listSchedules(t.db))[0]!.lastSlot !== null, 'the pass')
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    const ids = await jobIds('hourly')
    const slots = ids.map((id) => Date.parse(id.slice('hourly@'.length)))
    const latest = slotRule('0 * * * *', 'UTC').previous(1, started + 1)[0]!
    expect(slots.at(-1)).toBe(latest)
    expect(slots.length).toBe(6)
    for (let i = 1; i < slots.length; i++) expect(slots[i]! - slots[i - 1]!).toBe(HOUR)
    expect(slots[0]!).toBeGreaterThanOrEqual(started - 6 * HOUR)
  })

  test(`JOB-21 ${on} the compare-and-set on next_at: of passes that read the same due schedule at once, one adds the slot's job and moves next_at once`, async () => {
    const hourly = defineQueue('hourly')
    await schedule(t.db, hourly, 'hourly', { cron: '0 * * * *', value: { n: 1 }, backfill: '3h' })
    const connection = connectionOf(t.db)
    const now = Date.now() + 5 * HOUR
    const rows = await connection.executor.scheduleListDue({ queue: 'hourly', now, limit: 10 })
    expect(rows).toHaveLength(1)
    const { plans } = planSlots(rows, now)
    expect(plans[0]!.due.slots.length).toBe(3)
    // Four passes at once (on PostgreSQL, four transactions of the pool side by side; on SQLite one after another).
    const passes = await Promise.all(Array.from({ length: 4 }, () => connection.write((db) => addSlotJobs(db, hourly, plans, now))))
    expect(passes.map((added) => added.length).sort()).toEqual([0, 0, 0, 3])
    expect(await jobIds('hourly')).toEqual(passes.find((added) => added.length > 0))
    const [info] = await listSchedules(t.db)
    expect(info!.nextAt.getTime()).toBe(plans[0]!.due.nextAt)
    expect(info!.lastSlot!.getTime()).toBe(plans[0]!.due.slots.at(-1))
    // The schedule replaced meanwhile: a pass that read the old one adds nothing.
    await schedule(t.db, hourly, 'other', { cron: '0 * * * *', value: null })
    const [stale] = await connection.executor.scheduleListDue({ queue: 'hourly', now, limit: 10 })
    await schedule(t.db, hourly, 'other', { cron: '30 * * * *', value: null })
    expect(await connection.write((db) => addSlotJobs(db, hourly, planSlots([stale!], now).plans, now))).toEqual([])
  })

  test(`JOB-21 ${on} passes through both clock changes of Europe/Paris and America/New_York add one job per slot of a step, a list or a range in the hour that changes: none lost, none twice`, async () => {
    const connection = connectionOf(t.db)
    const at = t.dialect === 'postgres' ? 'to_timestamp($1::float8 / 1000)' : '$1'
    const cases = [
      // 02:00 to 03:00 does not exist: each time moved on by the hour.
      {
        tz: 'Europe/Paris',
        cron: '*/20 2 * * *',
        from: '2026-03-28T23:00:00Z',
        to: '2026-03-29T03:00:00Z',
        slots: ['01:00', '01:20', '01:40'],
      },
      // 02:00 to 03:00 occurs twice: 02:00 once, at its first occurrence, then 03:00.
      { tz: 'Europe/Paris', cron: '0 2-3 * * *', from: '2026-10-24T23:00:00Z', to: '2026-10-25T03:00:00Z', slots: ['00:00', '02:00'] },
      { tz: 'America/New_York', cron: '0,30 2 * * *', from: '2026-03-08T05:00:00Z', to: '2026-03-08T09:00:00Z', slots: ['07:00', '07:30'] },
      // 01:00 to 02:00 occurs twice.
      {
        tz: 'America/New_York',
        cron: '*/20 1 * * *',
        from: '2026-11-01T04:00:00Z',
        to: '2026-11-01T08:00:00Z',
        slots: ['05:00', '05:20', '05:40'],
      },
    ]
    for (const [n, { tz, cron, from, to, slots }] of cases.entries()) {
      const queue = defineQueue(`dst-${n}`)
      await schedule(t.db, queue, 'dst', { cron, tz, value: null })
      await t.run(`update jobs_schedule set next_at = ${at} where queue = $2`, slotRule(cron, tz).next(Date.parse(from)), queue.name)
      // A pass every five minutes through the change, as a worker's timer makes them.
      for (let now = Date.parse(from); now <= Date.parse(to); now += 5 * 60_000) await runSchedulePass(connection, queue, now)
      expect(await jobIds(queue.name), `${cron} in ${tz}`).toEqual(slots.map((time) => `dst@${to.slice(0, 10)}T${time}:00.000Z`))
    }
  })

  test(`JOB-18 ${on} JOB-21 a schedule another program stored with a cron that does not parse is reported once and left as it is; the others go on`, async () => {
    const ticks = defineQueue('ticks')
    await schedule(t.db, ticks, 'good', { cron: '* * * * * *', value: null })
    const at = t.dialect === 'postgres' ? 'to_timestamp($1::float8 / 1000)' : '$1'
    await t.run(
      `insert into jobs_schedule (queue, name, cron, next_at) values ('ticks', 'broken', 'not a cron', ${at})`,
      Date.now() - 1_000,
    )
    const errors: unknown[] = []
    workers.push(work(t.db, ticks, () => {}, { onError: (error) => errors.push(error) }))
    await waitFor(async () => (await jobIds('ticks')).filter((id) => id.startsWith('good@')).length >= 3, 'the good schedule to go on')
    expect(errors).toHaveLength(1)
    expect(String((errors[0] as Error).message)).toContain("schedule 'broken' of queue 'ticks' cannot be read")
    expect((await jobIds('ticks')).some((id) => id.startsWith('broken@'))).toBe(false)
    const listed = await listSchedules(t.db, ticks)
    expect(listed.map((s) => s.name)).toEqual(['broken', 'good'])
  })

  test(`JOB-21 ${on} tables migrated without jobs_schedule: schedule calls throw SCHEMA_MISSING, and a worker says so once and runs its jobs`, async () => {
    const replies = defineQueue('replies')
    await t.run('drop table jobs_schedule')
    for (const call of [
      () => schedule(t.db, replies, 'x', { cron: '0 8 * * *', value: null }),
      () => unschedule(t.db, replies, 'x'),
      () => listSchedules(t.db),
    ]) {
      let error: unknown
      try {
        await call()
      } catch (thrown) {
        error = thrown
      }
      expect(isJobsError(error, 'SCHEMA_MISSING'), String(error)).toBe(true)
      expect((error as Error).message).toContain('jobs_schedule')
    }
    const errors: unknown[] = []
    const ran: string[] = []
    workers.push(work(t.db, replies, (_value, run) => void ran.push(run.id), { onError: (error) => errors.push(error) }))
    await enqueue(t.db, replies, null, { id: 'one' })
    await waitFor(() => ran.length === 1, 'the job to run')
    await new Promise((resolve) => setTimeout(resolve, 1_200))
    expect(errors.map((error) => (isJobsError(error) ? error.code : String(error)))).toEqual(['SCHEMA_MISSING'])
  })

  test(`JOB-21 ${on} listSchedules shows each schedule with its next and last slots and the last job's state; runSchedule fires the next slot`, async () => {
    const digests = defineQueue<{ kind: string }>('digests')
    const other = defineQueue('other')
    await schedule(t.db, digests, 'daily', { cron: '0 8 * * *', tz: 'Europe/Paris', value: { kind: 'daily' } })
    await schedule(t.db, other, 'nightly', { cron: '0 3 * * *', value: null })
    const [before] = await listSchedules(t.db, digests)
    const fired = await runSchedule(t.db, digests, 'daily')
    expect(fired).toEqual({ id: `daily@${before!.nextAt.toISOString()}`, added: true })
    const seen: unknown[] = []
    await drain(t.db, digests, (value) => void seen.push(value))
    expect(seen).toEqual([{ kind: 'daily' }])
    const all = await listSchedules(t.db)
    expect(all.map((s) => `${s.queue}/${s.name}`)).toEqual(['digests/daily', 'other/nightly'])
    expect(all[0]).toMatchObject({ lastSlot: before!.nextAt, lastJob: { id: fired.id, state: 'done' } })
    expect(all[0]!.nextAt.getTime()).toBe(before!.nextAt.getTime() + 24 * HOUR)
    expect(all[1]!.lastJob).toBeNull()
    expect((await listSchedules(t.db, 'other')).map((s) => s.name)).toEqual(['nightly'])
    let error: unknown
    try {
      await runSchedule(t.db, digests, 'missing')
    } catch (thrown) {
      error = thrown
    }
    expect(isJobsError(error, 'NOT_FOUND')).toBe(true)
  })
})

describe('slots', () => {
  const iso = (ms: number) => new Date(ms).toISOString()
  /** Every slot of `cron` in `tz` from `from` to `to`. */
  const walk = (cron: string, tz: string, from: string, to: string) => {
    const rule = slotRule(cron, tz, Date.parse(from))
    const slots: number[] = []
    for (let slot = rule.next(Date.parse(from)); slot !== null && slot < Date.parse(to); slot = rule.next(slot)) slots.push(slot)
    return slots
  }
  const parisDay = (ms: number) => new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Paris' }).format(ms)

  test('JOB-21 a daily slot at 02:30 in Europe/Paris runs once each day across both clock changes of 2026; the one that does not exist runs at 03:30, moved on by the gap', () => {
    const spring = walk('30 2 * * *', 'Europe/Paris', '2026-03-26T12:00:00Z', '2026-04-01T12:00:00Z')
    expect(spring.map(iso)).toEqual([
      '2026-03-27T01:30:00.000Z',
      '2026-03-28T01:30:00.000Z',
      '2026-03-29T01:30:00.000Z', // 02:30 does not exist on 29 March: the slot runs at 03:30 CEST, 24 hours after the day before's
      '2026-03-30T00:30:00.000Z',
      '2026-03-31T00:30:00.000Z',
      '2026-04-01T00:30:00.000Z',
    ])
    const fall = walk('30 2 * * *', 'Europe/Paris', '2026-10-22T12:00:00Z', '2026-10-28T12:00:00Z')
    expect(fall.map(iso)).toEqual([
      '2026-10-23T00:30:00.000Z',
      '2026-10-24T00:30:00.000Z',
      '2026-10-25T00:30:00.000Z', // 02:30 happens twice on 25 October: once only, the first
      '2026-10-26T01:30:00.000Z',
      '2026-10-27T01:30:00.000Z',
      '2026-10-28T01:30:00.000Z',
    ])
    for (const slots of [spring, fall]) expect(new Set(slots.map(parisDay)).size).toBe(slots.length)
  })

  test('JOB-21 an hourly schedule in Europe/Paris runs every real hour across both clock changes: 23 slots on the short day, 25 on the long one', () => {
    for (const [day, count] of [
      ['2026-03-29', 23],
      ['2026-10-25', 25],
    ] as const) {
      const around = walk(
        '0 * * * *',
        'Europe/Paris',
        `${day}T00:00:00Z`.replace(/\d\dT/, (d) => `${String(Number(d.slice(0, 2)) - 1).padStart(2, '0')}T`),
        `${day}T23:59:59Z`.replace(/\d\dT/, (d) => `${String(Number(d.slice(0, 2)) + 1).padStart(2, '0')}T`),
      )
      expect(around.filter((slot) => parisDay(slot) === day).length).toBe(count)
    }
    // Three days around each change, in consecutive hours: none twice, none lost.
    for (const [from, to] of [
      ['2026-03-28T00:00:00Z', '2026-03-31T00:00:00Z'],
      ['2026-10-24T00:00:00Z', '2026-10-27T00:00:00Z'],
    ] as const) {
      const slots = walk('0 * * * *', 'Europe/Paris', from, to)
      expect(slots.length).toBe(71)
      for (let i = 1; i < slots.length; i++) expect(slots[i]! - slots[i - 1]!).toBe(HOUR)
    }
  })

  /**
   * The hour each clock change of 2026 touches, by zone: the wall-clock hour that does not exist on the short day,
   * the one that occurs twice on the long day, and the slots that lists, steps and ranges in it make.
   */
  const changes = [
    {
      tz: 'Europe/Paris',
      spring: { around: ['2026-03-28T22:00:00Z', '2026-03-29T05:00:00Z'], hour: 2 },
      fall: { around: ['2026-10-24T21:00:00Z', '2026-10-25T05:00:00Z'], hour: 2 },
      slots: {
        // 02:00 to 03:00 does not exist: each time moved on by the hour, 02:20 to 03:20 (01:20Z).
        spring: { steps: ['01:00', '01:20', '01:40'], list: ['01:00', '01:30'], range: ['01:00'], single: ['01:30'] },
        // 02:00 to 03:00 occurs twice (00:00Z to 01:00Z, then 01:00Z to 02:00Z): the first only.
        fall: { steps: ['00:00', '00:20', '00:40'], list: ['00:00', '00:30'], range: ['00:00', '02:00'], single: ['00:30'] },
      },
    },
    {
      tz: 'America/New_York',
      spring: { around: ['2026-03-08T04:00:00Z', '2026-03-08T10:00:00Z'], hour: 2 },
      fall: { around: ['2026-11-01T03:00:00Z', '2026-11-01T09:00:00Z'], hour: 1 },
      slots: {
        // 02:00 to 03:00 EST does not exist: 02:00 runs at 03:00 EDT (07:00Z).
        spring: { steps: ['07:00', '07:20', '07:40'], list: ['07:00', '07:30'], range: ['07:00'], single: ['07:30'] },
        // 01:00 to 02:00 occurs twice (05:00Z to 06:00Z EDT, then 06:00Z to 07:00Z EST): the first only.
        fall: { steps: ['05:00', '05:20', '05:40'], list: ['05:00', '05:30'], range: ['05:00', '07:00'], single: ['05:30'] },
      },
    },
  ] as const
  const expressions = (hour: number) => ({
    steps: `*/20 ${hour} * * *`,
    list: `0,30 ${hour} * * *`,
    range: `0 ${hour}-${hour + 1} * * *`,
    single: `30 ${hour} * * *`,
  })

  for (const zone of changes) {
    for (const day of ['spring', 'fall'] as const) {
      test(`JOB-21 lists, steps and ranges in the hour the clocks change in ${zone.tz} (${day}): a time that does not exist runs once, moved on by the gap; one that occurs twice runs once, at its first`, () => {
        const { around, hour } = zone[day]
        for (const [kind, cron] of Object.entries(expressions(hour))) {
          const slots = walk(cron, zone.tz, around[0], around[1])
          const date = around[1].slice(0, 10)
          expect(slots.map(iso), `${cron} in ${zone.tz}`).toEqual(
            zone.slots[day][kind as keyof typeof zone.slots.fall].map((time) => `${date}T${time}:00.000Z`),
          )
          // The same slots read backwards, as a pass after downtime reads them.
          expect(slotRule(cron, zone.tz).previous(100, Date.parse(around[1]), Date.parse(around[0])).reverse()).toEqual(slots)
        }
      })
    }
  }

  test('JOB-21 an expression whose hours are every hour runs on the real clock across both clock changes in America/New_York: 23 hourly slots on the short day, 25 on the long one, every 20 minutes likewise', () => {
    for (const [from, to, hourly, every20] of [
      ['2026-03-08T04:59:59Z', '2026-03-09T04:00:00Z', 23, 69],
      ['2026-11-01T03:59:59Z', '2026-11-02T05:00:00Z', 25, 75],
    ] as const) {
      for (const [cron, count, step] of [
        ['0 * * * *', hourly, HOUR],
        ['*/20 * * * *', every20, HOUR / 3],
      ] as const) {
        const slots = walk(cron, 'America/New_York', from, to)
        expect(slots.length, cron).toBe(count)
        for (let i = 1; i < slots.length; i++) expect(slots[i]! - slots[i - 1]!).toBe(step)
      }
    }
  })

  test('JOB-21 missed slots across a clock change: each once, oldest first; backfill is capped at 1,000 slots, the latest', () => {
    const hourly = slotRule('0 * * * *', 'Europe/Paris')
    const missed = dueSlots(hourly, Date.parse('2026-10-24T22:00:00Z'), Date.parse('2026-10-25T22:30:00Z'), 2 * 24 * HOUR)
    expect(missed.slots.length).toBe(25)
    for (let i = 1; i < missed.slots.length; i++) expect(missed.slots[i]! - missed.slots[i - 1]!).toBe(HOUR)
    expect(iso(missed.nextAt!)).toBe('2026-10-25T23:00:00.000Z')
    const latestOnly = dueSlots(hourly, Date.parse('2026-10-24T22:00:00Z'), Date.parse('2026-10-25T22:30:00Z'), null)
    expect(latestOnly.slots.map(iso)).toEqual(['2026-10-25T22:00:00.000Z'])
    const seconds = slotRule('* * * * * *', 'UTC')
    const now = Date.parse('2026-12-03T12:00:00.500Z')
    const capped = dueSlots(seconds, now - 24 * HOUR, now, 24 * HOUR)
    expect(capped.slots.length).toBe(MAX_BACKFILL_SLOTS)
    expect(iso(capped.slots.at(-1)!)).toBe('2026-12-03T12:00:00.000Z')
    expect(capped.slots[0]).toBe(Date.parse('2026-12-03T12:00:00.000Z') - (MAX_BACKFILL_SLOTS - 1) * 1_000)
    // The latest missed slot is added even when backfill is shorter than the time since it.
    expect(
      dueSlots(slotRule('0 8 * * *', 'UTC'), Date.parse('2026-12-03T08:00:00Z'), Date.parse('2026-12-03T09:00:00Z'), 60_000).slots.map(iso),
    ).toEqual(['2026-12-03T08:00:00.000Z'])
  })
})
