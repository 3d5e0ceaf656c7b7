/**
 * Server-rendered HTML: a template tag that escapes every value put into it,
 * so job values, ids and errors written by anyone show as text, never markup.
 */

/** Markup that is already safe: made by {@link html}, or by {@link raw} for constant strings. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text
  }
}

type Part = Html | string | number | boolean | null | undefined | readonly Part[]

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

// biome-ignore lint/suspicious/noShadowRestrictedNames: the module's own escape; the deprecated global is never used
export function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!)
}

function render(part: Part): string {
  if (part instanceof Html) return part.text
  if (Array.isArray(part)) return part.map(render).join('')
  if (part === null || part === undefined || part === false) return ''
  return escape(String(part))
}

/** Builds markup: the literal parts as written, each value escaped (an Html or an array of them as is). */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let text = strings[0]!
  for (let i = 0; i < values.length; i++) text += render(values[i]) + strings[i + 1]!
  return new Html(text)
}

/** Markup from a constant the code itself holds. */
export function raw(text: string): Html {
  return new Html(text)
}
