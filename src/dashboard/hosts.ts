/**
 * Which hosts a dashboard answers. A web page can point a DNS name of its
 * own at 127.0.0.1 (DNS rebinding) and then reach a dashboard there as if it
 * were its own origin, reading every job and sending actions. What the page
 * cannot change is the Host header its browser sends: the page's own name.
 * So a dashboard without a token answers only requests addressed to a
 * loopback name or address, or to a host its `allowedHosts` names.
 */
import { describe } from '../duration.js'
import { JobsError } from '../errors.js'

/** A host as a Host header names it: its name, lower-case, with no trailing dot (an IPv6 address in brackets), and its port when it has one. */
export interface Host {
  name: string
  port: string | null
}

/** An entry of `allowedHosts`: a host name, with or without a port; `subdomains` when written with a leading dot. */
export interface AllowedHost extends Host {
  subdomains: boolean
}

const NAME = /^[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?$/
const IPV6 = /^\[[0-9a-f:.]+\]$/
const LOOPBACK_V4 = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/

/** Reads `name`, `name:port`, `[v6]`, `[v6]:port` or a bare IPv6 address; null when it is none of them. */
export function parseHost(text: string): Host | null {
  const lower = text.toLowerCase()
  let name: string
  let port: string | null = null
  if (lower.startsWith('[')) {
    const end = lower.indexOf(']')
    name = lower.slice(0, end + 1)
    const rest = lower.slice(end + 1)
    if (end < 0 || (rest !== '' && !/^:\d*$/.test(rest))) return null
    port = rest.slice(1) || null
  } else if ((lower.match(/:/g) ?? []).length > 1) {
    name = `[${lower}]`
  } else {
    const colon = lower.indexOf(':')
    name = colon < 0 ? lower : lower.slice(0, colon)
    if (colon >= 0) {
      if (!/^\d*$/.test(lower.slice(colon + 1))) return null
      port = lower.slice(colon + 1) || null
    }
  }
  if (IPV6.test(name)) return { name, port }
  if (!NAME.test(name)) return null
  return { name: name.replace(/\.$/, ''), port }
}

/** Whether a host name is this machine's by definition: `localhost` and its subdomains, 127.0.0.0/8 and [::1]. */
export function isLoopbackName(name: string): boolean {
  if (name === 'localhost' || name.endsWith('.localhost') || name === '[::1]') return true
  const v4 = LOOPBACK_V4.exec(name)
  return v4?.slice(1).every((octet) => Number(octet) <= 255) ?? false
}

/** Whether an address, as a server is told to listen on it (`127.0.0.1`, `::1`, `localhost`), is a loopback one. */
export function isLoopbackAddress(address: string): boolean {
  const host = parseHost(address)
  return host !== null && isLoopbackName(host.name)
}

/** The host a request is addressed to: its Host header, or its URL's host when it has no such header (a request made in process). */
export function requestHost(request: Request): Host | null {
  return parseHost(request.headers.get('host') ?? new URL(request.url).host)
}

/**
 * Whether a dashboard with no token answers a request addressed to `host`:
 * one with a loopback name, with any port, or one that an entry of `allowed`
 * names. An entry matches a host of the same name, compared without regard
 * to case or a trailing dot; one with a leading dot also matches every
 * subdomain of its name; one with a port matches that port only.
 */
export function isAllowedHost(host: Host | null, allowed: readonly AllowedHost[]): boolean {
  if (host === null) return false
  if (isLoopbackName(host.name)) return true
  return allowed.some(
    (entry) =>
      (host.name === entry.name || (entry.subdomains && host.name.endsWith(`.${entry.name}`))) &&
      (entry.port === null || entry.port === host.port),
  )
}

/** Checks the `allowedHosts` option. Throws INVALID_OPTION for anything but an array of host names, each with an optional port. */
export function allowedHostsOption(value: unknown): AllowedHost[] {
  if (value === undefined) return []
  if (!Array.isArray(value))
    throw new JobsError(
      'INVALID_OPTION',
      `allowedHosts: expected an array of host names, such as ['jobs.example.com'], got ${describe(value)}`,
    )
  return value.map((entry: unknown, i) => {
    const subdomains = typeof entry === 'string' && entry.startsWith('.')
    const host = typeof entry === 'string' ? parseHost(subdomains ? entry.slice(1) : entry) : null
    if (host === null || (host.port !== null && Number(host.port) > 65_535)) {
      throw new JobsError(
        'INVALID_OPTION',
        `allowedHosts[${i}]: expected a host name with an optional port, such as 'jobs.example.com' or 'jobs.example.com:8080', got ${describe(entry)}`,
      )
    }
    return { ...host, subdomains }
  })
}
