/**
 * Finding other processes' writes: the executor's data version (SQLite's
 * `PRAGMA data_version`) moves only when another connection commits to the
 * database, and a look costs about 2 µs, so a worker looks every
 * `pollInterval`.
 */
import type { Connection } from '../dialect/index.js'

export class DataVersionPoller {
  /** The version at the last look: the first look is taken at once, so that a write right after the start is not missed. */
  private last: number | Promise<number>

  constructor(private readonly connection: Connection) {
    this.last = connection.executor.dataVersion()
  }

  /** Whether another connection wrote since the last look. */
  async othersWrote(): Promise<boolean> {
    const last = await this.last
    const version = await this.connection.executor.dataVersion()
    if (version === last) return false
    this.last = version
    return true
  }
}
