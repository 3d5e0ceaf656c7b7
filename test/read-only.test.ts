/**
 * Reading paths only read: getJob, watch, listJobs, inspectJob and
 * queueCounts answer on a read-only connection, whether or not a writer set
 * the database up first, and leave its schema as it was.
 */
import Database from 'better-sqlite3'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { afterAll, expect, test } from 'vitest'
import { defineQueue, enqueue, getJob, inspectJob, listJobs, queueCounts, watch } from '../src/index.js'
import { freshDb, removeTempDirs } from './helpers/db.js'

afterAll(removeTempDirs)

test('getJob, watch, listJobs, inspectJob and queueCounts work on a read-only connection and change no schema', async () => {
  const t = freshDb('read-only.db')
  const queue = defineQueue<{ n: number }>('read-only')
  enqueue(t.db, queue, { n: 1 }, { id: 'one' })
  const schema = () => t.client.prepare('select type, name, sql from sqlite_master order by name').all()
  const before = schema()

  const client = new Database(t.file, { readonly: true, fileMustExist: true })
  const db = drizzle(client)
  expect(getJob(db, queue, 'one')).toMatchObject({ id: 'one', state: 'waiting', ahead: 0 })
  expect(listJobs(db, { queue: 'read-only' }).jobs.map((job) => job.id)).toEqual(['one'])
  expect(inspectJob(db, queue, 'one')).toMatchObject({ id: 'one', steps: [] })
  expect(queueCounts(db, queue)).toMatchObject({ queue: 'read-only', waiting: 1 })
  const controller = new AbortController()
  const snapshots = watch(db, queue, 'one', { signal: controller.signal })
  const first = await snapshots.next()
  expect(first.value).toMatchObject({ id: 'one', state: 'waiting' })
  controller.abort()
  await snapshots.return?.()

  expect(schema()).toEqual(before)
  client.close()
  t.close()
})

test('a read-only connection reads a database that no writer of drizzle-jobs has opened yet, installing nothing', () => {
  const t = freshDb('untouched.db')
  t.client
    .prepare(`insert into jobs_job (queue, id, value, state, run_at, created_at) values ('read-only', 'plain', '{}', 'waiting', 0, 0)`)
    .run()
  const triggers = () => t.client.prepare(`select count(*) from sqlite_master where type = 'trigger'`).pluck().get()
  const before = triggers()
  const client = new Database(t.file, { readonly: true, fileMustExist: true })
  const db = drizzle(client)
  expect(getJob(db, 'read-only', 'plain')).toMatchObject({ id: 'plain', state: 'waiting' })
  expect(listJobs(db, { queue: 'read-only' }).jobs.map((job) => job.id)).toEqual(['plain'])
  expect(triggers()).toBe(before)
  client.close()
  t.close()
})
