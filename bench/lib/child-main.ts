/**
 * The entry of every benchmark child: receives `{ module, args }`, runs the
 * task named on its command line, answers `{ type: 'result' }` (or
 * `{ type: 'error' }`) and exits. A child whose parent goes away exits too,
 * so no worker process outlives the run.
 */
import { pathToFileURL } from 'node:url'
import { Inbox, type Ctx, type Message, type TaskModule } from './child.js'

const task = process.argv[2] ?? ''
const inbox = new Inbox()
let started = false

function answer(message: Message, code: number): void {
  if (!process.connected) process.exit(code)
  process.send?.(message, () => process.exit(code))
}

const ctx: Ctx = {
  send: (message) => {
    if (process.connected) process.send?.(message)
  },
  receive: (type, timeoutMs) => inbox.receive(type, timeoutMs),
}

process.on('message', (message: Message) => {
  if (started) return inbox.push(message)
  started = true
  void run(String(message.module), message.args)
})
process.on('disconnect', () => process.exit(1))

async function run(module: string, args: unknown): Promise<void> {
  try {
    const loaded = (await import(pathToFileURL(module).href)) as TaskModule
    const fn = loaded.tasks[task]
    if (!fn) throw new Error(`${module} has no task '${task}' (it has: ${Object.keys(loaded.tasks).join(', ')})`)
    const result = await fn(args, ctx)
    answer({ type: 'result', result }, 0)
  } catch (error) {
    answer({ type: 'error', error: error instanceof Error ? (error.stack ?? error.message) : String(error) }, 1)
  }
}
