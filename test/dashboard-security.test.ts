/**
 * The mounted dashboard against requests a hostile page or a neighbour on the
 * host can make, over real sockets: through node:http and through Hono
 * (@hono/node-server), with the Host headers a browser sends after a DNS
 * name was rebound to 127.0.0.1, the cookies another local service sets, and
 * asset names that are properties of every object. On SQLite and on
 * PostgreSQL: the rules are the same, and the test names carry the dialect.
 */
import { createServer, request, type OutgoingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import { Hono } from 'hono'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { dashboard, type Dashboard, type DashboardOptions } from '../src/dashboard/index.js'
import { defineQueue, enqueue, isJobsError } from '../src/index.js'
import { DIALECTS, eachContractDb, type ContractDb } from './helpers/dialects.js'
import { addedInTrace } from './helpers/traced.js'

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

/** One HTTP request over a socket, with the headers given as they are (Host included, which fetch cannot set). */
function send(url: string, options: { method?: string; headers?: OutgoingHttpHeaders } = {}): Promise<Answer> {
  return new Promise((done, failed) => {
    const req = request(url, { method: options.method ?? 'GET', headers: options.headers ?? {} }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (body += chunk))
      res.on('end', () => done({ status: res.statusCode!, headers: res.headers, body }))
    })
    req.on('error', failed)
    req.end()
  })
}

interface Mounted {
  /** The URL of the dashboard's root, ending without a slash. */
  root: string
  port: number
  close(): Promise<void>
}

type Mount = (t: ContractDb, options?: DashboardOptions) => Promise<Mounted & { board: Dashboard }>

/** As the README mounts it on node:http: `http.createServer(dashboard(db).node).listen(port, '127.0.0.1')`. */
const nodeMount: Mount = async (t, options = {}) => {
  const board = dashboard(t.db, options)
  const server = createServer(board.node)
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening))
  const port = (server.address() as AddressInfo).port
  return {
    board,
    root: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((closed) => {
        board.close()
        server.closeAllConnections()
        server.close(() => closed())
      }),
  }
}

/** As the README mounts it in Hono: `app.mount('/jobs', dashboard(db, { basePath: '/jobs' }).fetch)`, served by @hono/node-server. */
const honoMount: Mount = async (t, options = {}) => {
  const board = dashboard(t.db, { basePath: '/jobs', ...options })
  const app = new Hono()
  app.get('/', (c) => c.text('the app'))
  app.mount('/jobs', board.fetch)
  let server: ReturnType<typeof serve> | undefined
  const port = await new Promise<number>((listening) => {
    server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => listening(info.port))
  })
  return {
    board,
    root: `http://127.0.0.1:${port}/jobs`,
    port,
    close: () =>
      new Promise<void>((closed) => {
        board.close()
        ;(server as unknown as { closeAllConnections(): void }).closeAllConnections()
        server!.close(() => closed())
      }),
  }
}

const MOUNTS: [string, Mount][] = [
  ['node:http', nodeMount],
  ['Hono', honoMount],
]

const replies = defineQueue<{ secret: string }>('replies')

