import { IdempotencyKey, IdempotencyRecord } from "@effect-idempotency/core"
import type { IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import * as TestClock from "effect/TestClock"
import type { Sent } from "./utils/scripted.js"
import {
  conditionFailed,
  connectionRefused,
  connectionReset,
  item as storedItem,
  onAbort,
  scriptedStore,
  succeed,
  throttled
} from "./utils/scripted.js"

// How a store call sends its request: one attempt in the common case, the retry schedule only
// after a retryable failure, and what a retry knows about the attempts before it.

const id = IdempotencyRecord.makeRecordId({ operation: "send", key: IdempotencyKey.unsafeMake("key-1") })
const token = "token-1"
const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "1" })

const reserveRequest: IdempotencyStore.ReserveRequest = {
  id,
  token,
  fingerprint: "sha256:send",
  lease: Duration.seconds(30),
  ttl: Duration.hours(1),
  takeover: true
}

/** The record as DynamoDB returns it with a failed condition, at the clock time 1000. */
const item = (status: IdempotencyRecord.Status, owner: string) => ({
  ...storedItem(id, { status, token: owner, fingerprint: "sha256:send" }),
  ...(status === "COMPLETED" ? { outcome_kind: { S: "Success" }, outcome_body: { S: "1" } } : {})
})

/** Answers request n with `answers[n - 1]` (a function that makes the error, or a success). */
const script =
  (...answers: ReadonlyArray<(() => Error) | "ok">) => (sent: Parameters<typeof succeed>[0], n: number) => {
    const answer = answers[n - 1]
    return answer === undefined || answer === "ok" ? succeed(sent) : Promise.reject(answer())
  }

const errorTag = (error: unknown) => (error as { readonly _tag?: string })._tag

/** Lets the scripted client's promises and the fibers they resume run (a few ms of real time). */
const settle = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 20)))

