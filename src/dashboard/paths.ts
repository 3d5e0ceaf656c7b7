/**
 * The dashboard's addresses. A queue name or an id is one path segment,
 * percent-encoded, so that `/`, `?`, `#` and `%` stay inside it. A name made
 * of one or two dots alone would still be lost: URL parsers remove `.` and
 * `..` segments (and `%2E`, `%2e%2E`, which mean the same), in the browser
 * and on the server; and an empty one (an id another program wrote) leaves
 * an empty segment, which the router cannot tell from none. Such a name is
 * written after a raw `=`, which percent-encoding never leaves raw, so `=`,
 * `=.` and `=..` cannot name anything else.
 */

/** A path segment that names `text` exactly. */
export function pathSegment(text: string): string {
  const encoded = encodeURIComponent(text)
  return encoded === '' || encoded === '.' || encoded === '..' ? `=${encoded}` : encoded
}

/** The text a path segment names: the inverse of {@link pathSegment}. Throws URIError for a malformed escape. */
export function segmentText(segment: string): string {
  return segment === '=' || segment === '=.' || segment === '=..' ? segment.slice(1) : decodeURIComponent(segment)
}

export function queuePath(ctx: { base: string }, queue: string): string {
  return `${ctx.base}/queues/${pathSegment(queue)}`
}

export function jobPath(ctx: { base: string }, queue: string, id: string): string {
  return `${queuePath(ctx, queue)}/jobs/${pathSegment(id)}`
}
