/**
 * The pieces `Idempotency` gives to engines of their own (the transactional modes): an attempt's
 * time limits, the wait on a conflict bounded by them, and the payload's fingerprint as
 * `InvalidPayload`.
 */
import { Idempotency, IdempotencyError } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"

const window = (request: Idempotency.Request<unknown>) =>
  Idempotency.attemptWindow({ request, timeout: Duration.seconds(30), margin: Duration.seconds(1), now: 1_000 })

describe("engines of their own", () => {
  it("attemptWindow: the operation's timeout, the request's, and the deadline less the margin", () => {
    assert.deepStrictEqual(window({ key: "k", payload: 1 }), { timeoutMillis: 30_000, until: 31_000, end: 32_000 })
    assert.deepStrictEqual(window({ key: "k", payload: 1, timeout: "2 seconds" }), {
      timeoutMillis: 2_000,
      until: 3_000,
      end: 4_000
    })
    // the downstream stops a margin before the deadline; the attempt answers by the deadline
    assert.deepStrictEqual(window({ key: "k", payload: 1, deadline: 6_000 }), {
      timeoutMillis: 4_000,
      until: 5_000,
      end: 6_000
    })
    assert.isAtMost(window({ key: "k", payload: 1, deadline: 1_500 }).timeoutMillis, 0)
  })

  it.effect("retryOnConflict: tries again as the schedule allows, and answers the last conflict at `until`", () =>
    Effect.gen(function*() {
      const tries = yield* Ref.make(0)
      const conflict = new IdempotencyError.IdempotencyConflict({ operation: "op", key: "k", retryAfterMillis: 100 })
      const attempt = Effect.zipRight(Ref.update(tries, (n) => n + 1), Effect.fail(conflict))
      const fiber = yield* Effect.fork(
        Effect.flip(Idempotency.retryOnConflict(attempt, Schedule.spaced("300 millis"), 1_000))
      )
      yield* TestClock.adjust("5 seconds")
      const answer = yield* Fiber.join(fiber)
      assert.strictEqual(answer, conflict)
      // at 0, 300, 600 and 900 ms; the wait that would end at 1,200 ms is cut at 1,000
      assert.strictEqual(yield* Ref.get(tries), 4)
    }))

  it.effect("retryOnConflict: any other failure ends it at once", () =>
    Effect.gen(function*() {
      const tries = yield* Ref.make(0)
      const attempt = Effect.zipRight(Ref.update(tries, (n) => n + 1), Effect.fail("other" as const))
      assert.strictEqual(yield* Effect.flip(Idempotency.retryOnConflict(attempt, Schedule.forever, 10_000)), "other")
      assert.strictEqual(yield* Ref.get(tries), 1)
    }))

  it.effect("fingerprintOf: a payload that does not encode is InvalidPayload, without its value", () =>
    Effect.gen(function*() {
      const fingerprint = Idempotency.fingerprintOf("op", Schema.Struct({ n: Schema.Int }))
      assert.match(yield* fingerprint({ n: 1 }), /^sha256:/)
      const error = yield* Effect.flip(fingerprint({ n: 1.5 }))
      assert.strictEqual(error._tag, "InvalidPayload")
      assert.strictEqual(error.operation, "op")
    }))
})
