/**
 * Who may use the dashboard. With a token, every request must carry it: a
 * `Authorization: Bearer` header, or the cookie that opening the printed URL
 * (`?token=…`) sets. Actions also need proof that the page itself sent them
 * (htmx's `HX-Request` header, which a form on another site cannot send, or
 * the bearer header) and an Origin, when the browser sends one, of this host.
 */
import { createHash, timingSafeEqual } from 'node:crypto'

export function sameToken(given: string | null | undefined, token: string): boolean {
  if (typeof given !== 'string') return false
  const a = createHash('sha256').update(given).digest()
  const b = createHash('sha256').update(token).digest()
  return timingSafeEqual(a, b)
}

/**
 * The name of the token cookie of the dashboard mounted at `base` and
 * reached on `port`. A browser sends a host's cookies to every port of it,
 * so a name shared by every dashboard would let one dashboard's cookie
 * replace another's, and let a cookie another local service set lock the
 * user out; a name made from the mount and the port is this dashboard's own.
 */
export function tokenCookieName(base: string, port: string | null): string {
  return `drizzle_jobs_token_${createHash('sha256')
    .update(`${port ?? ''} ${base}`)
    .digest('hex')
    .slice(0, 12)}`
}

/** Whether a request carries the token: in its Authorization header, or in the cookie named `cookieName`. */
export function carriesToken(request: Request, token: string, cookieName: string): boolean {
  const authorization = request.headers.get('authorization')
  if (authorization?.startsWith('Bearer ')) return sameToken(authorization.slice('Bearer '.length).trim(), token)
  return cookiesNamed(request, cookieName).some((given) => sameToken(given, token))
}

/** The values of every cookie of that name the request carries: a browser may send several, set for different paths. */
function cookiesNamed(request: Request, cookieName: string): string[] {
  const values: string[] = []
  for (const part of (request.headers.get('cookie') ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=')
    if (name !== cookieName) continue
    try {
      values.push(decodeURIComponent(value.join('=')))
    } catch {
      // A value that is not well-formed is no token.
    }
  }
  return values
}

/** Whether a state-changing request came from the dashboard's own pages (or a script with the bearer token). */
export function isOwnAction(request: Request): boolean {
  const fromPage = request.headers.get('hx-request') === 'true'
  const bearer = request.headers.get('authorization')?.startsWith('Bearer ') ?? false
  if (!fromPage && !bearer) return false
  if (request.headers.get('sec-fetch-site') === 'cross-site') return false
  const origin = request.headers.get('origin')
  if (origin === null) return true
  try {
    return new URL(origin).host === (request.headers.get('host') ?? new URL(request.url).host)
  } catch {
    return false
  }
}

export function tokenCookie(cookieName: string, token: string, path: string): string {
  return `${cookieName}=${encodeURIComponent(token)}; Path=${path || '/'}; HttpOnly; SameSite=Strict`
}
