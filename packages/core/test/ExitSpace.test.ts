/**
 * Every combination of the events one execution can meet, run through the real engine on the memory
 * store and `TestClock`: how the downstream ends (a value, a typed failure, a defect, a hang, a value
 * after ignoring interruption), whether its encoder throws, each failure, timeout and defect policy,
 * the store's answer to the recording (at once, slow, unavailable, hanging), the caller interrupted
 * (never, while the downstream runs, while the outcome is recorded), and a deadline or none. At each
 * combination it checks the invariants of the exit table:
 *
 * - the downstream runs at most once per reservation, and never beside another run;
 * - the caller gets an answer, by the deadline unless the downstream could not be stopped;
 * - once the caller has it, the attempt makes no store call;
 * - a retry runs the downstream again only where a policy chose it: a failure released or marked
 *   failed, an unknown outcome (a defect, a downstream stopped before it ended) under `keepLease` or
 *   `release`, or a recording the store refused, when the timeout policy allows a takeover; a known
 *   outcome recorded on a healthy store is replayed.
 */
import { Idempotency, IdempotencyError, IdempotencyStore } from "@effect-idempotency/core"
import type { IdempotencyPolicy } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"

type Downstream = "value" | "failure" | "defect" | "hang" | "stubborn"
type Fault = "none" | "slow" | "unavailable" | "hang"
type Interrupt = "none" | "downstream" | "recording"

interface Case {
  readonly downstream: Downstream
  readonly throwingEncoder: boolean
  readonly onFailure: IdempotencyPolicy.FailurePolicy
  readonly onTimeout: IdempotencyPolicy.TimeoutPolicy
  readonly onDefect: IdempotencyPolicy.TimeoutPolicy
  readonly fault: Fault
  readonly interrupt: Interrupt
  readonly deadline: boolean
}

const timeoutPolicies: ReadonlyArray<IdempotencyPolicy.TimeoutPolicy> = ["keepLease", "release", "markUnknown"]

/** Every case, without the combinations an option cannot change (a failure policy of a success...). */
const cases = (): ReadonlyArray<Case> => {
  const all: Array<Case> = []
  for (const downstream of ["value", "failure", "defect", "hang", "stubborn"] as const) {
    for (const throwingEncoder of downstream === "value" || downstream === "stubborn" ? [false, true] : [false]) {
      for (
        const onFailure of downstream === "failure"
          ? (["store", "markFailed", "release"] as const)
          : ["store"] as const
      ) {
        for (const onDefect of downstream === "defect" ? timeoutPolicies : ["keepLease"] as const) {
          for (const onTimeout of timeoutPolicies) {
            for (const fault of ["none", "slow", "unavailable", "hang"] as const) {
              for (const interrupt of ["none", "downstream", "recording"] as const) {
                for (const deadline of [false, true]) {
                  all.push({ downstream, throwingEncoder, onFailure, onTimeout, onDefect, fault, interrupt, deadline })
                }
              }
            }
          }
        }
      }
    }
  }
  return all
}

// the downstream ends at 500 ms (the stubborn one at 1.6 s, past its 1 s timeout), a slow recording
// takes 300 ms, the caller is interrupted at 250 ms (the downstream runs) or 650 ms (it records)
const ENDS_AT = 500
const STUBBORN_ENDS_AT = 1600
const SLOW_MILLIS = 300
const INTERRUPT_AT: Record<Exclude<Interrupt, "none">, number> = { downstream: 250, recording: 650 }
const DEADLINE_AFTER = 2500

const Throwing = Schema.transform(Schema.String, Schema.String, {
  decode: (s) => s,
  encode: () => {
    throw new Error("the encoder failed")
  }
})

/** Whether a retry may run the downstream again after this case, by the policies it chose. */
const mayRunAgain = (c: Case, stoppedEarly: boolean): boolean => {
  // a recording the store refused leaves the record in progress: a takeover after the lease, unless
  // the timeout policy forbids takeovers (markUnknown: the key stays blocked)
  const refused = c.fault === "unavailable" || c.fault === "hang"
  const takeover = c.onTimeout !== "markUnknown"
  if (stoppedEarly) return c.onTimeout !== "markUnknown"
  switch (c.downstream) {
    case "value":
    case "stubborn":
      return refused && takeover
    case "failure":
      return c.onFailure !== "store" || (refused && takeover)
    case "defect":
      return c.onDefect !== "markUnknown" || (refused && takeover)
    case "hang":
      return takeover
  }
}

