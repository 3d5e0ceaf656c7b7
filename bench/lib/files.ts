/** Fresh database files for each measurement, in one temporary folder per run. */
import { closeSync, copyFileSync, existsSync, fsyncSync, mkdirSync, mkdtempSync, openSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** A new folder under the system's temp dir for this run's files; the caller removes it. */
export function runDir(): string {
  return mkdtempSync(join(tmpdir(), 'drizzle-jobs-bench-'))
}

let files = 0

/** A path in `dir` where no database exists yet. */
export function freshPath(dir: string, name: string): string {
  mkdirSync(dir, { recursive: true })
  for (;;) {
    const file = join(dir, `${name}-${process.pid}-${++files}.db`)
    if (!existsSync(file)) return file
  }
}

/** Removes a database file with its WAL and shared-memory files. */
export function removeDb(file: string): void {
  for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(file + suffix, { force: true })
}

/**
 * Copies a closed, checkpointed database (a single file) to a fresh path,
 * and flushes the copy to disk: otherwise the first checkpoint's fsync in
 * the measurement would write back the whole copy (200 MB for a million
 * jobs) and be counted as the engine's time.
 */
export function copyDb(template: string, dir: string, name: string): string {
  if (existsSync(`${template}-wal`)) throw new Error(`${template} still has a WAL file: close it (checkpointed) before copying`)
  const file = freshPath(dir, name)
  copyFileSync(template, file)
  const fd = openSync(file, 'r+')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  return file
}
