/**
 * The rows of the benchmark table (the issue "Speed where users feel it",
 * with the figures of issue 4 it keeps), what each one measures, and the
 * targets, checked on the medians of the same run.
 */
import { formatRatio, formatValue, type Results, type RowSpec, type Subject, type Target, type Unit } from './lib/report.js'

/**
 * BENCH_SMALL=1 makes every count small, for a quick check that the rows
 * run (a small run never writes bench/RESULTS.md or the docs).
 */
export const SMALL = process.env.BENCH_SMALL === '1'

export const COUNTS = {
  appTransactions: SMALL ? 2_000 : 20_000,
  appWarmup: SMALL ? 200 : 1_000,
  batchTotal: SMALL ? 10_000 : 100_000,
  batchSize: 1_000,
  debounceAdds: SMALL ? 1_000 : 10_000,
  debounceBurst: 100,
  drain: SMALL ? 2_000 : 20_000,
  warmJobs: SMALL ? 200 : 1_000,
  slots: [1, 16, 64],
  procs: [2, 4],
  procSlots: 16,
  telemetrySlots: 16,
  batchSlots: 16,
  scaleWaiting: SMALL ? 50_000 : 1_000_000,
  scaleDrain: SMALL ? 2_000 : 20_000,
  scaleSlots: 16,
  pickupSamples: SMALL ? 10 : 100,
  pickupGapMs: 50,
  peerPickupSamples: SMALL ? 2 : 20,
  peerPickupGapMs: 1_000,
  /** liteque drains about 700 jobs/s (its dequeue sorts every waiting row): its drains stop after this long. */
  litequeCapMs: SMALL ? 2_000 : 5_000,
  watchedJobs: SMALL ? 200 : 2_000,
  watchedSlots: 16,
  limitProcs: 4,
  limit: 4,
  limitJobs: SMALL ? 200 : 2_000,
  limitHandlerMs: 50,
  /** BullMQ's template of 1,000,000 waiting jobs is filled by `addBulk`; past this its scale row says n/a. */
  bullmqScaleFillMs: 240_000,
} as const

const n = (count: number): string => count.toLocaleString('en-US')

/** The ideal time of the concurrency row: every job's handler back to back, `limit` at a time. */
export const LIMIT_IDEAL_S = (COUNTS.limitJobs * COUNTS.limitHandlerMs) / COUNTS.limit / 1000

const LITEQUE_NO_TX = "liteque's enqueue is async and writes through its own Drizzle handle: it cannot join the app's transaction"
const LITEQUE_NO_BATCH = 'liteque has no batch add, and its enqueue cannot join a transaction'
const BULLMQ_NO_TX = "BullMQ's jobs live in Redis: its add cannot join the app's SQL transaction"
const NO_AHEAD = 'no call answers how many jobs are ahead of a given one'
const FLOOR_NO_WORKER = 'the floor is a loop of statements: it has no idle worker to wake'
const NO_LIMIT = (peer: string): string =>
  `${peer} has no concurrency limit across processes: nothing would hold its workers to ${COUNTS.limit} at once`
const FLOOR_NO_LIMIT = 'the floor is a loop of statements: it has no handler and no concurrency limit'
const NO_WATCH = 'no call follows one job and hands its consumer each change'
const BULLMQ_NO_WATCH = "BullMQ's QueueEvents streams a whole queue's events to every listener, not one job's snapshots to its consumer"
const BULLMQ_LIMIT = `BullMQ: \`queue.setGlobalConcurrency(${COUNTS.limit})\`, its limit across every worker and process (6.7 has it), with ${COUNTS.limitProcs} worker processes of \`concurrency: ${COUNTS.limit}\` each`

function ours(results: Results, key: string): number | undefined {
  return results.median(key, 'drizzle-jobs')
}

function percent(share: number): string {
  return `${(share * 100).toFixed(0)}%`
}

