/**
 * The benchmark's process tree. Every measurement runs in a fresh child
 * process (no JIT, heap or page-cache state carried from another library's
 * run), and a measurement that needs more processes (workers in other
 * processes) spawns them the same way. Parent and child talk over the IPC
 * channel with small typed messages; a child answers its task's result once.
 *
 * This module imports no SQLite driver: liteque's children load
 * better-sqlite3 11 from bench/liteque, everything else loads 12 from the root.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { resolve } from 'node:path'

export const ROOT = resolve(import.meta.dirname, '../..')
const CHILD_MAIN = resolve(import.meta.dirname, 'child-main.ts')

export interface Message {
  type: string
  [key: string]: unknown
}

/** What a task gets besides its arguments: the channel to the process that started it. */
export interface Ctx {
  send(message: Message): void
  receive<T extends Message = Message>(type: string, timeoutMs?: number): Promise<T>
}

// biome-ignore lint/suspicious/noExplicitAny: each task reads its own arguments
export type Task = (args: any, ctx: Ctx) => Promise<unknown>

/** A module whose tasks can run in a child: `export const tasks = { name: async (args, ctx) => result }`. */
export interface TaskModule {
  tasks: Record<string, Task>
}

/** Messages waiting to be received, by type, in order. */
export class Inbox {
  private readonly waiting = new Map<string, Message[]>()
  private readonly receivers = new Map<string, Array<(message: Message) => void>>()
  private failure: Error | null = null

  push(message: Message): void {
    const receiver = this.receivers.get(message.type)?.shift()
    if (receiver) return receiver(message)
    let list = this.waiting.get(message.type)
    if (!list) this.waiting.set(message.type, (list = []))
    list.push(message)
  }

  /** Fails every receive under way and to come: the other side is gone. */
  fail(error: Error): void {
    this.failure = error
    for (const list of this.receivers.values()) for (const receiver of list.splice(0)) receiver({ type: '\u0000failed' })
  }

  receive<T extends Message>(type: string, timeoutMs = 120_000): Promise<T> {
    const queued = this.waiting.get(type)?.shift()
    if (queued) return Promise.resolve(queued as T)
    if (this.failure) return Promise.reject(this.failure)
    return new Promise<T>((resolvePromise, reject) => {
      const timer = setTimeout(() => {
        const list = this.receivers.get(type) ?? []
        list.splice(list.indexOf(deliver), 1)
        reject(new Error(`no '${type}' message within ${timeoutMs} ms`))
      }, timeoutMs)
      const deliver = (message: Message): void => {
        clearTimeout(timer)
        if (message.type === '\u0000failed') reject(this.failure ?? new Error('the other process is gone'))
        else resolvePromise(message as T)
      }
      let list = this.receivers.get(type)
      if (!list) this.receivers.set(type, (list = []))
      list.push(deliver)
    })
  }
}

export interface Child extends Ctx {
  readonly process: ChildProcess
  /** The task's answer; rejects if the task threw, the child died, or it ran past its timeout. */
  readonly result: Promise<unknown>
}

/** Extra node flags for every child, e.g. BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=prof" to profile. */
function extraNodeArgs(): string[] {
  return (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '')
}

/** Runs `task` of `module` (a path) in a new node process under tsx. */
export function spawnTask(module: string, task: string, args: object, options: { timeoutMs?: number } = {}): Child {
  const timeoutMs = options.timeoutMs ?? 180_000
  const child = fork(CHILD_MAIN, [task], {
    cwd: ROOT,
    execArgv: ['--import', 'tsx', ...extraNodeArgs()],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const inbox = new Inbox()
  const result = new Promise<unknown>((resolvePromise, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`${task} of ${module} ran past ${timeoutMs} ms and was killed`))
    }, timeoutMs)
    child.on('message', (message: Message) => {
      if (message.type === 'result') {
        clearTimeout(timer)
        resolvePromise(message.result)
      } else if (message.type === 'error') {
        clearTimeout(timer)
        reject(new Error(`${task} of ${module} failed:\n${String(message.error)}`))
      } else {
        inbox.push(message)
      }
    })
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      const error = new Error(`${task} of ${module} exited (${signal ?? code}) without an answer`)
      inbox.fail(error)
      reject(error)
    })
  })
  result.catch(() => undefined)
  child.send({ type: 'request', module, args })
  return {
    process: child,
    result,
    send: (message) => {
      if (child.connected) child.send(message)
    },
    receive: (type, timeout) => inbox.receive(type, timeout),
  }
}

/** Runs a task in a child and answers its result. */
export function runTask<T>(module: string, task: string, args: object, options: { timeoutMs?: number } = {}): Promise<T> {
  return spawnTask(module, task, args, options).result as Promise<T>
}
