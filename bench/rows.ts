/**
 * The rows of the benchmark table (issue 4), what each one measures, and
 * the targets, checked on the medians of the same run.
 */
import { formatRatio, formatValue, PEERS, type Results, type RowSpec, type Subject, type Target } from './lib/report.js'

export const COUNTS = {
  appTransactions: 20_000,
  appWarmup: 1_000,
  batchTotal: 100_000,
  batchSize: 1_000,
  drain: 20_000,
  warmJobs: 1_000,
  slots: [1, 16, 64],
  procs: 4,
  procSlots: 16,
  scaleWaiting: 1_000_000,
  scaleDrain: 20_000,
  scaleSlots: 16,
  pickupSamples: 100,
  pickupGapMs: 50,
  peerPickupSamples: 20,
  peerPickupGapMs: 1_000,
  /** liteque drains about 700 jobs/s (its dequeue sorts every waiting row): its drains stop after this long. */
  litequeCapMs: 5_000,
} as const

const LITEQUE_NO_TX = "liteque's enqueue is async and writes through its own Drizzle handle: it cannot join the app's transaction"
const LITEQUE_NO_BATCH = 'liteque has no batch add, and its enqueue cannot join a transaction'
const NO_AHEAD = 'no call answers how many jobs are ahead of a given one'
const FLOOR_NO_WORKER = 'the floor is a loop of statements: it has no idle worker to wake'

function ours(results: Results, key: string): number | undefined {
  return results.median(key, 'drizzle-jobs')
}

function best(results: Results, key: string): number | undefined {
  const values = PEERS.map((peer) => results.median(key, peer)).filter((value): value is number => value !== undefined)
  return values.length === 0 ? undefined : Math.max(...values)
}

function percent(share: number): string {
  return `${(share * 100).toFixed(0)}%`
}

/**
 * The floor a drain is held to is the floor's drain of the same waiting
 * jobs (claims and completions 100 per transaction): the same work. The
 * batched full lifecycle (each add in its own transaction, as the issue
 * describes the floor) is shown beside it.
 */
