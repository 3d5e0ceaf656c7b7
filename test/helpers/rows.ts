import type Database from 'better-sqlite3'

export interface JobRow {
  seq: number
  id: string
  queue: string
  grp: string | null
  value: string
  state: string
  priority: number
  attempts: number
  max_attempts: number
  run_at: number
  created_at: number
  finished_at: number | null
  error: string | null
  result: string | null
}

export function jobRow(client: Database.Database, id: string, queue?: string): JobRow | undefined {
  const sql = queue === undefined ? 'select * from jobs_job where id = ?' : 'select * from jobs_job where id = ? and queue = ?'
  return client.prepare(sql).get(...(queue === undefined ? [id] : [id, queue])) as JobRow | undefined
}

export function count(client: Database.Database, table: string, where = 'true'): number {
  return (client.prepare(`select count(*) as n from ${table} where ${where}`).get() as { n: number }).n
}

/** Every row of every table, for "nothing was written" comparisons. */
export function dump(client: Database.Database): Record<string, unknown[]> {
  const tables = client
    .prepare(
      `select name from sqlite_master where type = 'table' and name not like 'sqlite_%' and name not like '__drizzle%' order by name`,
    )
    .pluck()
    .all() as string[]
  return Object.fromEntries(tables.map((table) => [table, client.prepare(`select * from "${table}"`).all()]))
}