/** At least `times` × `peer`'s median in the same row (a throughput). */
function atLeastPeer(key: string, peer: Subject, peerName: string, times = 1): Target {
  return {
    text: `≥ ${times.toFixed(1)}× ${peerName}`,
    check: (results) => {
      const value = ours(results, key)
      const other = results.median(key, peer)
      return value === undefined || other === undefined
        ? undefined
        : { met: value >= times * other, detail: `${formatRatio(value / other)} ${peerName}` }
    },
  }
}

function below(key: string, limitMs: number): Target {
  return {
    text: `< ${limitMs} ms`,
    check: (results) => {
      const value = ours(results, key)
      return value === undefined ? undefined : { met: value < limitMs, detail: `${formatValue(value, 'ms')} ms` }
    },
  }
}

function maxRunning(key: string): (results: Results, subject: Subject) => string {
  return (results, subject) => {
    const max = results.median(`${key}-max`, subject)
    return max === undefined ? '' : `(max ${max} running)`
  }
}

/** The detail (each process's share, snapshots…) of the run whose value is the median. */
function medianDetail(key: string): (results: Results, subject: Subject) => string {
  return (results, subject) => {
    const detail = results.medianSample(key, subject)?.detail
    return detail ? `(${detail})` : ''
  }
}

/** At least `share` of `key`'s median, drizzle-jobs beside itself (a throughput). */
function shareOf(key: string, of: string, share: number, name: string): Target {
  return {
    text: `≥ ${percent(share)} of ${name}`,
    check: (results) => {
      const value = ours(results, key)
      const other = ours(results, of)
      return value === undefined || other === undefined
        ? undefined
        : { met: value >= share * other, detail: `${percent(value / other)} of ${name}` }
    },
  }
}

const TELEMETRY = `process ${n(COUNTS.drain)}, no-op handler, slots ${COUNTS.telemetrySlots}, each job with a request's trace context`

const telemetryRows: RowSpec[] = [
  {
    key: 'telemetry-absent',
    figure: `${TELEMETRY}: \`@opentelemetry/api\` not installed`,
    unit: 'jobs/s',
    better: 'higher',
    noRatio: true,
    only: ['drizzle-jobs'],
  },
  {
    key: 'telemetry-api',
    figure: `${TELEMETRY}: the API installed, no SDK registered`,
    unit: 'jobs/s',
    better: 'higher',
    noRatio: true,
    only: ['drizzle-jobs'],
    target: shareOf('telemetry-api', 'telemetry-absent', 0.95, 'not installed'),
  },
  {
    key: 'telemetry-sdk',
    figure: `${TELEMETRY}: the SDK records every run (batch span processor, an exporter that drops spans, metrics)`,
    unit: 'jobs/s',
    better: 'higher',
    noRatio: true,
    only: ['drizzle-jobs'],
    target: shareOf('telemetry-sdk', 'telemetry-api', 0.7, 'no SDK'),
  },
  {
    key: 'telemetry-sampled',
    figure: `${TELEMETRY}: the same SDK, one request in ten sampled at its root (the parent-based sampler follows it)`,
    unit: 'jobs/s',
    better: 'higher',
    noRatio: true,
    only: ['drizzle-jobs'],
    extra: (results) => {
      const sampled = ours(results, 'telemetry-sampled')
      const none = ours(results, 'telemetry-api')
      return sampled === undefined || none === undefined ? '' : `(${percent(sampled / none)} of no SDK)`
    },
  },
]

const processesRows = COUNTS.procs.map(
  (procs): RowSpec => ({
    key: `processes-${procs}`,
    figure: `process ${n(COUNTS.drain)} across ${procs} worker processes on one database (slots ${COUNTS.procSlots} each)`,
    unit: 'jobs/s',
    better: 'higher',
    extra: maxRunning(`processes-${procs}`),
    target: {
      text: `≥ 1.0× one process (slots ${COUNTS.procSlots})`,
      check: (results) => {
        const value = ours(results, `processes-${procs}`)
        const one = ours(results, `process-${COUNTS.procSlots}`)
        return value === undefined || one === undefined
          ? undefined
          : { met: value >= one, detail: `${formatRatio(value / one)} one process` }
      },
    },
  }),
)

