/**
 * The files the dashboard's pages load: htmx from its npm package (no build
 * step), the small script that applies live updates, and the style sheet.
 * All are served from the dashboard itself, so its pages need no other
 * origin and run under a strict Content-Security-Policy.
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'

let htmx: string | null = null

/** htmx.org's minified build, read once from node_modules. */
export function htmxSource(): string {
  htmx ??= readFileSync(createRequire(import.meta.url).resolve('htmx.org/dist/htmx.min.js'), 'utf8')
  return htmx
}

/**
 * Applies server-sent updates: each event is a JSON object of region name to
 * markup, and each `[data-live=name]` region is patched to match it. An
 * element whose tag and attributes are unchanged is kept, and only its text
 * or children change; any other is replaced. So a link the reader is
 * clicking stays in the page while a count or an age beside it moves, and
 * the first update, which repeats what the page was served with, changes
 * nothing. Also shows the answer of an action, or its error, in the flash
 * region.
 */
export const CLIENT_JS = `(() => {
  const body = document.body
  const flash = (markup) => {
    const region = document.getElementById('flash')
    if (region) region.innerHTML = markup
  }
  document.addEventListener('htmx:responseError', (event) => {
    const xhr = event.detail.xhr
    flash(xhr.getResponseHeader('content-type')?.startsWith('text/html') ? xhr.responseText : '<p class="flash error">The dashboard answered ' + xhr.status + '</p>')
  })
  document.addEventListener('htmx:sendError', () => flash('<p class="flash error">The dashboard cannot be reached</p>'))
  const same = (have, want) => {
    if (have.nodeName !== want.nodeName) return false
    if (have.nodeType !== 1) return true
    if (have.attributes.length !== want.attributes.length) return false
    for (const { name, value } of want.attributes) if (have.getAttribute(name) !== value) return false
    return true
  }
  const patch = (into, from) => {
    const wanted = Array.from(from.childNodes)
    for (const [i, want] of wanted.entries()) {
      const have = into.childNodes[i]
      if (!have) into.appendChild(want)
      else if (!same(have, want)) into.replaceChild(want, have)
      else if (have.nodeType === 1) patch(have, want)
      else if (have.nodeValue !== want.nodeValue) have.nodeValue = want.nodeValue
    }
    while (into.childNodes.length > wanted.length) into.lastChild.remove()
  }
  const url = body.dataset.events
  if (!url) return
  const source = new EventSource(url)
  source.addEventListener('open', () => { body.dataset.live = 'open' })
  source.addEventListener('error', () => { body.dataset.live = 'closed' })
  source.addEventListener('message', (event) => {
    const regions = JSON.parse(event.data)
    for (const name of Object.keys(regions)) {
      const region = document.querySelector('[data-live="' + name + '"]')
      if (!region) continue
      const markup = document.createElement('template')
      markup.innerHTML = regions[name]
      patch(region, markup.content)
      window.htmx.process(region)
    }
    body.dataset.updates = String(Number(body.dataset.updates || 0) + 1)
  })
})()
`

export const STYLE_CSS = `
:root { --ink: #1f2933; --muted: #616e7c; --line: #e4e7eb; --bg: #f5f7fa; --card: #fff; --blue: #2680c2; --purple: #7c5dc7;
  --amber: #c99a2e; --green: #3f9142; --red: #d64545; --gray: #7b8794; font-family: ui-sans-serif, system-ui, -apple-system, "Segoe UI", sans-serif; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink); font-size: 14px; }
a { color: var(--blue); text-decoration: none; }
a:hover { text-decoration: underline; }
header { background: var(--ink); color: #fff; padding: 10px 24px; display: flex; align-items: center; gap: 16px; }
header .brand { font-weight: 700; font-size: 16px; color: #fff; }
header .file { color: #cbd2d9; font-family: ui-monospace, monospace; font-size: 12px; }
header .live { margin-left: auto; font-size: 12px; color: #cbd2d9; }
header .live::before { content: ""; display: inline-block; width: 8px; height: 8px; border-radius: 50%; background: var(--gray); margin-right: 6px; }
body[data-live="open"] header .live::before { background: #57ae5b; }
main { padding: 20px 24px; max-width: 1200px; }
nav.crumbs { margin-bottom: 12px; color: var(--muted); }
h1 { font-size: 20px; margin: 0 0 12px; }
h2 { font-size: 15px; margin: 0 0 10px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 16px; margin-bottom: 16px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { color: var(--muted); font-weight: 600; font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.wrap { white-space: normal; word-break: break-word; }
tr:last-child td { border-bottom: none; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; color: #fff; background: var(--gray); }
.badge.waiting { background: var(--blue); } .badge.scheduled { background: var(--purple); } .badge.running { background: var(--amber); }
.badge.done { background: var(--green); } .badge.failed { background: var(--red); } .badge.canceled { background: var(--gray); }
.badge.paused { background: var(--amber); } .badge.active { background: var(--green); }
.count-failed { color: var(--red); font-weight: 600; }
button { font: inherit; font-size: 13px; padding: 4px 12px; border-radius: 6px; border: 1px solid var(--line); background: #fff; cursor: pointer; }
button:hover { background: var(--bg); }
button.danger { color: var(--red); border-color: #f5b5b5; }
button.primary { color: #fff; background: var(--blue); border-color: var(--blue); }
.tabs { display: flex; gap: 6px; flex-wrap: wrap; margin-bottom: 12px; }
.tabs a { padding: 4px 12px; border-radius: 16px; border: 1px solid var(--line); background: #fff; color: var(--ink); }
.tabs a.current { background: var(--ink); color: #fff; border-color: var(--ink); }
.tabs .n { color: var(--muted); margin-left: 4px; font-variant-numeric: tabular-nums; }
.tabs a.current .n { color: #cbd2d9; }
form.search { display: flex; gap: 8px; margin-bottom: 12px; }
form.search input { font: inherit; padding: 4px 8px; border: 1px solid var(--line); border-radius: 6px; min-width: 200px; }
pre { background: #f0f4f8; padding: 10px; border-radius: 6px; overflow: auto; max-height: 360px; margin: 0; font-size: 12px; }
pre.error { background: #fff1f1; color: #8a1c1c; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 6px 16px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.actions { display: flex; gap: 8px; margin-top: 12px; }
.flash { padding: 8px 12px; border-radius: 6px; background: #e3f8e5; border: 1px solid #a3d9a5; margin: 0 0 12px; }
.flash.error { background: #fff1f1; border-color: #f5b5b5; }
.muted { color: var(--muted); }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.chart svg { width: 100%; height: 140px; display: block; }
.chart .legend { font-size: 12px; color: var(--muted); display: flex; gap: 14px; margin-top: 4px; }
.chart .legend .done::before, .chart .legend .failed::before { content: ""; display: inline-block; width: 10px; height: 10px; margin-right: 4px; border-radius: 2px; }
.chart .legend .done::before { background: var(--green); } .chart .legend .failed::before { background: var(--red); }
.pager { margin-top: 10px; }
.empty { color: var(--muted); padding: 8px 0; }
`