describe("sending a request", () => {
  it.effect("one successful attempt: the retry schedule is never consulted", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1000)
      const { scheduleSteps, sent, store } = yield* scriptedStore(succeed)
      const result = yield* store.reserve(reserveRequest)
      assert.strictEqual(result._tag, "Reserved")
      yield* store.complete({ id, token, outcome, ttl: Duration.hours(1) })
      assert.strictEqual(sent.length, 2)
      assert.strictEqual(scheduleSteps(), 0)
    }))

  it.effect("a failed condition is an answer: one attempt, no schedule", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1000)
      const { scheduleSteps, sent, store } = yield* scriptedStore(script(() => conditionFailed(item("COMPLETED", "x"))))
      const result = yield* store.reserve(reserveRequest)
      assert.strictEqual(result._tag, "Existing")
      assert.strictEqual(sent.length, 1)
      assert.strictEqual(scheduleSteps(), 0)
    }))

  it.effect("a failure that is not retryable is a StoreError at once", () =>
    Effect.gen(function*() {
      const validation = () =>
        Object.assign(new Error("One or more parameter values were invalid"), {
          name: "ValidationException",
          $metadata: { httpStatusCode: 400 }
        })
      const { sent, store } = yield* scriptedStore(script(validation))
      const error = yield* Effect.flip(store.reserve(reserveRequest))
      assert.strictEqual(errorTag(error), "StoreError")
      assert.strictEqual((error as { readonly cause?: { readonly name?: string } }).cause?.name, "ValidationException")
      assert.strictEqual(sent.length, 1)
    }))

  it.effect("throttled twice, then a success: three attempts, the schedule consulted twice", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1000)
      const { scheduleSteps, sent, store } = yield* scriptedStore(script(throttled, throttled, "ok"))
      const result = yield* store.reserve(reserveRequest)
      assert.strictEqual(result._tag, "Reserved")
      assert.strictEqual(sent.length, 3)
      assert.strictEqual(scheduleSteps(), 2)
    }))

  it.effect("throttled past the schedule: StoreUnavailable with the last failure, after 1 + retries attempts", () =>
    Effect.gen(function*() {
      const { scheduleSteps, sent, store } = yield* scriptedStore(() => Promise.reject(throttled()), { retries: 2 })
      const error = yield* Effect.flip(store.get(id))
      assert.strictEqual(errorTag(error), "StoreUnavailable")
      assert.strictEqual((error as { readonly method?: string }).method, "get")
      assert.strictEqual(sent.length, 3)
      assert.strictEqual(scheduleSteps(), 3)
    }))

  it.effect("a retryable failure, then one that is not: StoreError, no more attempts", () =>
    Effect.gen(function*() {
      const denied = () => Object.assign(new Error("denied"), { name: "AccessDeniedException" })
      const { sent, store } = yield* scriptedStore(script(throttled, denied, "ok"))
      const error = yield* Effect.flip(store.get(id))
      assert.strictEqual(errorTag(error), "StoreError")
      assert.strictEqual(sent.length, 2)
    }))

  it.effect("a lost response, then a failed condition on the retry: the retry knows it may be its own write", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1000)
      // the first attempt completed the record, but its answer was lost
      const { sent, store } = yield* scriptedStore(
        script(connectionReset, () => conditionFailed(item("COMPLETED", token)))
      )
      yield* store.complete({ id, token, outcome, ttl: Duration.hours(1) })
      assert.strictEqual(sent.length, 2)
    }))

  it.effect("the uncertainty stays with the call: lost, then throttled, then a failed condition", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1000)
      const { sent, store } = yield* scriptedStore(
        script(connectionReset, throttled, () => conditionFailed(item("FAILED", token)))
      )
      yield* store.markFailed({ id, token, ttl: Duration.hours(1) })
      assert.strictEqual(sent.length, 3)
    }))

  it.effect("a refused connection was never sent: a failed condition on the retry is LeaseLost", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1000)
      const { sent, store } = yield* scriptedStore(
        script(connectionRefused, () => conditionFailed(item("COMPLETED", token)))
      )
      const error = yield* Effect.flip(store.complete({ id, token, outcome, ttl: Duration.hours(1) }))
      assert.strictEqual(error._tag, "LeaseLost")
      assert.strictEqual(sent.length, 2)
    }))

  it.effect("a failed condition on the first attempt is LeaseLost, whatever the record shows", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1000)
      const { store } = yield* scriptedStore(script(() => conditionFailed(item("COMPLETED", token))))
      const error = yield* Effect.flip(store.complete({ id, token, outcome, ttl: Duration.hours(1) }))
      assert.strictEqual(error._tag, "LeaseLost")
    }))

  it.effect("interrupting the call aborts the request in flight", () =>
    Effect.gen(function*() {
      const { sent, store } = yield* scriptedStore(() => new Promise<never>(() => {}))
      const fiber = yield* Effect.fork(store.get(id))
      yield* settle
      assert.strictEqual(sent.length, 1)
      assert.isFalse(sent[0]!.signal?.aborted)
      yield* Fiber.interrupt(fiber)
      assert.isTrue(sent[0]!.signal?.aborted)
    }))

  it.effect("with the SDK's Node handler, a plain signal: interruption aborts it through onabort", () =>
    Effect.gen(function*() {
      const { sent, store } = yield* scriptedStore(() => new Promise<never>(() => {}), { nodeHandler: true })
      const fiber = yield* Effect.fork(store.get(id))
      yield* settle
      const signal = sent[0]!.signal
      assert.isDefined(signal)
      assert.isFalse(signal instanceof AbortSignal)
      let aborted = 0
      onAbort(sent[0]!, () => aborted++)
      yield* Fiber.interrupt(fiber)
      assert.isTrue(signal?.aborted)
      assert.strictEqual(aborted, 1)
    }))

  it.effect("with the SDK's Node handler, an attempt past requestTimeout is aborted through its plain signal", () =>
    Effect.gen(function*() {
      const { sent, store } = yield* scriptedStore(hang, { nodeHandler: true, retries: 0 })
      const fiber = yield* Effect.fork(store.get(id))
      yield* advance("3 seconds")
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(sent.length, 1)
      assert.isFalse(sent[0]!.signal instanceof AbortSignal)
      assert.isTrue(sent[0]!.signal?.aborted)
    }))

  it.effect("interrupting the call while it waits for a retry stops it", () =>
    Effect.gen(function*() {
      const { sent, store } = yield* scriptedStore(() => Promise.reject(throttled()), {
        retrySchedule: Schedule.spaced("1 second")
      })
      const fiber = yield* Effect.fork(store.get(id))
      yield* settle
      // the first attempt failed; the retry waits for the (test) clock
      assert.strictEqual(sent.length, 1)
      yield* Fiber.interrupt(fiber)
      yield* TestClock.adjust("10 seconds")
      yield* settle
      assert.strictEqual(sent.length, 1)
    }))
})