const limitTarget: Target = {
  text: `within 5% of ${LIMIT_IDEAL_S.toFixed(1)} s, never more than ${COUNTS.limit} at once, each process 15–35% of the jobs`,
  check: (results) => {
    const seconds = ours(results, 'limit')
    const atOnce = results.max('limit-at-once', 'drizzle-jobs')
    const fewest = results.median('limit-share-min', 'drizzle-jobs')
    const most = results.median('limit-share-max', 'drizzle-jobs')
    if (seconds === undefined || atOnce === undefined || fewest === undefined || most === undefined) return undefined
    const off = seconds / LIMIT_IDEAL_S - 1
    return {
      met: Math.abs(off) <= 0.05 && atOnce <= COUNTS.limit && fewest >= 0.15 && most <= 0.35,
      detail: `${off >= 0 ? '+' : ''}${(off * 100).toFixed(1)}% of the ideal, at most ${atOnce} at once in any run, shares from ${percent(fewest)} to ${percent(most)} (medians)`,
    }
  },
}

export const ROWS: readonly RowSpec[] = [
  {
    key: 'enqueue-app',
    figure: 'enqueue, one job per app transaction',
    unit: 'tx/s',
    better: 'higher',
    na: { liteque: LITEQUE_NO_TX, bullmq: BULLMQ_NO_TX },
  },
  {
    key: 'enqueue-app-only',
    figure: 'the same app transaction without a job',
    unit: 'tx/s',
    better: 'higher',
    noRatio: true,
    na: { liteque: LITEQUE_NO_TX, bullmq: BULLMQ_NO_TX },
  },
  {
    key: 'enqueue-overhead',
    figure: 'time `enqueue` adds to an app transaction (with the job − without, per transaction)',
    unit: 'µs',
    better: 'lower',
    na: { liteque: LITEQUE_NO_TX, bullmq: BULLMQ_NO_TX },
    target: {
      text: "≤ plainjob's",
      check: (results) => {
        const value = ours(results, 'enqueue-overhead')
        const other = results.median('enqueue-overhead', 'plainjob')
        return value === undefined || other === undefined
          ? undefined
          : { met: value <= other, detail: `${formatValue(value, 'µs')} µs against ${formatValue(other, 'µs')} µs` }
      },
    },
  },
  {
    key: 'enqueue-batch',
    figure: `enqueue, batch: ${n(COUNTS.batchTotal)} in transactions of ${n(COUNTS.batchSize)}`,
    unit: 'jobs/s',
    better: 'higher',
    na: { liteque: LITEQUE_NO_BATCH },
    notes: {
      bullmq: `BullMQ: \`queue.addBulk\` of ${n(COUNTS.batchSize)} jobs a call, one pipeline of its add script per job: each job is added atomically, not the ${n(COUNTS.batchSize)} together`,
    },
    target: atLeastPeer('enqueue-batch', 'plainjob', 'plainjob'),
  },
  {
    key: 'debounce',
    figure: `enqueue: ${n(COUNTS.debounceAdds)} adds, one per transaction, debounced in bursts of ${COUNTS.debounceBurst} (each burst one job, run once with its last value)`,
    unit: 'adds/s',
    better: 'higher',
    noRatio: true,
    only: ['drizzle-jobs'],
    extra: (results) => {
      const debounced = ours(results, 'debounce')
      const plain = ours(results, 'debounce-plain')
      return debounced === undefined || plain === undefined ? '' : `(${percent(debounced / plain)} of as many plain adds)`
    },
  },
  ...COUNTS.slots.map(
    (slots): RowSpec => ({
      key: `process-${slots}`,
      figure: `process ${n(COUNTS.drain)}, no-op handler, one worker, slots ${slots}`,
      unit: 'jobs/s',
      better: 'higher',
      floorFrom: 'floor-drain-batched',
      ...(slots === 1 ? { target: atLeastPeer('process-1', 'plainjob', 'plainjob') } : {}),
    }),
  ),
  {
    key: 'process-batch',
    figure: `process ${n(COUNTS.drain)}, a no-op batch handler of ${COUNTS.batchSlots} jobs a call, slots ${COUNTS.batchSlots}`,
    unit: 'jobs/s',
    better: 'higher',
    noRatio: true,
    only: ['drizzle-jobs'],
    extra: (results) => {
      const batch = ours(results, 'process-batch')
      const plain = ours(results, `process-${COUNTS.batchSlots}`)
      return batch === undefined || plain === undefined ? '' : `(${percent(batch / plain)} of a handler per job)`
    },
  },
  ...processesRows,
  ...telemetryRows,
  {
    key: 'limit',
    figure: `${COUNTS.limitProcs} processes, \`concurrency: ${COUNTS.limit}\` across them, ${COUNTS.limitHandlerMs} ms handler, ${n(COUNTS.limitJobs)} jobs: time to drain (ideal ${LIMIT_IDEAL_S.toFixed(1)} s)`,
    unit: 's',
    better: 'lower',
    extra: medianDetail('limit'),
    na: { plainjob: NO_LIMIT('plainjob'), liteque: `${NO_LIMIT('liteque')} (its \`concurrency\` is one Runner's)`, floor: FLOOR_NO_LIMIT },
    notes: { bullmq: BULLMQ_LIMIT },
    target: limitTarget,
  },
  {
    key: 'watch-unwatched',
    figure: `drain ${n(COUNTS.watchedJobs)}, no-op handler, slots ${COUNTS.watchedSlots}, no watcher`,
    unit: 'jobs/s',
    better: 'higher',
    noRatio: true,
    na: { plainjob: NO_WATCH, liteque: NO_WATCH, bullmq: BULLMQ_NO_WATCH, floor: NO_WATCH },
  },
  {
    key: 'watch-watched',
    figure: 'the same drain, every job watched by one `watch()` consumer (a chat server streaming each reply)',
    unit: 'jobs/s',
    better: 'higher',
    noRatio: true,
    na: { plainjob: NO_WATCH, liteque: NO_WATCH, bullmq: BULLMQ_NO_WATCH, floor: NO_WATCH },
    target: {
      text: '≥ 50% of the unwatched rate',
      check: (results) => {
        const value = ours(results, 'watch-watched')
        const unwatched = ours(results, 'watch-unwatched')
        return value === undefined || unwatched === undefined
          ? undefined
          : { met: value >= 0.5 * unwatched, detail: `${percent(value / unwatched)} of unwatched` }
      },
    },
  },
  {
    key: 'watch-snapshots',
    figure: 'snapshots each consumer received in the watched drain, per job',
    unit: 'snapshots',
    better: 'lower',
    noRatio: true,
    na: { plainjob: NO_WATCH, liteque: NO_WATCH, bullmq: BULLMQ_NO_WATCH, floor: NO_WATCH },
  },
  {
    key: 'pickup-same-median',
    figure: 'pickup latency, same process, median',
    unit: 'ms',
    better: 'lower',
    na: { floor: FLOOR_NO_WORKER },
    target: below('pickup-same-median', 1),
  },
  { key: 'pickup-same-p99', figure: 'pickup latency, same process, p99', unit: 'ms', better: 'lower', na: { floor: FLOOR_NO_WORKER } },
  {
    key: 'pickup-other-median',
    figure: 'pickup latency, other process, median',
    unit: 'ms',
    better: 'lower',
    na: { floor: FLOOR_NO_WORKER },
    target: below('pickup-other-median', 30),
  },
  {
    key: 'pickup-other-p99',
    figure: 'pickup latency, other process, p99',
    unit: 'ms',
    better: 'lower',
    na: { floor: FLOOR_NO_WORKER },
    target: below('pickup-other-p99', 80),
  },
  {
    key: 'scale-process',
    figure: `process ${n(COUNTS.scaleDrain)} with ${n(COUNTS.scaleWaiting)} waiting (slots ${COUNTS.scaleSlots})`,
    unit: 'jobs/s',
    better: 'higher',
    target: {
      text: `≥ 80% of the empty queue (process, slots ${COUNTS.scaleSlots})`,
      check: (results) => {
        const value = ours(results, 'scale-process')
        const empty = ours(results, `process-${COUNTS.scaleSlots}`)
        return value === undefined || empty === undefined
          ? undefined
          : { met: value >= 0.8 * empty, detail: `${percent(value / empty)} of empty` }
      },
    },
  },
  {
    key: 'scale-ahead',
    figure: `\`ahead\` of the last of ${n(COUNTS.scaleWaiting)} waiting, median`,
    unit: 'ms',
    better: 'lower',
    na: { plainjob: NO_AHEAD, liteque: NO_AHEAD, bullmq: NO_AHEAD },
    target: below('scale-ahead', 5),
  },
  {
    key: 'floor-lifecycle-per-step',
    figure: `floor: add, claim, complete ${n(COUNTS.drain)}, one transaction per step`,
    unit: 'jobs/s',
    better: 'higher',
    noRatio: true,
    only: ['floor'],
  },
  {
    key: 'floor-lifecycle-batched',
    figure: `floor: add (one per transaction), claim and complete 100 per transaction, ${n(COUNTS.drain)}`,
    unit: 'jobs/s',
    better: 'higher',
    noRatio: true,
    only: ['floor'],
  },
  {
    key: 'floor-drain-per-step',
    figure: `floor: claim and complete ${n(COUNTS.drain)} waiting, one transaction per step`,
    unit: 'jobs/s',
    better: 'higher',
    noRatio: true,
    only: ['floor'],
  },
  {
    key: 'floor-drain-batched',
    figure: `floor: claim and complete ${n(COUNTS.drain)} waiting, 100 per transaction`,
    unit: 'jobs/s',
    better: 'higher',
    noRatio: true,
    only: ['floor'],
  },
]

