import { Idempotency, IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyHttpClient } from "@effect-idempotency/platform"
import { SimulatedDownstream } from "@effect-idempotency/testing"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"

const order = { sku: "A-1", quantity: 2 }
const ORDERS = "POST https://api.example/orders"

/** Calls the downstream with a caller-side timeout, while TestClock moves `advance` forward. */
const callWithTimeout = (
  downstream: SimulatedDownstream.SimulatedDownstream["Type"],
  behaviour: SimulatedDownstream.Behaviour,
  timeout: Duration.DurationInput,
  advance: Duration.DurationInput
) =>
  Effect.gen(function*() {
    const call = downstream.call({ endpoint: ORDERS, body: order }).pipe(Effect.timeout(timeout), Effect.exit)
    const fiber = yield* Effect.fork(SimulatedDownstream.scripted(call, [behaviour]))
    yield* TestClock.adjust(advance)
    return yield* Fiber.join(fiber)
  })

describe("SimulatedDownstream", () => {
  it.effect("records each applied write with its time, endpoint, key and body", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make()
      const fiber = yield* Effect.fork(
        downstream.call({ endpoint: ORDERS, idempotencyKey: "k1", body: order }).pipe(
          SimulatedDownstream.scripted([SimulatedDownstream.succeed("250 millis")])
        )
      )
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(yield* Fiber.join(fiber), { writeId: 1, replayed: false })
      const [write] = yield* downstream.writes
      assert.deepStrictEqual(
        { ...write },
        { id: 1, call: 1, at: 250, endpoint: ORDERS, idempotencyKey: "k1", body: order, attempt: undefined }
      )
      const [call] = yield* downstream.calls
      assert.deepStrictEqual([call!.effect, call!.answer], ["applied", "succeeded"])
    }))

  it.effect("fails as scripted without writing", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make()
      const error = yield* downstream.call({ endpoint: ORDERS, body: order }).pipe(
        Effect.flip,
        SimulatedDownstream.scripted([SimulatedDownstream.fail("Declined")])
      )
      assert.deepStrictEqual([error._tag, error.code, error.call], ["SimulatedDownstreamError", "Declined", 1])
      assert.strictEqual((yield* downstream.writes).length, 0)
      assert.strictEqual((yield* downstream.calls)[0]!.effect, "none")
    }))

  it.effect("answers late after writing: a caller with a shorter timeout times out although the write happened", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make()
      const late = SimulatedDownstream.answerLate({ applyAfter: "100 millis", answerAfter: "30 seconds" })
      assert.isTrue(Exit.isFailure(yield* callWithTimeout(downstream, late, "5 seconds", "1 minute")))
      assert.deepStrictEqual((yield* downstream.writes).map((write) => write.at), [100])
      assert.strictEqual((yield* downstream.calls)[0]!.answer, "abandoned")
      // a caller that waits long enough gets the receipt
      const exit = yield* callWithTimeout(downstream, late, "1 minute", "2 minutes")
      assert.deepStrictEqual(exit, Exit.succeed({ writeId: 2, replayed: false }))
    }))

  it.effect("cancels a pending write when its caller gives up, unless the write lands late by design", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make()
      const timing = { applyAfter: "10 seconds", answerAfter: "12 seconds" } as const
      // the caller gives up after 5 seconds
      const giveUp = (behaviour: Parameters<typeof callWithTimeout>[1]) =>
        callWithTimeout(downstream, behaviour, "5 seconds", "1 minute")
      const cancelled = yield* giveUp(SimulatedDownstream.answerLate(timing))
      assert.isTrue(Exit.isFailure(cancelled))
      assert.strictEqual((yield* downstream.writes).length, 0, "the pending write went with its caller")

      const start = yield* Clock.currentTimeMillis
      const abandoned = yield* giveUp(SimulatedDownstream.writeLandsLate(timing))
      assert.isTrue(Exit.isFailure(abandoned))
      const writes = yield* downstream.writes
      assert.deepStrictEqual(writes.map((write) => write.at - start), [10_000], "applied after its caller gave up")
      const call = (yield* downstream.calls)[1]!
      assert.deepStrictEqual([call.effect, call.answer], ["applied", "abandoned"])
    }))

  it.effect("never answers, with or without applying the write", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make()
      const first = yield* callWithTimeout(
        downstream,
        SimulatedDownstream.neverAnswer({ applied: true }),
        "10 seconds",
        "1 hour"
      )
      const second = yield* callWithTimeout(downstream, SimulatedDownstream.neverAnswer(), "10 seconds", "1 hour")
      assert.isTrue(Exit.isFailure(first) && Exit.isFailure(second))
      assert.strictEqual((yield* downstream.writes).length, 1)
      assert.deepStrictEqual((yield* downstream.calls).map((call) => [call.effect, call.answer]), [
        ["applied", "abandoned"],
        ["none", "abandoned"]
      ])
    }))

  it.effect("applies the write, then fails", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make()
      const exit = yield* callWithTimeout(
        downstream,
        SimulatedDownstream.applyThenFail("Unavailable", "2 seconds"),
        "1 minute",
        "1 minute"
      )
      assert.isTrue(Exit.isFailure(exit))
      assert.deepStrictEqual((yield* downstream.writes).map((write) => write.at), [2_000])
    }))

  it.effect("dies before or after the write, and ignores interruption when told to", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make()
      const call = (body: number) => downstream.call({ endpoint: ORDERS, body })
      const [before, after] = yield* Effect.all([Effect.exit(call(1)), Effect.exit(call(2))]).pipe(
        SimulatedDownstream.scripted([SimulatedDownstream.die(), SimulatedDownstream.applyThenDie()])
      )
      assert.isTrue(before._tag === "Failure" && before.cause._tag === "Die")
      assert.isTrue(after._tag === "Failure" && after.cause._tag === "Die")
      assert.deepStrictEqual((yield* downstream.writes).map((write) => write.body), [2])
      const stubborn = yield* Effect.fork(
        call(3).pipe(
          SimulatedDownstream.scripted([
            SimulatedDownstream.ignoreInterruption({ applyAfter: "1 second", answerAfter: "2 seconds" })
          ])
        )
      )
      yield* TestClock.adjust("500 millis")
      const interrupting = yield* Effect.fork(Fiber.interrupt(stubborn))
      yield* TestClock.adjust("2 seconds")
      yield* Fiber.join(interrupting)
      // the interruption waited for the call: its write was applied and it answered
      assert.deepStrictEqual((yield* downstream.writes).map((write) => write.body), [2, 3])
      assert.strictEqual((yield* downstream.calls)[2]!.answer, "succeeded")
      // its caller, interrupted, ends interrupted (as any Effect): the answer is lost to it
      assert.isTrue(Exit.isInterrupted(yield* Fiber.await(stubborn)))
    }))

  it.effect("deduplicates by the key on the endpoints named: the retry gets the original write", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make({ deduplicate: [ORDERS] })
      const call = (endpoint: string, idempotencyKey: string) =>
        downstream.call({ endpoint, idempotencyKey, body: order })
      assert.deepStrictEqual(yield* call(ORDERS, "k1"), { writeId: 1, replayed: false })
      assert.deepStrictEqual(yield* call(ORDERS, "k1"), { writeId: 1, replayed: true })
      assert.deepStrictEqual(yield* call(ORDERS, "k2"), { writeId: 2, replayed: false })
      // another endpoint that does not deduplicate, with the same key
      assert.deepStrictEqual(yield* call("POST https://api.example/refunds", "k1"), { writeId: 3, replayed: false })
      assert.deepStrictEqual(yield* call("POST https://api.example/refunds", "k1"), { writeId: 4, replayed: false })
      assert.deepStrictEqual((yield* downstream.calls).map((call) => call.effect), [
        "applied",
        "deduplicated",
        "applied",
        "applied",
        "applied"
      ])
    }))

  it.effect("reports a request applied twice, and never deduplicates a call without a key", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make({ deduplicate: true })
      yield* downstream.call({ endpoint: ORDERS, body: order })
      yield* downstream.call({ endpoint: ORDERS, body: { quantity: 2, sku: "A-1" } })
      yield* downstream.call({ endpoint: ORDERS, body: { sku: "B-2", quantity: 1 } })
      const duplicates = SimulatedDownstream.duplicates(yield* downstream.writes)
      assert.deepStrictEqual(duplicates.map((group) => group.map((write) => write.id)), [[1, 2]])
    }))

  it.effect("takes behaviours from the calling fiber's script, then `otherwise`", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make({ otherwise: SimulatedDownstream.fail("Otherwise") })
      const call = (body: number) => Effect.flip(downstream.call({ endpoint: ORDERS, body }))
      const codes = yield* Effect.all([call(1), call(2)]).pipe(
        SimulatedDownstream.scripted([SimulatedDownstream.fail("FromScript")])
      )
      assert.deepStrictEqual(codes.map((error) => error.code), ["FromScript", "Otherwise"])
      assert.strictEqual((yield* call(3)).code, "Otherwise")
    }))

  it.effect("inside an operation, a call carries the key IdempotencyHttpClient sends for the same request", () =>
    Effect.gen(function*() {
      const downstream = yield* SimulatedDownstream.make()
      const request = HttpClientRequest.post("https://api.example/orders")
      const operation = Idempotency.make({
        name: "create-order",
        payload: Schema.Unknown,
        success: Schema.Array(Schema.String),
        execute: () =>
          Effect.gen(function*() {
            yield* downstream.call({ endpoint: ORDERS, body: 1 })
            const byUrl = yield* IdempotencyHttpClient.keyFor(request)
            const named = yield* Effect.all([
              downstream.call({ endpoint: ORDERS, body: 2 }),
              IdempotencyHttpClient.keyFor(request)
            ]).pipe(IdempotencyHttpClient.withStep("charge"))
            yield* downstream.call({ endpoint: ORDERS, body: 3, idempotencyKey: false })
            return [Option.getOrThrow(byUrl), Option.getOrThrow(named[1])]
          })
      })
      const expected = yield* operation.run({ key: "client-key-1", payload: null }).pipe(
        Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))
      )
      yield* downstream.call({ endpoint: ORDERS, body: 4 }) // outside any operation
      const keys = (yield* downstream.calls).map((call) => call.idempotencyKey)
      assert.deepStrictEqual(keys, [expected[0], expected[1], undefined, undefined])
      assert.notStrictEqual(expected[0], expected[1])
    }))

  it.prop(
    "the arbitrary stays within its latency bound and draws only the kinds asked for",
    [SimulatedDownstream.arbitrary({
      maxLatency: "10 seconds",
      kinds: ["Succeed", "WriteLandsLate"],
      failures: ["X"]
    })],
    ([behaviour]) => {
      assert.include(["Succeed", "WriteLandsLate"], behaviour._tag)
      if (behaviour._tag === "Succeed") assert.isAtMost(behaviour.latencyMs, 10_000)
      if (behaviour._tag === "WriteLandsLate") {
        assert.isAtMost(behaviour.applyAfterMs, behaviour.answerAfterMs)
        assert.isAtMost(behaviour.answerAfterMs, 20_000)
      }
    },
    { fastCheck: { numRuns: 200 } }
  )

  it("the arbitrary draws every kind of behaviour by default", () => {
    const kinds = new Set(
      FastCheck.sample(SimulatedDownstream.arbitrary({ maxLatency: "1 second" }), { numRuns: 500, seed: 42 })
        .map((behaviour) => behaviour._tag)
    )
    assert.deepStrictEqual([...kinds].sort(), [
      "AnswerLate",
      "ApplyThenDie",
      "ApplyThenFail",
      "Die",
      "Fail",
      "IgnoreInterruption",
      "NeverAnswer",
      "Succeed",
      "WriteLandsLate"
    ])
  })
})