/** A request that never answers, and fails as the SDK does when its signal aborts it. */
const hang = (sent: Sent): Promise<never> =>
  new Promise<never>((_, reject) => {
    onAbort(sent, () => reject(Object.assign(new Error("aborted"), { name: "AbortError" })))
  })

/** Moves the test clock by `step` at a time, up to `total`, letting promises and fibers run after each step. */
const advance = (total: Duration.DurationInput, step: Duration.DurationInput = "100 millis") =>
  Effect.gen(function*() {
    const steps = Math.ceil(Duration.toMillis(total) / Duration.toMillis(step))
    for (let i = 0; i < steps; i++) {
      yield* TestClock.adjust(step)
      yield* settle
    }
  })

/** Runs `call` while `meanwhile` moves the clock: it fails with `StoreUnavailable`; that error's cause, and when. */
const failsUnavailable = <A, E>(call: Effect.Effect<A, E>, meanwhile: Effect.Effect<void>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(Effect.zip(Effect.flip(call), Clock.currentTimeMillis))
    yield* meanwhile
    const [error, failedAt] = yield* Fiber.join(fiber)
    assert.strictEqual(errorTag(error), "StoreUnavailable")
    return { cause: (error as { readonly cause?: unknown }).cause, failedAt }
  })

describe("time limits", () => {
  it.effect("an attempt past requestTimeout is aborted and retried; the call fails at callTimeout", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const { sent, store } = yield* scriptedStore(hang, {
        requestTimeout: "2 seconds",
        callTimeout: "5 seconds",
        retrySchedule: Schedule.spaced("1 second")
      })
      const { cause, failedAt } = yield* failsUnavailable(store.get(id), advance("6 seconds"))
      assert.isTrue(Cause.isTimeoutException(cause))
      // attempts at 0 (aborted at 2 s) and at 3 s (aborted at 5 s, the end of the call)
      assert.strictEqual(sent.length, 2)
      assert.isTrue(sent.every((request) => request.signal?.aborted === true))
      assert.isAtLeast(failedAt, 5000)
      assert.isAtMost(failedAt, 5100)
    }))

  it.effect("the retry schedule's waits count: throttled every time, the call fails at callTimeout", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const { sent, store } = yield* scriptedStore(() => Promise.reject(throttled()), {
        callTimeout: "5 seconds",
        retrySchedule: Schedule.spaced("2 seconds")
      })
      const { cause, failedAt } = yield* failsUnavailable(store.get(id), advance("6 seconds"))
      assert.isTrue(Cause.isTimeoutException(cause))
      // attempts at 0, 2 s and 4 s; the wait for the one at 6 s is cut at 5 s
      assert.strictEqual(sent.length, 3)
      assert.strictEqual(failedAt, 5000)
    }))

  it.effect("callTimeout bounds all the requests of a call together, not each one", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1000)
      // the reservation's write fails its condition 2 s in, without the item (as dynalite answers),
      // so the store reads the record: that read hangs
      const conditionAnswer: { fail?: () => void } = {}
      const { sent, store } = yield* scriptedStore(
        (request, n) =>
          n === 1
            ? new Promise((_, reject) => {
              conditionAnswer.fail = () => reject(conditionFailed())
            })
            : hang(request),
        { requestTimeout: "10 seconds", callTimeout: "3 seconds" }
      )
      const { failedAt } = yield* failsUnavailable(
        store.reserve(reserveRequest),
        advance("2 seconds").pipe(
          Effect.zipRight(Effect.sync(() => conditionAnswer.fail?.())),
          Effect.zipRight(advance("2 seconds"))
        )
      )
      assert.deepStrictEqual(sent.map((request) => request.command), ["PutItem", "GetItem"])
      // the call's end: 3 s after it started, not 3 s after the read started
      assert.isAtLeast(failedAt, 4000)
      assert.isAtMost(failedAt, 4100)
    }))

  it.effect("Duration.infinity: no limit, and nothing is watched", () =>
    Effect.gen(function*() {
      const { sent, store } = yield* scriptedStore(hang, {
        requestTimeout: Duration.infinity,
        callTimeout: Duration.infinity
      })
      const fiber = yield* Effect.fork(store.get(id))
      yield* settle
      yield* TestClock.adjust("1 hour")
      yield* settle
      assert.isNull(fiber.unsafePoll())
      assert.isFalse(sent[0]!.signal?.aborted)
      yield* Fiber.interrupt(fiber)
      assert.isTrue(sent[0]!.signal?.aborted)
    }))
})
