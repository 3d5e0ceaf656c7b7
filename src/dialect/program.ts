/**
 * The protocol is written once for both kinds of driver. The work of one
 * transaction is a program: a generator that hands each request it makes of
 * the executor to its runner (`yield* ask(db.jobGetState(seq))`) and gets the
 * answer back. A synchronous connection runs a program to its end at once,
 * inside the driver's synchronous transaction, so nothing else runs in
 * between (better-sqlite3: an await there would let other code write into the
 * transaction); an asynchronous connection awaits each answer in turn.
 */

/** The work of one transaction, answering `T`. */
// biome-ignore lint/suspicious/noExplicitAny: a program is resumed with whatever its request answers; each `ask` types its own answer
export type Program<T> = Generator<unknown, T, any>

/** Hands one answer of the executor, at once or as a promise, to the program's runner, and gives back what it resolves to. */
export function* ask<T>(answer: T | PromiseLike<T>): Generator<T | PromiseLike<T>, T, T> {
  return yield answer
}

/** Runs a program whose every answer came at once. */
export function runSync<T>(program: Program<T>): T {
  let step = program.next()
  while (!step.done) step = program.next(step.value)
  return step.value
}

/** Runs a program, awaiting each answer; an answer that rejects is thrown into the program where it asked. */
export async function runAsync<T>(program: Program<T>): Promise<T> {
  let step = program.next()
  while (!step.done) {
    let answer: unknown
    try {
      answer = await step.value
    } catch (error) {
      step = program.throw(error)
      continue
    }
    step = program.next(answer)
  }
  return step.value
}

/** A program that answers `value`: for work that has nothing to ask. */
// biome-ignore lint/correctness/useYield: a program that answers at once, asking nothing
export function* done<T>(value: T): Program<T> {
  return value
}

/**
 * What a connection's call answers: a value at once on a synchronous driver, a promise on an asynchronous one.
 * Code outside src/dialect/ carries it with the functions below and never asks which of the two it holds.
 */
export type Answer<T> = T | Promise<T>

/**
 * Hands an answer to `now` where it came at once, or to `later` where it is still to come: for a caller whose own
 * shape follows the answer's (a watch that is ready at once, or one that starts once its read answers).
 */
export function whenAnswered<T, U>(answer: Answer<T>, now: (value: T) => U, later: (answer: Promise<T>) => U): U {
  return answer instanceof Promise ? later(answer) : now(answer)
}

/**
 * Applies `next` to an answer, keeping how it came: at once, so that a synchronous caller stays synchronous, or
 * once the promise resolves. `failed`, where given, takes a promise's rejection (an answer that came at once has
 * none; an error thrown by `next` is never handed to it).
 */
export function andThen<T, U>(answer: Answer<T>, next: (value: T) => U, failed?: (error: unknown) => U): Answer<U> {
  return whenAnswered<T, Answer<U>>(answer, next, (later) => later.then<U, U>(next, failed))
}

/** The answers of several calls, once all have come: at once where each came at once, else a promise (which rejects as the first rejection). */
export function allOf<T extends readonly unknown[]>(answers: { readonly [I in keyof T]: Answer<T[I]> }): Answer<T> {
  if (!answers.some((answer) => answer instanceof Promise)) return answers as unknown as T
  const joined: Promise<unknown[]> = Promise.all(answers)
  return joined as Promise<unknown> as Promise<T>
}

/** Runs work one piece after another: for a connection that one piece of work at a time may use (a transaction's, where interleaved savepoints would cross). */
export class Lane {
  private tail: Promise<unknown> = Promise.resolve()

  run<T>(fn: () => Promise<T>): Promise<T> {
    const turn = this.tail.then(fn, fn)
    this.tail = turn.then(
      () => undefined,
      () => undefined,
    )
    return turn
  }
}