/** Plays one case; returns how many times the downstream ran, and the invariants it broke. */
const play = (c: Case) =>
  Effect.gen(function*() {
    const violations: Array<string> = []
    const check = (holds: boolean, what: string) => {
      if (!holds) violations.push(`${JSON.stringify(c)}: ${what}`)
    }
    const base = yield* IdempotencyStore.makeMemory({ warn: false })
    const calls: Array<{ readonly method: string; readonly at: number }> = []
    let faulty = true
    const write = <A, E>(method: string, effect: Effect.Effect<A, E>) =>
      Effect.flatMap(TestClock.currentTimeMillis, (at): Effect.Effect<A, E | IdempotencyError.StoreUnavailable> => {
        calls.push({ method, at })
        if (!faulty) return effect
        switch (c.fault) {
          case "none":
            return effect
          case "slow":
            return Effect.zipRight(Effect.sleep(Duration.millis(SLOW_MILLIS)), effect)
          case "unavailable":
            return Effect.fail(new IdempotencyError.StoreUnavailable({ method, cause: "injected" }))
          case "hang":
            return Effect.never
        }
      })
    const store: IdempotencyStore.IdempotencyStore["Type"] = {
      reserve: (request) =>
        Effect.tap(TestClock.currentTimeMillis, (at) => calls.push({ method: "reserve", at })).pipe(
          Effect.zipRight(base.reserve(request))
        ),
      complete: (request) => write("complete", base.complete(request)),
      release: (request) => write("release", base.release(request)),
      markFailed: (request) => write("markFailed", base.markFailed(request)),
      extend: (request) => write("extend", base.extend(request)),
      get: (id) => base.get(id),
      purgeExpired: base.purgeExpired
    }
    const runs: Array<{ start: number; end?: number; stoppedEarly: boolean }> = []
    const track = <A, E>(effect: Effect.Effect<A, E>) =>
      Effect.flatMap(TestClock.currentTimeMillis, (start) => {
        const run: { start: number; end?: number; stoppedEarly: boolean } = { start, stoppedEarly: false }
        runs.push(run)
        return effect.pipe(
          Effect.onExit((exit) =>
            Effect.map(TestClock.currentTimeMillis, (end) => {
              run.end = end
              // a stubborn body ends its region uninterruptibly, but as interrupted: its value is lost
              // (as in any Effect program), and its outcome unknown
              run.stoppedEarly = Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)
            })
          )
        )
      })
    const body = (): Effect.Effect<string, string> => {
      switch (c.downstream) {
        case "value":
          return Effect.as(Effect.sleep(Duration.millis(ENDS_AT)), "written")
        case "failure":
          return Effect.zipRight(Effect.sleep(Duration.millis(ENDS_AT)), Effect.fail("rejected"))
        case "defect":
          return Effect.zipRight(Effect.sleep(Duration.millis(ENDS_AT)), Effect.die("the parser failed"))
        case "hang":
          return Effect.never
        case "stubborn":
          return Effect.uninterruptible(Effect.as(Effect.sleep(Duration.millis(STUBBORN_ENDS_AT)), "written"))
      }
    }
    const operation = Idempotency.make({
      name: "exit-space",
      payload: Schema.Null,
      success: c.throwingEncoder ? Throwing : Schema.String,
      failure: Schema.String,
      timeout: "1 second",
      onFailure: () => c.onFailure,
      onTimeout: c.onTimeout,
      onDefect: c.onDefect,
      execute: () => track(body())
    })
    const provide = <A, E>(effect: Effect.Effect<A, E, IdempotencyStore.IdempotencyStore>) =>
      Effect.provideService(effect, IdempotencyStore.IdempotencyStore, store)
    const start = yield* TestClock.currentTimeMillis
    const deadline = c.deadline ? start + DEADLINE_AFTER : undefined
    const first = yield* Effect.fork(
      provide(operation.runDetailed({ key: "k", payload: null, ...(deadline === undefined ? {} : { deadline }) }))
    )
    if (c.interrupt !== "none") {
      yield* TestClock.adjust(Duration.millis(INTERRUPT_AT[c.interrupt]))
      yield* Effect.fork(Fiber.interrupt(first))
    }
    let steps = 0
    while (first.unsafePoll() === null && steps++ < 100) yield* TestClock.adjust("100 millis")
    const answer = first.unsafePoll()
    check(answer !== null, "the caller has an answer")
    const answeredAt = (yield* TestClock.currentTimeMillis) - start
    if (deadline !== undefined && c.downstream !== "stubborn") {
      check(answeredAt <= DEADLINE_AFTER + 100, `answered at ${answeredAt} ms, past the deadline`)
    }
    const callsAtAnswer = calls.length
    yield* TestClock.adjust("30 seconds")
    check(calls.length === callsAtAnswer, "no store call after the answer")
    check(runs.length === 1, "one run")

    // the store heals; a retry comes after every lease has ended
    faulty = false
    const retry = yield* Effect.fork(Effect.exit(provide(operation.runDetailed({ key: "k", payload: null }))))
    let retrySteps = 0
    while (retry.unsafePoll() === null && retrySteps++ < 100) yield* TestClock.adjust("100 millis")
    check(retry.unsafePoll() !== null, "the retry has an answer")
    if (runs.length > 1) {
      check(mayRunAgain(c, runs[0]!.stoppedEarly), "ran again, and no policy chose it")
      check(runs[1]!.start >= (runs[0]!.end ?? Infinity), "the runs overlap")
    }
    return { runs: runs.length, violations }
  })

describe("the exit space of one execution", () => {
  it.effect("every combination keeps the invariants of the exit table", () =>
    Effect.gen(function*() {
      const all = cases()
      const violations: Array<string> = []
      let ranAgain = 0
      for (const c of all) {
        const played = yield* play(c)
        if (played.runs > 1) ranAgain++
        violations.push(...played.violations)
      }

      console.log(
        `exit space: ${all.length} combinations explored, ${ranAgain} ran again (as a policy chose), ` +
          `${violations.length} violations`
      )
      if (violations.length > 0) console.log(violations.slice(0, 10).join("\n"))
      assert.deepStrictEqual(violations, [])
      assert.isAbove(ranAgain, 0)
    }), 600_000)
})
