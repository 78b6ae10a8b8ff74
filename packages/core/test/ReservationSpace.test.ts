/**
 * Every sequence of answers the store can give to the reservations of one attempt, run through the
 * real engine on `TestClock`: a reservation made (at once, slowly, or answered past the deadline), a
 * live record in progress (a conflict), a completed record, one with another fingerprint, an unknown
 * outcome, an expired lease the store refused to take over, a store that fails or hangs; a conflict
 * is answered at once or waited on (`waitOnConflict`), and the attempt has a deadline or none. At
 * each sequence it checks the rules of the exit table for the reservation:
 *
 * - the downstream runs once when a reservation is made in time, and never otherwise;
 * - the answer follows from the last answer of the store (a replay, `KeyReused`, a replayed timeout,
 *   `IdempotencyConflict`, `StoreUnavailable`);
 * - the attempt answers by its deadline, and reserves at most as often as its schedule allows;
 * - a reservation cut off by the deadline, which the store may have applied, is given back;
 * - every write carries the attempt's token, and none comes after the answer;
 * - the engine calls the store and answers as the reservation's machine (`src/internal/reservation.ts`)
 *   does over the same answers: the driver runs the machine it is checked against.
 */
import { Idempotency, IdempotencyError, IdempotencyPolicy, IdempotencyRecord } from "@effect-idempotency/core"
import { IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import type { StoreAnswer } from "./utils/ReservationModel.js"
import * as Model from "./utils/ReservationModel.js"
import { expectedOutcome } from "./utils/ReservationModel.js"

/** The store's answers, as the real engine meets them: a cut-off is a slow or a hanging reservation. */
type Answer = Exclude<StoreAnswer, "cutOff"> | "slow" | "hangs"

const answers: ReadonlyArray<Answer> = [
  ...Model.storeAnswers.filter((answer): answer is Exclude<StoreAnswer, "cutOff"> => answer !== "cutOff"),
  "slow",
  "hangs"
]

/** How long a slow reservation takes; past the deadline's bound when there is one. */
const SLOW = 450
const DEADLINE = 500
const MARGIN = 100
/** The wait between two reservations on a conflict: the second wait crosses the deadline. */
const WAIT = 300
const RETRIES = 2

interface Case {
  /** The store's answers, one per reservation; a conflict (`live`) again once they are used up. */
  readonly script: ReadonlyArray<Answer>
  readonly wait: boolean
  readonly deadline: boolean
}

/** The sequences: up to `RETRIES` conflicts, then any answer. */
const cases = (): ReadonlyArray<Case> => {
  const all: Array<Case> = []
  for (let conflicts = 0; conflicts <= RETRIES + 1; conflicts++) {
    for (const last of answers) {
      for (const wait of [false, true]) {
        for (const deadline of [false, true]) {
          // a hanging store is bounded by the deadline, or by the store's own request bounds
          if (last === "hangs" && !deadline) continue
          all.push({ script: [...Array<Answer>(conflicts).fill("live"), last], wait, deadline })
        }
      }
    }
  }
  return all
}

/** The store's answer as the machine sees it: a slow or hanging reservation is cut off by a deadline. */
const asSeen = (answer: Answer, c: Case): StoreAnswer =>
  answer === "hangs" || (answer === "slow" && c.deadline) ? "cutOff" : answer === "slow" ? "reserved" : answer

const play = (c: Case) =>
  Effect.gen(function*() {
    const t0 = yield* TestClock.currentTimeMillis
    const calls: Array<{ readonly method: string; readonly at: number; readonly token: string }> = []
    const used: Array<Answer> = []
    let runs = 0
    const log = (method: string, token: string) =>
      Effect.map(TestClock.currentTimeMillis, (now) => void calls.push({ method, at: now - t0, token }))
    const store: IdempotencyStore.IdempotencyStore["Type"] = {
      reserve: (request) =>
        Effect.flatMap(log("reserve", request.token), () =>
          Effect.flatMap(TestClock.currentTimeMillis, (now): Effect.Effect<
            IdempotencyRecord.ReserveResult,
            IdempotencyError.StoreUnavailable
          > => {
            const answer = c.script[used.length] ?? "live"
            used.push(answer)
            const reserved: IdempotencyRecord.ReserveResult = IdempotencyRecord.ReserveResult.Reserved({
              token: request.token,
              attempt: 1,
              leaseUntil: now + Duration.toMillis(request.lease),
              expiresAt: now + Duration.toMillis(request.ttl)
            })
            switch (answer) {
              case "reserved":
                return Effect.succeed(reserved)
              case "slow":
                return Effect.as(Effect.sleep(Duration.millis(SLOW)), reserved)
              case "failed":
                return Effect.fail(new IdempotencyError.StoreUnavailable({ method: "reserve", cause: "injected" }))
              case "hangs":
                return Effect.never
              default: {
                // a record found: as the machine's checker has it, with this attempt's fingerprint
                const event = Model.storeEvent(answer, now, now, request.fingerprint)
                return event._tag === "StoreAnswered" ? Effect.succeed(event.result) : Effect.die(event)
              }
            }
          })),
      complete: (request) =>
        log("complete", request.token),
      release: (request) =>
        log("release", request.token),
      markFailed: (request) => log("markFailed", request.token),
      extend: (request) => log("extend", request.token),
      get: () => Effect.succeedNone,
      purgeExpired: () => Effect.succeed(0)
    }
    const operation = Idempotency.make({
      name: "reservation-space",
      payload: Schema.Null,
      success: Schema.String,
      timeout: "1 second",
      leaseMargin: Duration.millis(MARGIN),
      ...(c.wait
        ? {
          inProgress: IdempotencyPolicy.waitOnConflict(
            Schedule.intersect(Schedule.spaced(Duration.millis(WAIT)), Schedule.recurs(RETRIES))
          )
        }
        : {}),
      execute: () => Effect.sync(() => ++runs).pipe(Effect.as("written"))
    })
    const request = { key: "k", payload: null, ...(c.deadline ? { deadline: t0 + DEADLINE } : {}) }
    let answeredAt = -1
    const fiber = yield* Effect.fork(
      Effect.provideService(operation.runDetailed(request), IdempotencyStore.IdempotencyStore, store).pipe(
        Effect.ensuring(Effect.map(TestClock.currentTimeMillis, (now) => void (answeredAt = now - t0)))
      )
    )
    // each sleep due within a step wakes at its own time
    for (let step = 0; step < 60 && fiber.unsafePoll() === null; step++) yield* TestClock.adjust("50 millis")
    const exit = fiber.unsafePoll()
    // time for anything left behind to show itself
    yield* TestClock.adjust("5 seconds")
    return { exit, calls, used, runs, answeredAt }
  })

describe("the reservation, over every sequence of the store's answers", () => {
  it.effect("keeps the exit table's rules", () =>
    Effect.gen(function*() {
      const all = cases()
      const violations: Array<string> = []
      let waitedOut = 0
      for (const c of all) {
        const { answeredAt, calls, exit, runs, used } = yield* play(c)
        const name = JSON.stringify(c)
        if (exit === null) {
          violations.push(`${name}: no answer`)
          continue
        }
        const how = Exit.match(exit, {
          onSuccess: (result) => result.replayed ? (result.value === "stored" ? "replayed" : "replay?") : "executed",
          onFailure: (cause) =>
            Option.match(Cause.failureOption(cause), {
              onNone: () => "defect",
              onSome: (error) => (error as { readonly _tag: string })._tag
            })
        })
        if (used.length === RETRIES + 1) waitedOut++
        const last = used[used.length - 1]!
        const rule = (ok: boolean, what: string) => {
          if (!ok) violations.push(`${name}: ${what} (answers ${used.join(",")}, ${how} at ${answeredAt})`)
        }
        const expected = expectedOutcome(asSeen(last, c))
        rule(how === expected, `expected ${expected}`)
        // the driver runs the machine: the same store calls and answer as the machine over these answers
        const machine = Model.replay(
          Model.config({
            waits: c.wait,
            timeoutMs: 1_000,
            until: c.deadline ? DEADLINE - MARGIN : Infinity,
            deadline: c.deadline ? DEADLINE : Infinity
          }),
          used.map((answer) => asSeen(answer, c)),
          0
        )
        rule(
          JSON.stringify(calls.map((call) => call.method).filter((m) => m === "reserve" || m === "release")) ===
            JSON.stringify(machine.calls),
          `the machine calls ${machine.calls.join(",")}`
        )
        rule(how === Model.outcomeOf(machine.answer), `the machine answers ${Model.outcomeOf(machine.answer)}`)
        rule(runs === (how === "executed" ? 1 : 0), `the downstream ran ${runs} times`)
        if (c.deadline) rule(answeredAt <= DEADLINE, "answered past the deadline")
        rule(used.length <= (c.wait ? RETRIES + 1 : 1), `${used.length} reservations`)
        const token = calls.find((call) => call.method === "reserve")?.token
        rule(calls.every((call) => call.token === token), "a write without the attempt's token")
        rule(calls.every((call) => call.at <= answeredAt), "a store call after the answer")
        const cut = (last === "slow" || last === "hangs") && c.deadline
        rule(calls.some((call) => call.method === "release") === cut, cut ? "no release" : "a release")
        rule(
          calls.some((call) => call.method === "complete") === (how === "executed"),
          "a recording without an execution, or none after it"
        )
      }
      assert.deepStrictEqual(violations.slice(0, 10), [], `${violations.length} of ${all.length} sequences`)
      assert.isAbove(all.length, 100)
      // some attempts waited through their whole schedule
      assert.isAbove(waitedOut, 0)
    }))
})

describe("a reservation that fails", () => {
  const operation = Idempotency.make({
    name: "reservation-fails",
    payload: Schema.Null,
    success: Schema.String,
    execute: () => Effect.succeed("written")
  })
  const storeWith = (
    reserve: IdempotencyStore.IdempotencyStore["Type"]["reserve"],
    calls: Array<string>
  ): IdempotencyStore.IdempotencyStore["Type"] => ({
    reserve: (request) => Effect.zipRight(Effect.sync(() => calls.push("reserve")), reserve(request)),
    complete: () => Effect.sync(() => void calls.push("complete")),
    release: () => Effect.sync(() => void calls.push("release")),
    markFailed: () => Effect.sync(() => void calls.push("markFailed")),
    extend: () => Effect.sync(() => void calls.push("extend")),
    get: () => Effect.succeedNone,
    purgeExpired: () => Effect.succeed(0)
  })

  it.effect("keeps the store's whole cause: its failure stays in the error channel beside a defect", () =>
    Effect.gen(function*() {
      const calls: Array<string> = []
      const unavailable = new IdempotencyError.StoreUnavailable({ method: "reserve", cause: "injected" })
      const store = storeWith(() => Effect.fail(unavailable).pipe(Effect.ensuring(Effect.die("finalizer"))), calls)
      const exit = yield* Effect.exit(
        Effect.provideService(operation.run({ key: "k", payload: null }), IdempotencyStore.IdempotencyStore, store)
      )
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isSuccess(exit)) return
      assert.deepStrictEqual(Cause.failures(exit.cause).pipe((chunk) => [...chunk]), [unavailable])
      assert.strictEqual([...Cause.defects(exit.cause)].length, 1)
      assert.deepStrictEqual(calls, ["reserve"])
    }))

  it.effect("is given back only when the attempt's deadline cut it off, never without a deadline", () =>
    Effect.gen(function*() {
      const calls: Array<string> = []
      // a store whose own failure reads like a cut-off: without a deadline, nothing was cut off
      const store = storeWith(
        () =>
          Effect.fail(
            new IdempotencyError.StoreUnavailable({
              method: "reserve",
              cause: "no answer before the attempt's deadline"
            })
          ),
        calls
      )
      const error = yield* Effect.flip(
        Effect.provideService(operation.run({ key: "k", payload: null }), IdempotencyStore.IdempotencyStore, store)
      )
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.deepStrictEqual(calls, ["reserve"])
    }))
})
