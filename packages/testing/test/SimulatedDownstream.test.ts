import { SimulatedDownstream } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"

const order = { sku: "A-1", quantity: 2 }

/** Calls the downstream with a caller-side timeout, while TestClock moves `advance` forward. */
const callWithTimeout = (
  downstream: SimulatedDownstream.SimulatedDownstream["Type"],
  request: SimulatedDownstream.Request,
  timeout: Duration.DurationInput,
  advance: Duration.DurationInput
) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(Effect.exit(Effect.timeout(downstream.call(request), timeout)))
    yield* TestClock.adjust(advance)
    return yield* Fiber.join(fiber)
  })

describe("SimulatedDownstream", () => {
  it.effect("records each applied write with its time, endpoint, key and body", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make({
        deduplicate: false,
        script: [SimulatedDownstream.succeed("250 millis")]
      })
      const fiber = yield* Effect.fork(downstream.call({ endpoint: "POST /orders", idempotencyKey: "k1", body: order }))
      yield* TestClock.adjust("1 second")
      const receipt = yield* Fiber.join(fiber)
      assert.deepStrictEqual(receipt, { writeId: 1, replayed: false })
      const writes = yield* downstream.writes
      assert.strictEqual(writes.length, 1)
      assert.strictEqual(writes[0]!.at, 250)
      assert.strictEqual(writes[0]!.endpoint, "POST /orders")
      assert.strictEqual(writes[0]!.idempotencyKey, "k1")
      assert.deepStrictEqual(writes[0]!.body, order)
      const calls = yield* downstream.calls
      assert.strictEqual(calls[0]!.effect, "applied")
      assert.strictEqual(calls[0]!.answer, "succeeded")
    }))

  it.effect("fails as scripted without writing", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make({
        deduplicate: false,
        script: [SimulatedDownstream.fail("Declined")]
      })
      const error = yield* Effect.flip(downstream.call({ body: order }))
      assert.strictEqual(error._tag, "SimulatedDownstreamError")
      assert.strictEqual(error.code, "Declined")
      assert.strictEqual(error.call, 1)
      assert.strictEqual((yield* downstream.writes).length, 0)
      assert.strictEqual((yield* downstream.calls)[0]!.effect, "none")
    }))

  it.effect("answers late after writing: a caller with a shorter timeout times out although the write happened", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make({
        deduplicate: false,
        script: [SimulatedDownstream.answerLate({ applyAfter: "100 millis", answerAfter: "30 seconds" })]
      })
      const exit = yield* callWithTimeout(downstream, { body: order }, "5 seconds", "1 minute")
      assert.isTrue(Exit.isFailure(exit))
      const writes = yield* downstream.writes
      assert.strictEqual(writes.length, 1)
      assert.strictEqual(writes[0]!.at, 100)
      assert.strictEqual((yield* downstream.calls)[0]!.answer, "abandoned")
    }))

  it.effect("answers late: a caller that waits long enough gets the receipt", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make({
        deduplicate: false,
        script: [SimulatedDownstream.answerLate({ answerAfter: "30 seconds" })]
      })
      const exit = yield* callWithTimeout(downstream, { body: order }, "1 minute", "2 minutes")
      assert.deepStrictEqual(exit, Exit.succeed({ writeId: 1, replayed: false }))
    }))

  it.effect("never answers, with or without applying the write", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make({
        deduplicate: false,
        script: [SimulatedDownstream.neverAnswer({ applied: true }), SimulatedDownstream.neverAnswer()]
      })
      const first = yield* callWithTimeout(downstream, { body: order }, "10 seconds", "1 hour")
      const second = yield* callWithTimeout(downstream, { body: order }, "10 seconds", "1 hour")
      assert.isTrue(Exit.isFailure(first))
      assert.isTrue(Exit.isFailure(second))
      assert.strictEqual((yield* downstream.writes).length, 1)
      const calls = yield* downstream.calls
      assert.deepStrictEqual(calls.map((call) => [call.effect, call.answer]), [
        ["applied", "abandoned"],
        ["none", "abandoned"]
      ])
    }))

  it.effect("applies the write, then fails", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make({
        deduplicate: false,
        script: [SimulatedDownstream.applyThenFail("Unavailable", "2 seconds")]
      })
      const exit = yield* callWithTimeout(downstream, { body: order }, "1 minute", "1 minute")
      assert.isTrue(Exit.isFailure(exit))
      const writes = yield* downstream.writes
      assert.strictEqual(writes.length, 1)
      assert.strictEqual(writes[0]!.at, 2_000)
    }))

  it.effect("deduplicates by the forwarded key when on: the retry gets the original write", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make({ deduplicate: true })
      const first = yield* downstream.call({ idempotencyKey: "k1", body: order })
      const retry = yield* downstream.call({ idempotencyKey: "k1", body: order })
      const other = yield* downstream.call({ idempotencyKey: "k2", body: order })
      assert.deepStrictEqual(first, { writeId: 1, replayed: false })
      assert.deepStrictEqual(retry, { writeId: 1, replayed: true })
      assert.deepStrictEqual(other, { writeId: 2, replayed: false })
      assert.deepStrictEqual((yield* downstream.calls).map((call) => call.effect), [
        "applied",
        "deduplicated",
        "applied"
      ])
    }))

  it.effect("repeats the write when deduplication is off, and reports the duplicate", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make({ deduplicate: false })
      yield* downstream.call({ endpoint: "POST /orders", idempotencyKey: "k1", body: order })
      yield* downstream.call({ endpoint: "POST /orders", idempotencyKey: "k1", body: { quantity: 2, sku: "A-1" } })
      yield* downstream.call({ endpoint: "POST /orders", body: { sku: "B-2", quantity: 1 } })
      const duplicates = yield* downstream.duplicates
      assert.strictEqual(duplicates.length, 1)
      assert.deepStrictEqual(duplicates[0]!.map((write) => write.id), [1, 2])
    }))

  it.effect("never deduplicates a call without a key", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make({ deduplicate: true })
      yield* downstream.call({ body: order })
      yield* downstream.call({ body: order })
      assert.strictEqual((yield* downstream.writes).length, 2)
      assert.strictEqual((yield* downstream.duplicates).length, 1)
    }))

  it.effect("takes behaviours from the fiber's own script first, then the service's, then `otherwise`", () =>
    Effect.gen(function*() {
      yield* SimulatedDownstream.enqueue([SimulatedDownstream.fail("FromService")])
      const local = yield* SimulatedDownstream.call({ body: 1 }).pipe(
        Effect.flip,
        SimulatedDownstream.scripted([SimulatedDownstream.fail("FromFiber")])
      )
      const service = yield* Effect.flip(SimulatedDownstream.call({ body: 2 }))
      const otherwise = yield* Effect.flip(SimulatedDownstream.call({ body: 3 }))
      assert.deepStrictEqual([local.code, service.code, otherwise.code], ["FromFiber", "FromService", "Otherwise"])
      assert.strictEqual((yield* SimulatedDownstream.writes).length, 0)
      assert.strictEqual((yield* SimulatedDownstream.calls).length, 3)
    }).pipe(
      Effect.provide(
        SimulatedDownstream.layer({ deduplicate: false, otherwise: SimulatedDownstream.fail("Otherwise") })
      )
    ))

  it.prop(
    "the arbitrary stays within its latency bound and draws only the kinds asked for",
    [SimulatedDownstream.arbitrary({ maxLatency: "10 seconds", kinds: ["Succeed", "AnswerLate"], failures: ["X"] })],
    ([behaviour]) => {
      assert.include(["Succeed", "AnswerLate"], behaviour._tag)
      if (behaviour._tag === "Succeed") assert.isAtMost(behaviour.latencyMs, 10_000)
      if (behaviour._tag === "AnswerLate") {
        assert.isAtMost(behaviour.applyAfterMs, behaviour.answerAfterMs)
        assert.isAtMost(behaviour.answerAfterMs, 20_000)
      }
    },
    { fastCheck: { numRuns: 200 } }
  )

  it("the arbitrary draws every kind of behaviour by default", () => {
    const kinds = new Set(
      FastCheck.sample(SimulatedDownstream.arbitrary({ maxLatency: "1 second" }), { numRuns: 500, seed: 42 }).map((
        behaviour
      ) => behaviour._tag)
    )
    assert.deepStrictEqual([...kinds].sort(), [
      "AnswerLate",
      "ApplyThenDie",
      "ApplyThenFail",
      "Die",
      "Fail",
      "IgnoreInterruption",
      "NeverAnswer",
      "Succeed"
    ])
  })

  it.effect("dies before or after the write, and ignores interruption when told to", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make({
        deduplicate: false,
        script: [
          SimulatedDownstream.die(),
          SimulatedDownstream.applyThenDie(),
          SimulatedDownstream.ignoreInterruption({ applyAfter: "1 second", answerAfter: "2 seconds" })
        ]
      })
      const before = yield* Effect.exit(downstream.call({ body: 1 }))
      const after = yield* Effect.exit(downstream.call({ body: 2 }))
      assert.isTrue(before._tag === "Failure" && before.cause._tag === "Die")
      assert.isTrue(after._tag === "Failure" && after.cause._tag === "Die")
      assert.deepStrictEqual((yield* downstream.writes).map((write) => write.body), [2])
      const stubborn = yield* Effect.fork(downstream.call({ body: 3 }))
      yield* TestClock.adjust("500 millis")
      const interrupting = yield* Effect.fork(Fiber.interrupt(stubborn))
      yield* TestClock.adjust("2 seconds")
      yield* Fiber.join(interrupting)
      // the interruption waited for the call: its write was applied and it answered
      assert.deepStrictEqual((yield* downstream.writes).map((write) => write.body), [2, 3])
      assert.strictEqual((yield* downstream.calls)[2]!.answer, "succeeded")
    }))
})
