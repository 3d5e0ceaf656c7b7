/**
 * Locks that another connection holds on a test's database for as long as the test says, as another part of the app,
 * another process or a migration holds them: what a worker meets when its database is busy.
 */
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import type { ContractDb } from './dialects.js'

/** A lock another connection holds. */
export interface HeldLock {
  /** Lets the lock go; resolves once it is let go. */
  release(): Promise<void>
}

/**
 * Another process takes the write lock of the SQLite file at `file` (`begin immediate` on better-sqlite3) and holds
 * it until `release`, for `capMs` at most, or until this process ends; resolves once it holds it. Another process,
 * not a thread: the lock is SQLite's POSIX lock on the file, which a process's other copies of SQLite (libsql's
 * beside better-sqlite3's) do not see when it is their own process's.
 */
export async function holdSqliteWriteLock(file: string, capMs = 120_000): Promise<HeldLock> {
  const holder = spawn(
    process.execPath,
    [
      '-e',
      `const db = new (require(process.argv[1]))(process.argv[2])
       db.exec('begin immediate')
       console.log('held')
       setTimeout(() => process.exit(0), Number(process.argv[3]))
       process.stdin.on('end', () => {
         db.exec('commit')
         db.close()
         process.exit(0)
       }).resume()`,
      createRequire(import.meta.url).resolve('better-sqlite3'),
      file,
      String(capMs),
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  )
  // A release after the cap ended it writes to a closed pipe.
  holder.stdin.on('error', () => {})
  const exited = new Promise<void>((resolve) => holder.once('exit', () => resolve()))
  await new Promise<void>((resolve, reject) => {
    holder.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('held') && resolve())
    holder.once('error', reject)
    void exited.then(() => reject(new Error('the process holding the write lock ended before it held it')))
  })
  return {
    release: async () => {
      holder.stdin.end()
      await exited
    },
  }
}

/**
 * In a transaction of the app's on PostgreSQL (ContractDb's `inTransaction`), takes `table`'s ACCESS
 * EXCLUSIVE lock, as a migration's `alter table` does: every statement that reads or writes the table waits for it
 * (a row lock, which `skip locked` passes over, would not do). Holds it until `release`; resolves once it holds it.
 */
export async function holdPgTableLock(inTransaction: NonNullable<ContractDb['inTransaction']>, table: string): Promise<HeldLock> {
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  let held!: () => void
  const holding = new Promise<void>((resolve) => (held = resolve))
  const transaction = inTransaction(async (_tx, exec) => {
    await exec(`lock table ${table} in access exclusive mode`)
    held()
    await released
  })
  await Promise.race([holding, transaction])
  return {
    release: async () => {
      release()
      await transaction
    },
  }
}
