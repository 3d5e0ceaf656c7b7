/**
 * The dashboard on its own server, as `drizzle-jobs dashboard` runs it: on
 * 127.0.0.1 by default; on any other address only with a token, which every
 * request then needs. Without a token the dashboard answers only requests
 * addressed to a loopback name, as every mounted dashboard does, so a web
 * page cannot reach it through a DNS name that points at 127.0.0.1.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Database } from '../dialect/open.js'
import { JobsError } from '../errors.js'
import { isLoopbackAddress } from './hosts.js'
import { dashboard } from './index.js'

export const DEFAULT_DASHBOARD_HOST = '127.0.0.1'
export const DEFAULT_DASHBOARD_PORT = 4580
/** A token shorter than this is refused: it stands between the network and every job. */
export const MIN_TOKEN_LENGTH = 16

export interface ServeOptions {
  host?: string
  port?: number
  token?: string
  title?: string
}

export interface ServedDashboard {
  /** The address to open: with the token in it when there is one. */
  url: string
  close(): Promise<void>
}

export async function serveDashboard(db: Database, options: ServeOptions = {}): Promise<ServedDashboard> {
  const host = options.host ?? DEFAULT_DASHBOARD_HOST
  const port = options.port ?? DEFAULT_DASHBOARD_PORT
  const token = options.token
  if (!isLoopbackAddress(host) && token === undefined) {
    throw new JobsError(
      'INVALID_OPTION',
      `refusing to listen on ${host} without a token: anyone who reaches it could read every job and act on it. Pass --token (at least ${MIN_TOKEN_LENGTH} characters) or set DRIZZLE_JOBS_TOKEN, or listen on 127.0.0.1`,
    )
  }
  if (token !== undefined && token.length < MIN_TOKEN_LENGTH)
    throw new JobsError('INVALID_OPTION', `token: at least ${MIN_TOKEN_LENGTH} characters, got ${token.length}`)
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new JobsError('INVALID_OPTION', `port: expected 0 to 65535, got ${port}`)
  const board = dashboard(db, {
    ...(token === undefined ? {} : { token }),
    ...(options.title === undefined ? {} : { title: options.title }),
  })
  const server = createServer(board.node)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const address = server.address() as AddressInfo
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return {
    url: `http://${shown}:${address.port}/${token === undefined ? '' : `?token=${encodeURIComponent(token)}`}`,
    close: () =>
      new Promise<void>((resolve) => {
        board.close()
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