/** The units of the figures kept beside a row (most running, shares), for the list of every run. */
export const SIDE_UNITS: Record<string, Unit> = {
  ...Object.fromEntries(COUNTS.procs.map((procs) => [`processes-${procs}-max`, 'jobs' as const])),
  'debounce-plain': 'adds/s',
  'limit-at-once': 'jobs',
  'limit-share-min': '%',
  'limit-share-max': '%',
}

/** How each row is measured: printed under the table. */
export const METHOD = `Each figure is the median of its runs (every run is listed at the end of bench/RESULTS.md); every run is a fresh
node process on fresh database files (WAL, synchronous = NORMAL, the driver's default 5 s busy timeout), after a
warm-up of the same work on a throwaway file. BullMQ's runs each get a fresh private Redis server (append-only file
synced every second), and warm up on a throwaway queue of it. Runs of different libraries are interleaved, so that a
noisy moment of the shared machine does not fall on one library only.

- **enqueue, one job per app transaction**: ${n(COUNTS.appTransactions)} transactions, each inserting an app row with Drizzle's query
  builder and adding its job, for drizzle-jobs as a user writes it:
  \`db.transaction((tx) => { tx.insert(messages).values(row).run(); enqueue(tx, queue, { messageId }) })\`;
  for plainjob \`queue.add(...)\` inside the same Drizzle transaction (same connection). **The same app transaction
  without a job** is measured in the same process, and **the time \`enqueue\` adds** is the difference, per
  transaction: (time of the ${n(COUNTS.appTransactions)} with the job − time of the ${n(COUNTS.appTransactions)} without) / ${n(COUNTS.appTransactions)}, in µs, each run's
  own pair. The floor's app row and job are two prepared inserts in one transaction.
- **enqueue, batch**: ${n(COUNTS.batchTotal)} jobs through \`enqueueMany(db, queue, items)\` (plainjob: \`queue.addMany\`), ${n(COUNTS.batchSize)} per
  transaction; the floor: one prepared insert per job, ${n(COUNTS.batchSize)} per transaction; BullMQ: \`queue.addBulk\` of ${n(COUNTS.batchSize)}
  jobs a call, each call awaited.
- **process**: a copy of a file holding ${n(COUNTS.drain)} waiting jobs, drained by one worker with a no-op async handler: from
  the worker's start until every job is recorded done (drizzle-jobs: until \`worker.stop()\` has written the last
  ends). \`slots\` is drizzle-jobs' option, plainjob's number of \`defineWorker\`s on one queue (each runs one job at a
  time), liteque's \`concurrency\`, BullMQ's Worker \`concurrency\`. BullMQ has no file to copy: the run adds the
  ${n(COUNTS.drain)} to its fresh server with \`addBulk\` first, and the time runs from \`worker.run()\` to the ${n(COUNTS.drain)}th \`completed\`
  event. The floor column is the floor's batched drain.
- **across processes**: the same ${n(COUNTS.drain)} drained by ${COUNTS.procs.join(' and by ')} worker processes started together, ${COUNTS.procSlots} slots each, on one
  database (BullMQ: one Redis); the parent watches it every 2 ms from its own connection and reports the most jobs
  it saw in the running state at once. Held to drizzle-jobs' own one process at ${COUNTS.procSlots} slots: more processes should
  not drain slower than one.
- **concurrency across processes**: ${n(COUNTS.limitJobs)} jobs of a queue that allows ${COUNTS.limit} running at once across every process
  (drizzle-jobs: \`defineQueue(name, { concurrency: ${COUNTS.limit} })\`; BullMQ: \`queue.setGlobalConcurrency(${COUNTS.limit})\`), drained by
  ${COUNTS.limitProcs} worker processes of ${COUNTS.limit} slots each (so that only the limit holds them back), each handler sleeping
  ${COUNTS.limitHandlerMs} ms. The time runs from the workers' start to the last job's end, seen by the parent's 2 ms watch; the
  ideal is ${n(COUNTS.limitJobs)} × ${COUNTS.limitHandlerMs} ms / ${COUNTS.limit} = ${LIMIT_IDEAL_S.toFixed(1)} s. "At once" is the larger of the most handlers
  that overlapped (from each handler's start and end on the shared monotonic clock) and the most jobs the parent
  saw running; each process's share is the jobs its handler ran. drizzle-jobs' and BullMQ's runs go side by side,
  started together once both have warmed up: their handlers sleep, so neither needs the machine to itself.
- **watched drain** (drizzle-jobs): a file of ${n(COUNTS.watchedJobs)} waiting jobs drained at ${COUNTS.watchedSlots} slots, as a chat server does
  while it streams each reply to its page: every job has one \`watch(db, queue, id)\` consumer in the worker's
  process, on its connection, created (and its first snapshot read) before the drain. The time runs until every
  job is done and every consumer has seen its job end. The same drain without a watcher runs in the same process,
  in turns first or second; **snapshots per job** counts what the consumers received, their first snapshot
  included.
- **pickup latency**: an idle worker at the default poll interval (drizzle-jobs 50 ms, plainjob and liteque
  1,000 ms; BullMQ's worker waits on a blocking pop, without polling); one job is added after a random wait in
  [0, poll interval), and the time runs from the add's return (its commit) to the handler's start, on
  CLOCK_MONOTONIC, which all processes of the machine share. BullMQ's \`queue.add\` returns after Redis answers, and
  its worker may hold the job by then, so its figure can be near zero. drizzle-jobs and BullMQ: ${COUNTS.pickupSamples} samples a
  run, 50 ms apart at most, alone on the machine; plainjob and liteque: ${COUNTS.peerPickupSamples} samples a run (each takes a poll
  interval), their four series side by side since they mostly sleep.
- **scale**: a copy of a file holding ${n(COUNTS.scaleWaiting)} waiting jobs (added by each library's batch add; liteque's rows by
  one prepared insert of the row its \`enqueue\` writes, since its \`enqueue\` would take minutes; BullMQ: a server
  filled once by \`addBulk\`, its append-only file rewritten and copied for each run, which loads it before the
  clock starts). First \`ahead\` of the last job: the time of \`getJob(db, queue, id)\` (the floor: the same two
  statements by hand), 200 calls; then ${n(COUNTS.scaleDrain)} of them drained, slots ${COUNTS.scaleSlots}.
- **floor**: hand-written prepared better-sqlite3 statements on the least schema with the same guarantees (ids
  unique per queue, a partial claim index, a lease row per running job): add; claim with lease
  (\`update … where seq in (select … order by priority, run_at, seq limit n) returning …\` plus the lease insert);
  complete (lease delete fenced by owner and attempt, then the state update). Per step: one transaction each;
  batched: claims and completions 100 jobs per transaction. The full lifecycle adds each job in its own
  transaction either way; the drains start from a file of ${n(COUNTS.drain)} waiting jobs, as the process rows do.`

