/**
 * The one read of Drizzle's internals: a transaction has no public handle on
 * its driver's client, so the engine reads it where drizzle-orm 0.45 keeps it.
 * When a Drizzle release moves it, this fails first, naming what to change.
 */
import Database from 'better-sqlite3'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { expect, test } from 'vitest'
import { driverClientOf } from '../src/dialect/drizzle.js'

test('the driver client behind a Drizzle database and behind its transaction is the better-sqlite3 database itself', () => {
  const client = new Database(':memory:')
  const db = drizzle(client)
  expect(driverClientOf(db), 'a database: its public $client').toBe(client)
  let inTransaction: unknown
  db.transaction((tx) => {
    inTransaction = driverClientOf(tx)
  })
  expect(inTransaction, "a transaction: Drizzle's session.client moved; change driverClientOf in src/dialect/drizzle.ts").toBe(client)
  client.close()
})
