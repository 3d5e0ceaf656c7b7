/**
 * The subscriber side of the progress channel (channel.ts): one connection
 * per channel of another process, shared by every watcher of this process,
 * with one subscription per run however many watchers follow it.
 */
import { createConnection, type Socket } from 'node:net'
import { toProgressValue, type ProgressValue } from './store.js'
import { MAX_CHANNEL_LINE_BYTES } from '../limits.js'

type Listener = (progress: ProgressValue) => void

interface Subscription {
  /** Undefined until the channel has answered the subscription. */
  value: ProgressValue | undefined
  listeners: Set<Listener>
}

/** A connection left with no subscription is kept this long, since a watcher often subscribes again at once (the next attempt). */
const IDLE_CLOSE_MS = 1_000
/** A dropped connection to a channel is tried again this many times, waiting this long times the attempt. */
const RECONNECT_ATTEMPTS = 3
const RECONNECT_DELAY_MS = 100

const clients = new Map<string, ChannelClient>()

/** Calls `listener` with the run's progress as the channel of its process sends it: first its current value, then every change. */
export function subscribeRemoteProgress(channel: string, key: string, listener: Listener): () => void {
  let client = clients.get(channel)
  if (!client) clients.set(channel, (client = new ChannelClient(channel)))
  return client.subscribe(key, listener)
}

/** The run's progress last received from its channel, if this process subscribes to it. */
export function readRemoteProgress(channel: string, key: string): ProgressValue | undefined {
  return clients.get(channel)?.read(key)
}

/** Connections open to other processes' channels. @internal for tests that check watchers free everything. */
export function openChannelConnections(): number {
  return clients.size
}

class ChannelClient {
  private socket: Socket
  private readonly subscriptions = new Map<string, Subscription>()
  private pending = ''
  private idleTimer: NodeJS.Timeout | null = null
  private failures = 0
  private closed = false

  constructor(private readonly channel: string) {
    this.socket = this.connect()
  }

  private connect(): Socket {
    const socket = createConnection(this.channel)
    socket.unref()
    socket.setEncoding('utf8')
    socket.on('connect', () => (this.failures = 0))
    socket.on('data', (chunk: string) => this.receive(chunk))
    socket.on('error', () => {
      // 'close' follows, and decides.
    })
    socket.on('close', () => this.lost(socket))
    return socket
  }

  /**
   * A channel that is gone usually belongs to a process that is gone: its
   * leases end, and the watchers read that from the database. A hiccup is
   * retried a few times, subscribing again to every run followed here.
   */
  private lost(socket: Socket): void {
    if (socket !== this.socket || this.closed) return
    this.pending = ''
    if (this.subscriptions.size === 0 || ++this.failures > RECONNECT_ATTEMPTS) return this.close()
    setTimeout(() => {
      if (this.closed || this.subscriptions.size === 0) return this.close()
      this.socket = this.connect()
      for (const key of this.subscriptions.keys()) this.write(`+${JSON.stringify(key)}\n`)
    }, RECONNECT_DELAY_MS * this.failures).unref()
  }

  subscribe(key: string, listener: Listener): () => void {
    if (this.idleTimer) {
      clearTimeout(this.idleTimer)
      this.idleTimer = null
    }
    let subscription = this.subscriptions.get(key)
    if (!subscription) {
      this.subscriptions.set(key, (subscription = { value: undefined, listeners: new Set() }))
      this.write(`+${JSON.stringify(key)}\n`)
    }
    subscription.listeners.add(listener)
    const held = subscription
    return () => {
      held.listeners.delete(listener)
      if (held.listeners.size > 0 || this.subscriptions.get(key) !== held) return
      this.subscriptions.delete(key)
      this.write(`-${JSON.stringify(key)}\n`)
      if (this.subscriptions.size === 0) this.closeWhenIdle()
    }
  }

  read(key: string): ProgressValue | undefined {
    return this.subscriptions.get(key)?.value
  }

  private write(line: string): void {
    if (!this.socket.destroyed) this.socket.write(line)
  }

  private receive(chunk: string): void {
    this.pending += chunk
    let newline: number
    while ((newline = this.pending.indexOf('\n')) !== -1) {
      const line = this.pending.slice(0, newline)
      this.pending = this.pending.slice(newline + 1)
      this.deliver(line)
    }
    if (this.pending.length > MAX_CHANNEL_LINE_BYTES) this.socket.destroy()
  }

  private deliver(line: string): void {
    const tab = line.indexOf('\t')
    let progress: ProgressValue
    let key: unknown
    try {
      key = JSON.parse(line.slice(0, tab))
      progress = toProgressValue(line.slice(tab + 1))
    } catch {
      this.socket.destroy()
      return
    }
    const subscription = typeof key === 'string' ? this.subscriptions.get(key) : undefined
    if (!subscription || subscription.value?.json === progress.json) return
    subscription.value = progress
    for (const listener of subscription.listeners) listener(progress)
  }

  private closeWhenIdle(): void {
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null
      if (this.subscriptions.size === 0) this.close()
    }, IDLE_CLOSE_MS)
    this.idleTimer.unref()
  }

  /** Later subscriptions to this channel open a new connection; the ones held here stay silent. */
  private close(): void {
    this.closed = true
    if (clients.get(this.channel) === this) clients.delete(this.channel)
    this.socket.end()
  }
}
