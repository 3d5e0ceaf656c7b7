/**
 * The contracts a fresh app checks through the installed package, the same on every dialect and driver: what
 * the README promises a user, run as the user's own code would run it.
 */
import { defineQueue, enqueue, getJob, watch, work, type JobSnapshot, type Database } from 'drizzle-jobs'

/** What each app gives the smoke: its Drizzle database, and its own transaction that saves a row and its job. */
export interface App {
  db: Database
  /** Saves a message and adds its reply job with `id` in one transaction of the app's; throws after both when `fail`. */
  post(text: string, id: string, fail: boolean): Promise<void>
  /** How many messages the app has stored. */
  messages(): Promise<number>
}

export const replies = defineQueue<{ text: string }>('replies', { attempts: 3, backoff: { initial: 1, max: 1 } })
const outcomes = defineQueue<{ kind: 'ok' | 'fail' | 'throw' | 'steps' }, { echo: string }>('outcomes', {
  attempts: 2,
  backoff: { initial: 1, max: 1 },
})

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error(`smoke: ${what}`)
  console.log(`ok ${what}`)
}

async function until(what: string, condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`smoke: timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

export async function smoke(app: App): Promise<void> {
  const { db } = app
  await app.post('kept', 'reply:kept', false)
  check((await getJob(db, replies, 'reply:kept'))?.state === 'waiting', 'JOB-02 a job added in the app transaction commits with its row')
  const thrown = await app.post('lost', 'reply:lost', true).then(
    () => false,
    () => true,
  )
  check(
    thrown && (await getJob(db, replies, 'reply:lost')) === undefined && (await app.messages()) === 1,
    'JOB-02 a transaction that throws takes its row and its job back',
  )
  check(
    (await enqueue(db, replies, { text: 'again' }, { id: 'reply:kept' })).added === false,
    'JOB-03 a second add of an id adds nothing and says so',
  )

  const watched = (async () => {
    const states: string[] = []
    for await (const job of watch(db, replies, 'reply:kept')) states.push(job.state)
    return states
  })()
  const steps: string[] = []
  for (const kind of ['ok', 'fail', 'throw', 'steps'] as const) await enqueue(db, outcomes, { kind }, { id: kind })
  const workers = [
    work(db, replies, ({ text }) => ({ echo: text })),
    work(db, outcomes, async ({ kind }, run) => {
      if (kind === 'fail') return run.fail('refused')
      if (kind === 'throw') throw new Error(`attempt ${run.attempt} threw`)
      if (kind === 'steps') {
        await run.step('one', () => void steps.push(`one@${run.attempt}`))
        if (run.attempt === 1) throw new Error('again')
        await run.step('two', () => void steps.push(`two@${run.attempt}`))
      }
      return { echo: kind }
    }),
  ]
  const ended = (job: JobSnapshot<unknown> | undefined) => job !== undefined && ['done', 'failed', 'canceled'].includes(job.state)
  await until('every job to end', async () => {
    for (const id of ['ok', 'fail', 'throw', 'steps']) if (!ended(await getJob(db, outcomes, id))) return false
    return ended(await getJob(db, replies, 'reply:kept'))
  })
  await Promise.all(workers.map((worker) => worker.stop()))

  const kept = await getJob(db, replies, 'reply:kept')
  check(
    kept?.state === 'done' && (kept.result as { echo?: string } | null)?.echo === 'kept',
    'JOB-08 a handler that returns: done, its result kept',
  )
  const states = await watched
  check(
    states[0] === 'waiting' && states.at(-1) === 'done',
    `JOB-11 watch yields the job as it is, then each change, and ends when it ends (${states.join(' → ')})`,
  )
  check((await getJob(db, outcomes, 'ok'))?.result?.echo === 'ok', 'JOB-08 a typed result')
  const failed = await getJob(db, outcomes, 'fail')
  check(
    failed?.state === 'failed' && failed.error === 'refused' && failed.attempt === 1,
    'JOB-08 run.fail fails the job at once, its reason kept',
  )
  const threw = await getJob(db, outcomes, 'throw')
  check(
    threw?.state === 'failed' && threw.error === 'attempt 2 threw' && threw.attempt === 2,
    'JOB-08 a handler that throws on its last attempt fails the job',
  )
  check(
    (await getJob(db, outcomes, 'steps'))?.state === 'done' && steps.join(' ') === 'one@1 two@2',
    'JOB-06 a finished step is not run again by a later attempt',
  )
}
