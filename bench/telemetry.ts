/**
 * What tracing costs a drain, on SQLite: 20,000 jobs added with an id each inside a request's span, drained by one
 * worker of 16 slots with a no-op handler. Three ways, each in a fresh process, alternating, RUNS times:
 *
 * - `none`: no OpenTelemetry SDK registered (the API installed, as in an app that has it for other libraries);
 * - `sdk`: the SDK's tracer provider with a BatchSpanProcessor into an exporter that drops what it is given, a
 *   W3C propagator and an AsyncLocalStorage context manager, and a meter provider with a reader: every add, run
 *   and step recorded;
 *
 * Timed from the worker's start to its last handler's call. Prints the medians, and `sdk` as a share of `none`.
 *
 *   npx tsx bench/telemetry.ts [runs]
 */
import { spawnSync } from 'node:child_process'
import { context, propagation, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base'
import { configureTelemetry, defineQueue, enqueueMany, work } from '../src/index.js'
import { withSqliteDatabase } from './lib/sqlite-database.js'

const JOBS = 20_000
const BATCH = 1_000
type Mode = 'none' | 'sdk'

/** An exporter that drops every span: the cost measured is the recording's, not a network's. */
const dropping: SpanExporter = {
  export: (_spans, done) => done({ code: 0 }),
  shutdown: async () => {},
}

class Reader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

async function drain(mode: Mode): Promise<number> {
  if (mode === 'sdk') {
    if (!process.env.NO_ALS) context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
    propagation.setGlobalPropagator(new W3CTraceContextPropagator())
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] }))
    if (!process.env.NO_METRICS) configureTelemetry({ meterProvider: new MeterProvider({ readers: [new Reader()] }) })
  }
  return withSqliteDatabase(async (_client, db) => {
    const queue = defineQueue('traced')
    const request = trace.getTracer('bench').startSpan('request')
    await context.with(trace.setSpan(context.active(), request), async () => {
      for (let first = 0; first < JOBS; first += BATCH)
        enqueueMany(
          db,
          queue,
          Array.from({ length: BATCH }, (_, n) => ({ value: { n: first + n } })),
        )
    })
    request.end()
    let ran = 0
    let resolve = () => {}
    const all = new Promise<void>((done) => {
      resolve = done
    })
    const started = performance.now()
    const worker = work(
      db,
      queue,
      () => {
        if (++ran === JOBS) resolve()
      },
      { slots: 16 },
    )
    await all
    const ms = performance.now() - started
    await worker.stop()
    return (JOBS / ms) * 1_000
  })
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

if (process.argv[2] === 'child') {
  console.log(JSON.stringify(await drain(process.argv[3] as Mode)))
} else {
  const runs = Number(process.argv[2] ?? 3)
  const rates: Record<Mode, number[]> = { none: [], sdk: [] }
  for (let run = 0; run < runs; run++) {
    for (const mode of ['none', 'sdk'] as const) {
      const child = spawnSync(process.execPath, [...process.execArgv, import.meta.filename, 'child', mode], { encoding: 'utf8' })
      if (child.status !== 0) throw new Error(child.stderr)
      rates[mode].push(Number(child.stdout.trim().split('\n').at(-1)))
    }
  }
  const [none, sdk] = [median(rates.none), median(rates.sdk)]
  const shown = (values: number[]) => values.map((rate) => Math.round(rate).toLocaleString('en')).join(' / ')
  console.log(`drain 20,000 on SQLite, one worker of 16 slots, jobs/s (${runs} runs each, alternating):`)
  console.log(`  no SDK registered: ${shown(rates.none)}, median ${Math.round(none).toLocaleString('en')}`)
  console.log(
    `  SDK, batch span processor, dropping exporter, metrics: ${shown(rates.sdk)}, median ${Math.round(sdk).toLocaleString('en')}`,
  )
  console.log(`  traced / untraced: ${((sdk / none) * 100).toFixed(0)}%`)
}
