/**
 * Progress across hosts, where the database carries it (PostgreSQL's
 * LISTEN/NOTIFY): a run's progress travels as notices and is never written
 * to a table (JOB-12).
 *
 * Sending. A process sends the progress of its runs at most once per
 * PROGRESS_NOTICE_INTERVAL_MS: one statement carrying, for each run whose
 * progress changed since the last send, its latest value, several runs to a
 * notice. A handler that
 * sets progress a thousand times a second thus costs the server at most one
 * notice per run per interval, and the last value always goes: it is sent
 * by the next send after it was set, even when nothing is set after it.
 *
 * A notice's payload is lines `N<TAB>KEY<TAB>PROGRESS`, one per run, as many
 * as fit under PostgreSQL's 8,000 bytes: N counts the run's values (a
 * receiver keeps only newer ones), KEY is the run's name as JSON (owner,
 * job, attempt: a new attempt starts with no progress), PROGRESS its JSON
 * (at most 4 KiB, so one value always fits). JSON text holds no raw tab or
 * newline.
 *
 * Receiving. A process listens for values once per connection, while any of
 * its watchers follows a run of another process, and hands each value to the
 * watchers of its run; other runs' values are dropped unread.
 *
 * Joining mid-run. Values are not kept anywhere, so a watcher that starts
 * while a run is under way asks for it: once its process listens, it sends
 * an ask naming the run on the channel of changes, which workers listen to
 * already; the process that owns the run answers with its latest value in
 * its next send. A worker that does not listen (`listen: false`) does not
 * hear asks: its runs' progress then reaches a late watcher with the next
 * value set. With the ask goes a line `ask<TAB>KEY<TAB>TOKEN` on the channel
 * of values, in the same transaction: the server delivers a channel's notices
 * in commit order, so the values that come before that line were sent before
 * the ask (a listening process may get them late) and are older than the
 * answer, and the receiver drops them. Older receivers drop the line, whose
 * N is not a number.
 */
import { randomUUID } from 'node:crypto'
import type { Connection, ProgressNotices } from '../dialect/index.js'
import { PROGRESS_LISTEN_IDLE_MS, PROGRESS_NOTICE_INTERVAL_MS } from '../limits.js'
import { toProgressValue, type ProgressValue } from './store.js'

type Listener = (progress: ProgressValue) => void

/** Sends a run of this process's progress to the watchers of other processes, coalesced with the other values set before the next send. */
export function sendProgress(connection: Connection, key: string, json: string): void {
  senderOf(connection)?.set(key, json)
}

/** Forgets a run that ended: nothing more is sent for it but a value still waiting for the next send, and asks for it go unanswered. */
export function endNoticeProgress(connection: Connection, key: string): void {
  senders.get(connection)?.end(key)
}

/** Calls `listener` with the run's progress as other processes send it: its current value once its owner answers the ask, then every later one. */
export function subscribeNoticeProgress(connection: Connection, key: string, listener: Listener): () => void {
  const notices = connection.progressNotices
  if (!notices) return () => {}
  let receiver = receivers.get(connection)
  if (!receiver) receivers.set(connection, (receiver = new Receiver(connection, notices)))
  return receiver.subscribe(key, listener)
}

/** The run's progress last received, if a watcher of this process follows it. */
export function readNoticeProgress(connection: Connection, key: string): ProgressValue | undefined {
  return receivers.get(connection)?.read(key)
}

/** Whether this process listens for progress on any connection. @internal for tests that check watchers free everything. */
export function listeningForProgress(): number {
  let listening = 0
  for (const receiver of allReceivers) if (receiver.isListening) listening++
  return listening
}

const senders = new WeakMap<Connection, Sender>()
const receivers = new WeakMap<Connection, Receiver>()
const allReceivers = new Set<Receiver>()

function senderOf(connection: Connection): Sender | undefined {
  const notices = connection.progressNotices
  if (!notices) return undefined
  let sender = senders.get(connection)
  if (!sender) senders.set(connection, (sender = new Sender(notices)))
  return sender
}

/** A run of this process whose progress is sent: its latest value and how many it has had. */
interface SentRun {
  readonly key: string
  readonly keyJson: string
  json: string
  n: number
}

/** The progress of this process's runs on one connection, sent at most once per interval. */
class Sender {
  private readonly runs = new Map<string, SentRun>()
  /** Runs whose latest value is to go with the next send. */
  private readonly pending = new Set<SentRun>()
  private lastSendAt = -Infinity
  private timer: NodeJS.Timeout | null = null
  private sending = false

