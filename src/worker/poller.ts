/**
 * Finding other processes' writes: SQLite's `PRAGMA data_version` moves
 * only when another connection commits to the database, and a look costs
 * about 2 µs, so a worker looks every `pollInterval`.
 */
import type { Connection } from '../dialect/index.js'

export class DataVersionPoller {
  private last: number

  constructor(private readonly connection: Connection) {
    this.last = connection.executor.dataVersion()
  }

  /** Whether another connection wrote since the last look. */
  othersWrote(): boolean {
    const version = this.connection.executor.dataVersion()
    if (version === this.last) return false
    this.last = version
    return true
  }
}