/** Each peer's configuration, from its own README. */
export const CONFIGURATIONS = `- **drizzle-jobs** (this checkout's \`src/\`, run by tsx): the README's setup (\`new Database(file)\`, WAL,
  synchronous = NORMAL, \`drizzle(client, { schema })\`, tables by the project's drizzle-kit migrations);
  \`defineQueue('bench')\` with its defaults (the concurrency row: \`{ concurrency: ${COUNTS.limit} }\`); \`work(db, queue, handler, { slots })\`,
  every other option at its default (poll interval 50 ms, lease 30 s).
- **plainjob 0.0.14**: as its README and its own benchmark: \`defineQueue({ connection: better(new Database(file)),
  logger })\`, which sets WAL, synchronous = 1 (NORMAL) and busy_timeout = 5000 itself, with info and debug logging
  off as its benchmark does (its default logger, console, prints a line per job); \`defineWorker(type, handler,
  { queue, logger })\` once per slot, at the default poll interval (1,000 ms).
- **liteque 0.8.0** (bench/liteque, on better-sqlite3 11.9.1, since its worker crashes on 12): as its README:
  \`buildDBClient(file, { runMigrations: true })\` (WAL, synchronous = NORMAL, 64 MiB cache, temp_store = MEMORY),
  \`new SqliteQueue(name, db, { defaultJobArgs: { numRetries: 2 }, keepFailedJobs: false })\`, \`new Runner(queue,
  { run }, { concurrency: slots, pollIntervalMs: 1000, timeoutSecs: 60 })\` without the README's zod validator. Its
  dequeue orders by (priority, createdAt), which no index covers, so each claim sorts every waiting row: its drains
  stop after ${COUNTS.litequeCapMs / 1000} s (a full drain of 20,000 takes about 30 s), and the figure is jobs done over that time.
- **BullMQ 6.7.6** with ioredis 6.1.0, on Debian's redis-server (a private server per run on a free loopback port,
  \`--appendonly yes --appendfsync everysec --save ""\`: the append-only file written at once and synced every second,
  no RDB snapshots; the durability closest to SQLite in WAL with synchronous = NORMAL, where a crash of the machine
  may lose the last moments of commits and a crash of the process loses none). As its documentation shows: one
  \`new Redis({ host, port, maxRetriesPerRequest: null })\` per process, shared by \`new Queue(name, { connection })\`
  and \`new Worker(name, processor, { connection, concurrency: slots })\` (which duplicates it for its blocking pop);
  every other option at its default: completed jobs kept (\`removeOnComplete\` off, as drizzle-jobs keeps done jobs
  until its retention prunes them), lock 30 s renewed at half (drizzle-jobs' lease is 30 s), stalled checks every
  30 s, no metrics, its events stream capped at 10,000 entries. The concurrency row uses the queue's global
  concurrency (\`queue.setGlobalConcurrency(${COUNTS.limit})\`), BullMQ's limit across every worker and process.`