  constructor(private readonly notices: ProgressNotices) {
    notices.onAsk((keyJson) => this.asked(keyJson))
  }

  set(key: string, json: string): void {
    let run = this.runs.get(key)
    if (!run) this.runs.set(key, (run = { key, keyJson: JSON.stringify(key), json, n: 0 }))
    run.json = json
    run.n++
    this.pending.add(run)
    this.schedule()
  }

  end(key: string): void {
    this.runs.delete(key)
  }

  /** Another process's watcher started following a run: the owner sends its latest value, if it has one. */
  private asked(keyJson: string): void {
    let key: unknown
    try {
      key = JSON.parse(keyJson)
    } catch {
      return
    }
    const run = typeof key === 'string' ? this.runs.get(key) : undefined
    if (!run) return
    this.pending.add(run)
    this.schedule()
  }

  /** One send in flight at a time, at most one per interval: a value set meanwhile waits for the next, and only the latest of a run goes. */
  private schedule(): void {
    if (this.sending || this.timer || this.pending.size === 0) return
    const wait = Math.max(0, this.lastSendAt + PROGRESS_NOTICE_INTERVAL_MS - performance.now())
    // The first value after a quiet spell goes at the end of this turn of the event loop, with whatever else the turn sets.
    this.timer = setTimeout(() => this.send(), wait)
    this.timer.unref()
  }

  private send(): void {
    this.timer = null
    const runs = [...this.pending]
    this.pending.clear()
    const payloads = pack(
      runs.map((run) => `${run.n}\t${run.keyJson}\t${run.json}`),
      this.notices.maxPayloadBytes,
    )
    if (payloads.length === 0) return
    this.sending = true
    this.lastSendAt = performance.now()
    this.notices.send(payloads, []).then(
      () => {
        this.sending = false
        this.schedule()
      },
      () => {
        // A lost connection, say: the values go again with the next send, unless newer ones replaced them or the run ended.
        this.sending = false
        for (const run of runs) if (this.runs.get(run.key) === run) this.pending.add(run)
        this.lastSendAt = performance.now()
        this.schedule()
      },
    )
  }
}

/** How the line that goes with an ask, on the channel of values, begins: `ask<TAB>KEY<TAB>TOKEN`. */
const ASK_LINE = 'ask\t'

/** The token of an ask not sent yet: no ask line carries it. */
const ASK_DUE = ''

/** How many of the last payloads a line may join: a line that fits none of them starts a new one. */
const PACK_LOOKBACK = 8

/**
 * Several runs' values share a notice, as many as fit, so that the server delivers fewer, larger notices: each
 * line goes into the first of the last few payloads with room for it (first fit, so that small values fill the
 * room that large ones leave). A line longer than a notice takes is dropped: progress is capped at 4 KiB and a
 * run's name at a few hundred bytes, so this only guards the limit.
 */
function pack(lines: readonly string[], maxBytes: number): string[] {
  const payloads: { lines: string[]; bytes: number }[] = []
  for (const line of lines) {
    const bytes = Buffer.byteLength(line)
    if (bytes > maxBytes) continue
    let into: { lines: string[]; bytes: number } | undefined
    for (let i = Math.max(0, payloads.length - PACK_LOOKBACK); i < payloads.length && !into; i++) {
      if (payloads[i]!.bytes + 1 + bytes <= maxBytes) into = payloads[i]
    }
    if (into) {
      into.lines.push(line)
      into.bytes += 1 + bytes
    } else {
      payloads.push({ lines: [line], bytes })
    }
  }
  return payloads.map((payload) => payload.lines.join('\n'))
}

/** A run followed here: its latest value received, and the watchers of this process that follow it. */
interface Followed {
  readonly keyJson: string
  n: number
  value: ProgressValue | undefined
  readonly listeners: Set<Listener>
  /** Asked for since the listening was last in place. */
  asked: boolean
  /**
   * The token of this process's last ask for the run, until its line comes back: values before it are older than the
   * answer. ASK_DUE while an ask is yet to be sent on a listening in place: what arrives then was committed before the
   * ask, so it is older than the answer too.
   */
  askToken: string | null
}