describe.each(DIALECTS)('%s', (dialect) => {
  const { t } = eachContractDb(dialect)
  const on = `[${dialect}]`
  const mounted: Mounted[] = []

  beforeEach(async () => {
    await enqueue(t.db, replies, { secret: 'the user asked about their diagnosis' }, { id: 'reply:1' })
  })
  afterEach(async () => {
    await Promise.all(mounted.splice(0).map((each) => each.close()))
  })

  /** Every job's and queue's row, as stored: what an action refused must leave as it was. */
  async function dump(): Promise<unknown[]> {
    return [
      ...(await t.query(
        `select seq, queue, id, state, attempts, ${dialect === 'postgres' ? 'finished_at::text' : 'finished_at'} as finished_at from jobs_job order by seq`,
      )),
      ...(await t.query(`select name, paused from jobs_queue order by name`)),
    ]
  }

  const state = async (id: string) => (await t.job('replies', id))?.state

  async function mount(how: Mount, options?: DashboardOptions): Promise<Mounted> {
    const one = await how(t, options)
    mounted.push(one)
    return one
  }

  describe.each(MOUNTS)('mounted through %s', (_name, how) => {
    test(`${on} a request addressed to a name that is not loopback is refused with 421: no job data, no action`, async () => {
      const board = await mount(how)
      const evil = `evil.example:${board.port}`
      const page = await send(`${board.root}/queues/replies/jobs/${encodeURIComponent('reply:1')}`, { headers: { host: evil } })
      expect(page.status).toBe(421)
      expect(page.body).toContain(
        'not to evil.example. To serve it under that name, list the name in the dashboard&#39;s allowedHosts option',
      )
      expect(page.body).not.toContain('reply:1')
      expect(page.body).not.toContain('diagnosis')
      for (const path of [
        '/',
        '/queues/replies',
        `/events?view=job&queue=replies&id=${encodeURIComponent('reply:1')}`,
        '/assets/dashboard.js',
      ]) {
        expect((await send(`${board.root}${path}`, { headers: { host: evil } })).status, path).toBe(421)
      }
      // What a page of the rebound name sends: its own origin, which matches the Host it used.
      const before = await dump()
      const action = await send(`${board.root}/queues/replies/jobs/${encodeURIComponent('reply:1')}/cancel`, {
        method: 'POST',
        headers: { host: evil, origin: `http://${evil}`, 'hx-request': 'true' },
      })
      expect(action.status).toBe(421)
      expect(
        (
          await send(`${board.root}/queues/replies/pause`, {
            method: 'POST',
            headers: { host: evil, origin: `http://${evil}`, 'hx-request': 'true' },
          })
        ).status,
      ).toBe(421)
      expect(await state('reply:1')).toBe('waiting')
      expect(await dump()).toEqual(before)
      // The refusal keeps the dashboard's security headers.
      expect(action.headers['x-frame-options']).toBe('DENY')
    })

    test(`${on} loopback names and addresses are answered, with any port`, async () => {
      const board = await mount(how)
      for (const host of [
        `127.0.0.1:${board.port}`,
        `localhost:${board.port}`,
        'LocalHost',
        `jobs.localhost:${board.port}`,
        '127.10.0.200:80',
        `[::1]:${board.port}`,
        '[::1]',
      ]) {
        const page = await send(`${board.root}/queues/replies/jobs/${encodeURIComponent('reply:1')}`, { headers: { host } })
        expect(page.status, host).toBe(200)
        expect(page.body).toContain('diagnosis')
      }
      for (const host of ['localhost.evil.example', '127.0.0.1.evil.example', '127.0.0.1x', 'evil.example', '[::2]', '[::ffff:7f00:1]']) {
        expect((await send(`${board.root}/`, { headers: { host } })).status, host).toBe(421)
      }
      const action = await send(`${board.root}/queues/replies/jobs/${encodeURIComponent('reply:1')}/cancel`, {
        method: 'POST',
        headers: { host: `localhost:${board.port}`, origin: `http://localhost:${board.port}`, 'hx-request': 'true' },
      })
      expect(action.status).toBe(200)
      expect(await state('reply:1')).toBe('canceled')
    })

    test(`${on} allowedHosts lets the hosts it names in, by name, whatever the case and port`, async () => {
      const board = await mount(how, { allowedHosts: ['jobs.internal', '.ops.example', 'pinned.example:8443'] })
      for (const host of [`jobs.internal:${board.port}`, 'JOBS.Internal', 'ops.example', 'a.b.ops.example:9000', 'pinned.example:8443']) {
        expect((await send(`${board.root}/queues/replies`, { headers: { host } })).status, host).toBe(200)
      }
      for (const host of [
        `evil.example:${board.port}`,
        'jobs.internal.evil.example',
        'notops.example',
        'pinned.example',
        `pinned.example:${board.port}`,
      ]) {
        expect((await send(`${board.root}/queues/replies`, { headers: { host } })).status, host).toBe(421)
      }
      const action = await send(`${board.root}/queues/replies/jobs/${encodeURIComponent('reply:1')}/cancel`, {
        method: 'POST',
        headers: { host: `jobs.internal:${board.port}`, origin: `http://jobs.internal:${board.port}`, 'hx-request': 'true' },
      })
      expect(action.status).toBe(200)
      expect(await state('reply:1')).toBe('canceled')
    })

    test(`${on} a mount with a token answers any host that brings the token, and no host without it`, async () => {
      const token = 'a-long-enough-secret'
      const board = await mount(how, { token })
      const evil = `jobs.example.com:${board.port}`
      const page = await send(`${board.root}/queues/replies/jobs/${encodeURIComponent('reply:1')}`, {
        headers: { host: evil, authorization: `Bearer ${token}` },
      })
      expect(page.status).toBe(200)
      expect(page.body).toContain('diagnosis')
      const bare = await send(`${board.root}/queues/replies/jobs/${encodeURIComponent('reply:1')}`, { headers: { host: evil } })
      expect(bare.status).toBe(401)
      expect(bare.body).not.toContain('diagnosis')
      expect(
        (
          await send(`${board.root}/queues/replies/jobs/${encodeURIComponent('reply:1')}/cancel`, {
            method: 'POST',
            headers: { host: evil, 'hx-request': 'true' },
          })
        ).status,
      ).toBe(401)
      expect(await state('reply:1')).toBe('waiting')
    })

    test(`${on} the token cookie is named for its dashboard: another dashboard or service on the host does not lock the user out`, async () => {
      const first = await mount(how, { token: 'the-first-dashboard-secret' })
      const second = await mount(how, { token: 'the-second-dashboard-secret' })
      const cookieOf = async (board: Mounted, token: string) => {
        const entry = await send(`${board.root}/queues/replies?state=waiting&token=${token}`)
        expect(entry.status).toBe(303)
        expect(entry.headers.location).toBe(`${board.root.replace(/^http:\/\/[^/]+/, '')}/queues/replies?state=waiting`)
        const cookie = (entry.headers['set-cookie'] as string[])[0]!
        expect(cookie).toMatch(/^drizzle_jobs_token_[0-9a-f]{12}=[^;]+; Path=\/[^;]*; HttpOnly; SameSite=Strict$/)
        return cookie.split(';')[0]!
      }
      const one = await cookieOf(first, 'the-first-dashboard-secret')
      const two = await cookieOf(second, 'the-second-dashboard-secret')
      expect(one.split('=')[0]).not.toBe(two.split('=')[0])
      // A browser sends every cookie of the host to every port; one another service set comes along too.
      const jar = [`drizzle_jobs_token=another-service`, two, one, 'drizzle_jobs_token_000000000000=x'].join('; ')
      for (const board of [first, second]) {
        const page = await send(`${board.root}/queues/replies`, { headers: { cookie: jar } })
        expect(page.status).toBe(200)
        expect((await send(`${board.root}/queues/replies`, { headers: { cookie: 'drizzle_jobs_token=another-service' } })).status).toBe(401)
      }
    })

    test(`${on} asset names that are properties of every object are not found`, async () => {
      const board = await mount(how)
      for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', '__defineGetter__']) {
        const answer = await send(`${board.root}/assets/${name}`)
        expect(answer.status, name).toBe(404)
      }
      expect((await send(`${board.root}/assets/dashboard.css`)).status).toBe(200)
    })
  })

  describe('dashboard options', () => {
    test(`${on} allowedHosts must be an array of host names`, () => {
      for (const allowedHosts of [
        'jobs.internal',
        ['jobs.internal', 7],
        [''],
        ['http://jobs.internal'],
        ['jobs.internal/'],
        ['jobs internal'],
        ['jobs.internal:port'],
        ['jobs.internal:99999'],
        null,
        [null],
      ]) {
        let thrown: unknown
        try {
          dashboard(t.db, { allowedHosts } as unknown as DashboardOptions).close()
        } catch (error) {
          thrown = error
        }
        expect(isJobsError(thrown, 'INVALID_OPTION'), JSON.stringify(allowedHosts)).toBe(true)
        expect((thrown as Error).message).toMatch(/^allowedHosts/)
      }
      dashboard(t.db, { allowedHosts: [] }).close()
      dashboard(t.db, {
        allowedHosts: ['jobs.internal', 'JOBS.example.com:8080', '.ops.example', '10.0.0.7', '[fd00::7]:4580', 'jobs.internal.'],
      }).close()
    })

    test(`${on} traceUrl must be a function`, () => {
      for (const traceUrl of ['https://grafana.example.com/explore?traceId=', null, {}]) {
        let thrown: unknown
        try {
          dashboard(t.db, { traceUrl } as unknown as DashboardOptions).close()
        } catch (error) {
          thrown = error
        }
        expect(isJobsError(thrown, 'INVALID_OPTION'), JSON.stringify(traceUrl)).toBe(true)
        expect((thrown as Error).message).toMatch(/^traceUrl/)
      }
    })
  })

  describe('trace links', () => {
    /** A page of a dashboard with these options, through its fetch handler. */
    async function pageOf(path: string, options?: DashboardOptions): Promise<{ headers: Headers; body: string }> {
      const board = dashboard(t.db, options)
      try {
        const answer = await board.fetch(new Request(`http://127.0.0.1${path}`))
        expect(answer.status).toBe(200)
        return { headers: answer.headers, body: await answer.text() }
      } finally {
        board.close()
      }
    }

    test(`${on} a job added in a trace shows its trace id: a link to the trace in a new tab with traceUrl, text without, and text where traceUrl answers no http or https URL (javascript: included); the security headers stay the same`, async () => {
      const traceId = await addedInTrace(() => enqueue(t.db, replies, { secret: 'traced' }, { id: 'reply:traced' }))
      const path = `/queues/replies/jobs/${encodeURIComponent('reply:traced')}`
      const asText = `<dt>trace</dt><dd data-trace><code>${traceId}</code></dd>`

      const plain = await pageOf(path)
      expect(plain.body).toContain(asText)
      expect(plain.body).not.toContain('data-trace-link')
      // A job added outside a trace shows no trace at all.
      expect((await pageOf(`/queues/replies/jobs/${encodeURIComponent('reply:1')}`)).body).not.toContain('data-trace')

      const asked: string[] = []
      const grafana = await pageOf(path, {
        traceUrl: (id) => {
          asked.push(id)
          return `https://grafana.example.com/explore?traceId=${id}&from=now-1h`
        },
      })
      expect(asked).toEqual([traceId])
      expect(grafana.body).toContain(
        `<dd data-trace><a href="https://grafana.example.com/explore?traceId=${traceId}&amp;from=now-1h" target="_blank" rel="noopener noreferrer" data-trace-link><code>${traceId}</code></a></dd>`,
      )
      const jaeger = await pageOf(path, { traceUrl: (id) => `http://localhost:16686/trace/${id}` })
      expect(jaeger.body).toContain(
        `<a href="http://localhost:16686/trace/${traceId}" target="_blank" rel="noopener noreferrer" data-trace-link>`,
      )
      for (const header of ['content-security-policy', 'referrer-policy', 'x-content-type-options', 'x-frame-options']) {
        expect(grafana.headers.get(header), header).toBe(plain.headers.get(header))
      }

      // A link's address is the URL as parsed and escaped: markup in it stays text.
      const markup = await pageOf(path, { traceUrl: (id) => `https://traces.example/${id}?q="><script>alert(1)</script>` })
      expect(markup.body).toContain(`<a href="https://traces.example/${traceId}?q=%22%3E%3Cscript%3Ealert(1)%3C/script%3E" target="_blank"`)
      expect(markup.body).not.toContain('<script>alert')

      for (const answer of [
        'javascript:alert(document.cookie)',
        ' JavaScript:alert(document.cookie)',
        'java\tscript:alert(document.cookie)',
        'data:text/html,<script>alert(1)</script>',
        'vbscript:msgbox(1)',
        'ftp://traces.example/',
        `/trace/${traceId}`,
        '',
        42,
        undefined,
      ]) {
        const page = await pageOf(path, { traceUrl: () => answer as string })
        expect(page.body, String(answer)).toContain(asText)
        expect(page.body, String(answer)).not.toContain('data-trace-link')
        expect(page.body.toLowerCase(), String(answer)).not.toMatch(/script:|data:text|alert\(/)
      }
    })
  })
})
