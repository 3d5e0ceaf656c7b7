/**
 * The one read of Drizzle's internals on PostgreSQL: a transaction has no public handle on its driver's
 * client, so the engine reads it where drizzle-orm 0.45 keeps it (`session.client`). When a Drizzle release
 * moves it, this fails first, naming what to change.
 */
import { sql } from 'drizzle-orm'
import pg from 'pg'
import { expect, test } from 'vitest'
import { driverClientOf } from '../../src/dialect/drizzle.js'
import { eachFreshPgDb, POSTGRES_JS } from '../helpers/pg.js'

const t = eachFreshPgDb()
const MOVED = "a transaction: Drizzle's session.client moved; change driverClientOf in src/dialect/drizzle.ts"

test('node-postgres: the client behind a database is its pool, and behind a transaction the pool client the transaction runs on', async () => {
  expect(driverClientOf(t.db), 'a database: its public $client').toBe(t.pool)
  await t.db.transaction(async (tx) => {
    const client = driverClientOf(tx)
    expect(client, MOVED).toBeInstanceOf(pg.Client)
    const mine = (await tx.execute<{ xid: string }>(sql`select txid_current()::text as xid`)).rows[0]
    const seen = (await (client as pg.PoolClient).query<{ xid: string }>(`select txid_current()::text as xid`)).rows[0]
    expect(seen, MOVED).toEqual(mine)
  })
})

test.each(POSTGRES_JS)(
  '%s: the client behind a database is its Sql, and behind a transaction the TransactionSql the transaction runs on',
  async (major) => {
    const { client, db } = t.postgresJs(major)
    expect(driverClientOf(db), 'a database: its public $client').toBe(client)
    await db.transaction(async (tx) => {
      const inner = driverClientOf(tx)
      expect(typeof inner, MOVED).toBe('function')
      const { unsafe, savepoint } = inner as { unsafe?: unknown; savepoint?: unknown }
      expect([typeof unsafe, typeof savepoint], MOVED).toEqual(['function', 'function'])
      const [mine] = await tx.execute<{ xid: string }>(sql`select txid_current()::text as xid`)
      const [seen] = await (inner as { unsafe(text: string): Promise<{ xid: string }[]> }).unsafe(`select txid_current()::text as xid`)
      expect(seen, MOVED).toEqual(mine)
    })
  },
)
