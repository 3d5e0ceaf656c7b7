/**
 * A local stand-in for a language model: it takes seconds, writes its answer
 * word by word, fails now and then, and sometimes answers "slow down" (a
 * rate limit), just as the real ones do. Nothing leaves the machine.
 *
 * Besides its random failures, two words make it misbehave on purpose, so
 * that each path can be seen in the page: a message containing `!fail`
 * fails on its first attempt, and one containing `!slow` is told to slow
 * down the first time this process's model sees it.
 */

/** The model asks to be called again later: the handler meets it with `run.snooze`. */
export class SlowDown extends Error {
  constructor(readonly retryAfterMs: number) {
    super(`slow down: try again in ${retryAfterMs} ms`)
    this.name = 'SlowDown'
  }
}

export interface ModelOptions {
  /** How long an answer takes, drawn between these bounds (ms). */
  minMs: number
  maxMs: number
  /** The chance that an answer fails part way. */
  failRate: number
  /** The chance that the model answers "slow down" instead. */
  slowDownRate: number
  /** How long "slow down" asks to wait (ms). */
  slowDownMs: number
}

export interface Question {
  text: string
  history: { role: string; text: string }[]
  /** The job's attempt: a stand-in's way to fail a first attempt on request. */
  attempt: number
}

export interface Model {
  /** Answers `question`, calling `onText` with the answer so far as it is written. Rejects with SlowDown, or an Error when it fails. */
  answer(question: Question, options: { signal: AbortSignal; onText?: (soFar: string) => void }): Promise<string>
}

const OPENERS = ['Good question.', 'Let me think.', 'Here is what I know.', 'Right.', 'Sure.']
const CLOSERS = ['Anything else?', 'Hope that helps.', 'Ask me more.', 'That is all I have.', 'Does that answer it?']

export function standInModel(options: ModelOptions): Model {
  const slowedDown = new Set<string>()
  return {
    async answer({ text, history, attempt }, { signal, onText }) {
      if ((text.includes('!slow') && !slowedDown.has(text)) || Math.random() < options.slowDownRate) {
        slowedDown.add(text)
        await sleep(50, signal)
        throw new SlowDown(options.slowDownMs)
      }
      const fails = (text.includes('!fail') && attempt === 1) || Math.random() < options.failRate
      const words = composeAnswer(text, history.length).split(' ')
      const totalMs = options.minMs + Math.random() * (options.maxMs - options.minMs)
      for (let i = 1; i <= words.length; i++) {
        await sleep(totalMs / words.length, signal)
        if (fails && i === Math.ceil(words.length / 2)) throw new Error('the model is overloaded (a stand-in failure); the job will retry')
        onText?.(words.slice(0, i).join(' '))
      }
      return words.join(' ')
    },
  }
}

function composeAnswer(text: string, earlier: number): string {
  const hash = [...text].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7)
  const words = text.trim().split(/\s+/).filter(Boolean).length
  const recall = earlier > 0 ? `This chat has ${earlier} earlier message${earlier === 1 ? '' : 's'}.` : 'This is the start of our chat.'
  return `${OPENERS[hash % OPENERS.length]} You wrote ${words} word${words === 1 ? '' : 's'}: "${text.trim()}". ${recall} ${CLOSERS[(hash >>> 3) % CLOSERS.length]}`
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason)
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = (): void => {
      clearTimeout(timer)
      reject(signal.reason)
    }
    signal.addEventListener('abort', onAbort, { once: true })
  })
}