function processTarget(key: string): Target {
  return {
    text: '≥ 2.5× best peer and ≥ 70% of the batched floor',
    check: (results) => {
      const value = ours(results, key)
      const peer = best(results, key)
      const floor = results.median('floor-drain-batched', 'floor')
      const lifecycle = results.median('floor-lifecycle-batched', 'floor')
      if (value === undefined || peer === undefined || floor === undefined) return undefined
      const ofLifecycle = lifecycle === undefined ? '' : `; ${percent(value / lifecycle)} of the batched full-lifecycle floor`
      return {
        met: value >= 2.5 * peer && value >= 0.7 * floor,
        detail: `${formatRatio(value / peer)} best peer, ${percent(value / floor)} of the batched drain floor${ofLifecycle}`,
      }
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

function maxRunning(results: Results, subject: Subject): string {
  const max = results.median('processes-max', subject)
  return max === undefined ? '' : `(max ${max} running)`
}

export const ROWS: readonly RowSpec[] = [
  { key: 'enqueue-app', figure: 'enqueue, one job per app transaction', unit: 'tx/s', better: 'higher', na: { liteque: LITEQUE_NO_TX } },
  { key: 'enqueue-app-only', figure: "the same app transaction without a job", unit: 'tx/s', better: 'higher', noRatio: true, na: { liteque: LITEQUE_NO_TX } },
  {
    key: 'enqueue-overhead',
    figure: 'what adding the job adds to the app transaction',
    unit: '%',
    better: 'lower',
    noRatio: true,
    na: { liteque: LITEQUE_NO_TX },
    target: {
      text: '≤ +25%',
      check: (results) => {
        const value = ours(results, 'enqueue-overhead')
        return value === undefined ? undefined : { met: value <= 0.25, detail: formatValue(value, '%') }
      },
    },
  },
  { key: 'enqueue-batch', figure: 'enqueue, batch: 100,000 in transactions of 1,000', unit: 'jobs/s', better: 'higher', na: { liteque: LITEQUE_NO_BATCH } },
  ...COUNTS.slots.map(
    (slots): RowSpec => ({
      key: `process-${slots}`,
      figure: `process 20,000, no-op handler, one worker, slots ${slots}`,
      unit: 'jobs/s',
      better: 'higher',
      floorFrom: 'floor-drain-batched',
      target: processTarget(`process-${slots}`),
    }),
  ),
  {
    key: 'processes',
    figure: `process 20,000 across ${COUNTS.procs} worker processes (slots ${COUNTS.procSlots} each)`,
    unit: 'jobs/s',
    better: 'higher',
    extra: maxRunning,
  },
  { key: 'pickup-same-median', figure: 'pickup latency, same process, median', unit: 'ms', better: 'lower', na: { floor: FLOOR_NO_WORKER }, target: below('pickup-same-median', 1) },
  { key: 'pickup-same-p99', figure: 'pickup latency, same process, p99', unit: 'ms', better: 'lower', na: { floor: FLOOR_NO_WORKER } },
  { key: 'pickup-other-median', figure: 'pickup latency, other process, median', unit: 'ms', better: 'lower', na: { floor: FLOOR_NO_WORKER }, target: below('pickup-other-median', 30) },
  { key: 'pickup-other-p99', figure: 'pickup latency, other process, p99', unit: 'ms', better: 'lower', na: { floor: FLOOR_NO_WORKER }, target: below('pickup-other-p99', 80) },
  {
    key: 'scale-process',
    figure: `process 20,000 with 1,000,000 waiting (slots ${COUNTS.scaleSlots})`,
    unit: 'jobs/s',
    better: 'higher',
    target: {
      text: `≥ 80% of the empty queue (process, slots ${COUNTS.scaleSlots})`,
      check: (results) => {
        const value = ours(results, 'scale-process')
        const empty = ours(results, `process-${COUNTS.scaleSlots}`)
        return value === undefined || empty === undefined ? undefined : { met: value >= 0.8 * empty, detail: `${percent(value / empty)} of empty` }
      },
    },
  },
  { key: 'scale-ahead', figure: '`ahead` of the last of 1,000,000 waiting, median', unit: 'ms', better: 'lower', na: { plainjob: NO_AHEAD, liteque: NO_AHEAD }, target: below('scale-ahead', 5) },
  { key: 'floor-lifecycle-per-step', figure: 'floor: add, claim, complete 20,000, one transaction per step', unit: 'jobs/s', better: 'higher', noRatio: true },
  { key: 'floor-lifecycle-batched', figure: 'floor: add (one per transaction), claim and complete 100 per transaction, 20,000', unit: 'jobs/s', better: 'higher', noRatio: true },
  { key: 'floor-drain-per-step', figure: 'floor: claim and complete 20,000 waiting, one transaction per step', unit: 'jobs/s', better: 'higher', noRatio: true },
  { key: 'floor-drain-batched', figure: 'floor: claim and complete 20,000 waiting, 100 per transaction', unit: 'jobs/s', better: 'higher', noRatio: true },
]

/** How each row is measured: printed under the table. */
export const METHOD = `Each figure is the median of its runs (every run is listed at the end of bench/RESULTS.md); every run is a fresh
node process on fresh database files (WAL, synchronous = NORMAL, the driver's default 5 s busy timeout), after a
warm-up of the same work on a throwaway file. Runs of different libraries are interleaved, so that a noisy moment
of the shared machine does not fall on one library only.

- **enqueue, one job per app transaction**: 20,000 transactions, each inserting an app row with Drizzle's query
  builder and adding its job, for drizzle-jobs as a user writes it:
  \`db.transaction((tx) => { tx.insert(messages).values(row).run(); enqueue(tx, queue, { messageId }) })\`;
  for plainjob \`queue.add(...)\` inside the same Drizzle transaction (same connection). **The same app transaction
  without a job** is measured in the same process, so **what adding the job adds** is time per transaction with the
  job over time without, minus one. The floor's app row and job are two prepared inserts in one transaction.
- **enqueue, batch**: 100,000 jobs through \`enqueueMany(db, queue, items)\` (plainjob: \`queue.addMany\`), 1,000 per
  transaction; the floor: one prepared insert per job, 1,000 per transaction.
- **process**: a copy of a file holding 20,000 waiting jobs, drained by one worker with a no-op async handler: from
  the worker's start until every job is recorded done (drizzle-jobs: until \`worker.stop()\` has written the last
  ends). \`slots\` is drizzle-jobs' option, plainjob's number of \`defineWorker\`s on one queue (each runs one job at a
  time), liteque's \`concurrency\`. The floor column is the floor's batched drain.
- **across processes**: the same file drained by 4 worker processes started together, 16 slots each; the parent
  watches the file every 2 ms from its own connection and reports the most jobs it saw in the running state at once.
- **pickup latency**: an idle worker at the default poll interval (drizzle-jobs 50 ms, plainjob and liteque
  1,000 ms); one job is added after a random wait in [0, poll interval), and the time runs from the add's commit to
  the handler's start, on CLOCK_MONOTONIC, which all processes of the machine share. drizzle-jobs: 100 samples a run;
  the peers: 20 samples a run (each takes a poll interval), their four series run side by side since they mostly sleep.
- **scale**: a copy of a file holding 1,000,000 waiting jobs (added by each library's batch add; liteque's rows by
  one prepared insert of the row its \`enqueue\` writes, since its \`enqueue\` would take minutes). First \`ahead\` of the
  last job: the time of \`getJob(db, queue, id)\` (the floor: the same two statements by hand), 200 calls; then
  20,000 of them drained, slots 16.
- **floor**: hand-written prepared better-sqlite3 statements on the least schema with the same guarantees (ids
  unique per queue, a partial claim index, a lease row per running job): add; claim with lease
  (\`update … where seq in (select … order by priority, run_at, seq limit n) returning …\` plus the lease insert);
  complete (lease delete fenced by owner and attempt, then the state update). Per step: one transaction each;
  batched: claims and completions 100 jobs per transaction. The full lifecycle adds each job in its own
  transaction either way; the drains start from a file of 20,000 waiting jobs, as the process rows do.`

/** Each peer's configuration, from its own README. */
export const CONFIGURATIONS = `- **drizzle-jobs** (this checkout's \`src/\`, run by tsx): the README's setup (\`new Database(file)\`, WAL,
  synchronous = NORMAL, \`drizzle(client, { schema })\`, tables by the project's drizzle-kit migrations);
  \`defineQueue('bench')\` with its defaults; \`work(db, queue, handler, { slots })\`, every other option at its default
  (poll interval 50 ms, lease 30 s).
- **plainjob 0.0.14**: as its README and its own benchmark: \`defineQueue({ connection: better(new Database(file)),
  logger })\`, which sets WAL, synchronous = 1 (NORMAL) and busy_timeout = 5000 itself, with info and debug logging
  off as its benchmark does (its default logger, console, prints a line per job); \`defineWorker(type, handler,
  { queue, logger })\` once per slot, at the default poll interval (1,000 ms).
- **liteque 0.8.0** (bench/liteque, on better-sqlite3 11.9.1, since its worker crashes on 12): as its README:
  \`buildDBClient(file, { runMigrations: true })\` (WAL, synchronous = NORMAL, 64 MiB cache, temp_store = MEMORY),
  \`new SqliteQueue(name, db, { defaultJobArgs: { numRetries: 2 }, keepFailedJobs: false })\`, \`new Runner(queue,
  { run }, { concurrency: slots, pollIntervalMs: 1000, timeoutSecs: 60 })\` without the README's zod validator. Its
  dequeue orders by (priority, createdAt), which no index covers, so each claim sorts every waiting row: its drains
  stop after ${COUNTS.litequeCapMs / 1000} s (a full drain of 20,000 takes about 30 s), and the figure is jobs done over that time.`