/** The progress values of other processes' runs on one connection: one listening, shared by every watcher of this process. */
class Receiver {
  /** By the run's name as JSON, as payloads carry it: a value of a run no one here follows is dropped without parsing. */
  private readonly followed = new Map<string, Followed>()
  private stop: (() => void) | null = null
  private listening = false
  private idleTimer: NodeJS.Timeout | null = null
  private askTimer: NodeJS.Timeout | null = null
  /** Names this receiver's asks, with a count: its own ask lines come back, and no other's matches them. */
  private readonly id = randomUUID()
  private asks = 0

  constructor(
    private readonly connection: Connection,
    private readonly notices: ProgressNotices,
  ) {}

  get isListening(): boolean {
    return this.stop !== null
  }

  subscribe(key: string, listener: Listener): () => void {
    if (this.idleTimer) {
      clearTimeout(this.idleTimer)
      this.idleTimer = null
    }
    const keyJson = JSON.stringify(key)
    let run = this.followed.get(keyJson)
    if (!run) {
      // Where the listening is in place, a value can come before this run's ask goes: an older one than the answer.
      const askToken = this.listening ? ASK_DUE : null
      this.followed.set(keyJson, (run = { keyJson, n: 0, value: undefined, listeners: new Set(), asked: false, askToken }))
      if (this.listening) this.askSoon()
    }
    run.listeners.add(listener)
    this.startListening()
    const held = run
    return () => {
      held.listeners.delete(listener)
      if (held.listeners.size > 0 || this.followed.get(keyJson) !== held) return
      this.followed.delete(keyJson)
      if (this.followed.size === 0) this.stopWhenIdle()
    }
  }

  read(key: string): ProgressValue | undefined {
    return this.followed.get(JSON.stringify(key))?.value
  }

  private startListening(): void {
    if (this.stop) return
    allReceivers.add(this)
    this.stop = this.notices.listen(
      (payload) => this.received(payload),
      () => {
        // In place, at first or after a loss: every run followed is asked for, since values may have been missed.
        this.listening = true
        for (const run of this.followed.values()) {
          run.asked = false
          run.askToken = ASK_DUE
        }
        this.askSoon()
      },
      () => (this.listening = false),
    )
  }

  private received(payload: string): void {
    for (const line of payload.split('\n')) this.receivedLine(line)
  }

  private receivedLine(line: string): void {
    const first = line.indexOf('\t')
    const second = line.indexOf('\t', first + 1)
    if (first < 0 || second < 0) return
    const run = this.followed.get(line.slice(first + 1, second))
    if (!run) return
    if (line.startsWith(ASK_LINE)) {
      const token = line.slice(second + 1)
      if (token !== ASK_DUE && token === run.askToken) run.askToken = null
      return
    }
    // Sent before this process's ask: older than the answer to come.
    if (run.askToken !== null) return
    const n = Number(line.slice(0, first))
    if (!Number.isSafeInteger(n) || n <= run.n) return
    let progress: ProgressValue
    try {
      progress = toProgressValue(line.slice(second + 1))
    } catch {
      return
    }
    run.n = n
    if (run.value?.json === progress.json) return
    run.value = progress
    for (const listener of run.listeners) listener(progress)
  }

  /** Asks, in one statement at the end of this turn, for every run followed and not yet asked for. */
  private askSoon(): void {
    if (this.askTimer) return
    this.askTimer = setTimeout(() => {
      this.askTimer = null
      if (!this.listening) return
      const asks: Followed[] = []
      for (const run of this.followed.values()) {
        if (run.asked) continue
        run.asked = true
        asks.push(run)
      }
      if (asks.length === 0) return
      const lines = asks.map((run) => {
        run.askToken = `${this.id}.${++this.asks}`
        return `${ASK_LINE}${run.keyJson}\t${run.askToken}`
      })
      this.notices
        .send(
          pack(lines, this.notices.maxPayloadBytes),
          asks.map((run) => run.keyJson),
        )
        .catch(() => {
          // Not sent (a lost connection): asked again a moment later, while still followed.
          for (const run of asks) {
            run.asked = false
            run.askToken = null
          }
          setTimeout(() => this.askSoon(), PROGRESS_NOTICE_INTERVAL_MS).unref()
        })
    }, 0)
    this.askTimer.unref()
  }

  private stopWhenIdle(): void {
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null
      if (this.followed.size > 0 || !this.stop) return
      this.stop()
      this.stop = null
      this.listening = false
      allReceivers.delete(this)
      receivers.delete(this.connection)
    }, PROGRESS_LISTEN_IDLE_MS)
    this.idleTimer.unref()
  }
}
