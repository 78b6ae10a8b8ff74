/**
 * The driver cannot drift from the machine it runs: each path of the execution's model (a
 * scenario, and a plan for the store's answers and the caller) is played on the real engine (memory
 * store, `TestClock`), whose extensions, interruptions and answer must be those of one of the
 * machine's orderings of the same path.
 */
import { Idempotency, IdempotencyError, IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import type { Answer, Scenario } from "./utils/ExecutionModel.js"
import { check, emptyReport, HEARTBEAT, HORIZON, MARGIN, scenarios, SLOW, TIMEOUT } from "./utils/ExecutionModel.js"

/**
 * A path's plan: the answer of each extension (applied, failing, fenced out, slow, hanging), and
 * when the caller is interrupted, if it is; no clock jump (the test clock moves 10 ms at a time, and
 * each sleep due within a step wakes at its own time).
 */
interface Plan {
  readonly name: string
  readonly answer: (extension: number) => Answer
  readonly callerAt?: number
}

const plans: ReadonlyArray<Plan> = [
  { name: "every extension applied", answer: () => "ok" },
  { name: "every extension failing", answer: () => "failed" },
  { name: "the first extension finds the record taken over", answer: () => "lost" },
  { name: "every extension slow", answer: () => "slow" },
  { name: "the first extension hangs", answer: (n) => n === 0 ? "hangs" : "ok" },
  ...[10, 70, 110].map((callerAt): Plan => ({
    name: `the caller interrupted at ${callerAt}`,
    answer: () => "ok",
    callerAt
  }))
]

/** Plays `scenario` on the real engine; its log, as the model writes it. */
const playReal = (scenario: Scenario, plan: Plan) =>
  Effect.gen(function*() {
    const answer = plan.answer
    const log: Array<string> = []
    // the test clock goes on from case to case: the log counts from the case's start
    const t0 = yield* TestClock.currentTimeMillis
    const now = () => Effect.map(TestClock.currentTimeMillis, (t) => t - t0)
    const base = yield* IdempotencyStore.makeMemory({ warn: false })
    let extensions = 0
    const store: IdempotencyStore.IdempotencyStore["Type"] = {
      ...base,
      extend: (request) =>
        Effect.flatMap(now(), (at) => {
          log.push(`extend@${at}`)
          switch (answer(extensions++)) {
            case "ok":
              return base.extend(request)
            case "slow":
              return Effect.zipRight(Effect.sleep(Duration.millis(SLOW)), base.extend(request))
            case "hangs":
              return Effect.never
            case "lost":
              return Effect.fail(new IdempotencyError.LeaseLost({ method: "extend", recordId: "r" }))
            default:
              return Effect.fail(new IdempotencyError.StoreUnavailable({ method: "extend", cause: "injected" }))
          }
        }),
      complete: (request) =>
        scenario.recording === Infinity
          ? Effect.never
          : Effect.zipRight(Effect.sleep(Duration.millis(scenario.recording)), base.complete(request)).pipe(
            Effect.tap(() => void (recorded = true))
          )
    }
    let recorded = false
    let stopped = false
    const downstream = scenario.downstream
    const body: Effect.Effect<string> = downstream._tag === "Stubborn"
      ? Effect.uninterruptible(Effect.as(Effect.sleep(Duration.millis(downstream.at)), "written"))
      : downstream.at === Infinity
      ? Effect.never
      : Effect.as(Effect.sleep(Duration.millis(downstream.at)), "written")
    const operation = Idempotency.make({
      name: "execution-replay",
      payload: Schema.Null,
      success: Schema.String,
      timeout: Duration.millis(TIMEOUT),
      leaseMargin: Duration.millis(MARGIN),
      ...(scenario.heartbeat ? { heartbeat: Duration.millis(HEARTBEAT), lease: Duration.millis(100) } : {}),
      execute: () =>
        body.pipe(Effect.onInterrupt(() =>
          Effect.map(now(), (at) => {
            stopped = true
            log.push(`interrupt@${at}`)
          })
        ))
    })
    const request = { key: "k", payload: null, ...(scenario.deadline ? { deadline: t0 + 120 } : {}) }
    let at = 0
    const fiber = yield* Effect.fork(
      Effect.provideService(operation.runDetailed(request), IdempotencyStore.IdempotencyStore, store).pipe(
        Effect.ensuring(Effect.map(now(), (t) => void (at = t)))
      )
    )
    if (plan.callerAt !== undefined) {
      yield* Effect.fork(Effect.zipRight(Effect.sleep(Duration.millis(plan.callerAt)), Fiber.interruptFork(fiber)))
    }
    // each sleep due within a step wakes at its own time
    for (let step = 0; step < HORIZON && fiber.unsafePoll() === null; step += 10) yield* TestClock.adjust("10 millis")
    const exit = fiber.unsafePoll()
    if (exit === null) return [...log, "no answer"].join(" ")
    const how = Exit.match(exit, {
      onSuccess: (result) => result.recorded ? "recorded" : "cut",
      onFailure: (cause) => {
        const error = Cause.failureOption(cause)
        if (Option.isNone(error)) {
          if (!Cause.isInterruptedOnly(cause)) return "defect"
          // the caller was interrupted: what became of the outcome
          return recorded ? "recorded" : stopped ? "unknown:callerInterrupted" : "cut"
        }
        const e = error.value as { readonly _tag?: string; readonly reason?: string }
        if (e._tag === "DownstreamTimeout") return "unknown:timeout"
        if (e._tag === "LeaseLost") return e.reason === "expiring" ? "unknown:leaseExpiring" : "unknown:leaseLost"
        return `failed:${e._tag}`
      }
    })
    return [...log, `${how}@${at}`].join(" ")
  })

describe("the driver, against the machine", () => {
  // the live clock's timer is not used on TestClock; a downstream ending as the heartbeat or the
  // deadline falls due is left to the machine's checker (the order of a tie is the scheduler's)
  const replayed = scenarios().filter((s) => !s.timer)
  it.effect(`plays as the machine on ${replayed.length * plans.length} paths`, () =>
    Effect.gen(function*() {
      const mismatches: Array<string> = []
      for (const scenario of replayed) {
        for (const plan of plans) {
          const logs = new Set<string>()
          check(scenario, emptyReport(), {
            answer: plan.answer,
            ...(plan.callerAt === undefined ? {} : { callerAt: plan.callerAt }),
            logs
          })
          const real = yield* playReal(scenario, plan)
          if (!logs.has(real)) {
            mismatches.push(
              `${JSON.stringify(scenario)}, ${plan.name}\n  real:    ${real}\n  machine: ${
                [...logs].join("\n           ")
              }`
            )
          }
        }
      }
      assert.deepStrictEqual(mismatches.slice(0, 5), [], `${mismatches.length} paths differ`)
    }), { timeout: 300_000 })
})
