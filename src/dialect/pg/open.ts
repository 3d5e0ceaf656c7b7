/**
 * What the PostgreSQL drivers' openers share (the command-line tool's `--db`): which URLs are PostgreSQL's. Each
 * driver's folder opens a URL through its own package (node-postgres/open.ts, postgres-js/open.ts), and
 * src/dialect/open.ts tries them in the registry's order.
 */
import type { Address, UrlAddress } from '../connection.js'

/** What a PostgreSQL driver's opener opens, as the tool's errors say it. @internal */
export const PG_URL = 'a PostgreSQL URL'

/** Whether `address` is a PostgreSQL URL: postgres:// or postgresql://. @internal */
export function isPgUrl(address: Address): address is UrlAddress {
  return 'url' in address && (address.url.protocol === 'postgres:' || address.url.protocol === 'postgresql:')
}
