/**
 * Who may use the dashboard. With a token, every request must carry it: a
 * `Authorization: Bearer` header, or the cookie that opening the printed URL
 * (`?token=…`) sets. Actions also need proof that the page itself sent them
 * (htmx's `HX-Request` header, which a form on another site cannot send, or
 * the bearer header) and an Origin, when the browser sends one, of this host.
 */
import { createHash, timingSafeEqual } from 'node:crypto'

export const TOKEN_COOKIE = 'drizzle_jobs_token'

export function sameToken(given: string | null | undefined, token: string): boolean {
  if (typeof given !== 'string') return false
  const a = createHash('sha256').update(given).digest()
  const b = createHash('sha256').update(token).digest()
  return timingSafeEqual(a, b)
}

/** The token a request carries, in its Authorization header or its cookie. */
export function tokenOf(request: Request): string | null {
  const authorization = request.headers.get('authorization')
  if (authorization?.startsWith('Bearer ')) return authorization.slice('Bearer '.length).trim()
  for (const part of (request.headers.get('cookie') ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=')
    if (name === TOKEN_COOKIE) {
      try {
        return decodeURIComponent(value.join('='))
      } catch {
        return null
      }
    }
  }
  return null
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

export function tokenCookie(token: string, path: string): string {
  return `${TOKEN_COOKIE}=${encodeURIComponent(token)}; Path=${path || '/'}; HttpOnly; SameSite=Strict`
}
