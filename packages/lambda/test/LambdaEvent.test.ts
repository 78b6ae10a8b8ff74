/**
 * The adapter for any event, on the memory store, invoked by the Lambda-like runner: decoding, keys,
 * replays of successes and of stored failures, the deadline taken from the invocation's remaining
 * time, an execution environment's runtime built once (and again after a failed build), and the
 * fingerprint of the decoded event.
 */
import { IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import { LambdaEvent, LambdaInvocation } from "@effect-idempotency/lambda"
import { assert, describe } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import {
  dispose,
  invoke,
  invokeAsync,
  liveTest,
  makeDownstream,
  OneWay,
  slowMemoryStore
} from "./utils/LambdaRunner.js"

/** Events of an id, keyed by it. */
const byId = { event: Schema.Struct({ id: Schema.String }), key: (event: { readonly id: string }) => event.id }

const ShipEvent = Schema.Struct({
  id: Schema.String,
  "detail-type": Schema.Literal("OrderPlaced"),
  detail: Schema.Struct({ orderId: Schema.String, items: Schema.Int })
})
const Shipped = Schema.Struct({ trackingId: Schema.String, replayedByCarrier: Schema.Boolean })
class Refused extends Schema.TaggedError<Refused>()("Refused", { reason: Schema.String }) {}

const event = (orderId: string, items = 2) => ({
  version: "0",
  id: `evt-${orderId}`,
  "detail-type": "OrderPlaced" as const,
  source: "orders",
  time: "2026-11-30T00:00:00Z",
  detail: { orderId, items }
})

/** A shipping function over a carrier that counts its writes. */
const shipping = (
  options: { readonly answerAfter?: Duration.DurationInput; readonly timeout?: Duration.DurationInput } = {}
) => {
  const carrier = makeDownstream({ deduplicate: false })
  const handler = LambdaEvent.idempotent({
    name: "ship-order",
    layer: IdempotencyStore.layerMemoryWith({ warn: false }),
    event: ShipEvent,
    key: (event) => event.detail.orderId,
    payload: (event) => event.detail,
    success: Shipped,
    failure: Refused,
    onTimeout: "markUnknown",
    ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
    handler: (event) =>
      Effect.gen(function*() {
        if (event.detail.items > 100) return yield* new Refused({ reason: "too many items" })
        const key = yield* IdempotencyContext.stepKey("carrier")
        const receipt = yield* carrier.write(event.detail.orderId, key, options.answerAfter ?? 0)
        return { trackingId: `track-${event.detail.orderId}`, replayedByCarrier: receipt.replayed }
      })
  })
  return { carrier, handler }
}

describe("LambdaEvent.idempotent", () => {
  liveTest("runs once per key; a retry gets the recorded result, encoded", function*() {
    const { carrier, handler } = shipping()
    const first = yield* invoke(handler, event("o-1"), "3 seconds")
    const retry = yield* invoke(handler, event("o-1"), "3 seconds")
    assert.deepStrictEqual(first._tag === "Ok" && first.value, { trackingId: "track-o-1", replayedByCarrier: false })
    assert.deepStrictEqual(retry._tag === "Ok" && retry.value, { trackingId: "track-o-1", replayedByCarrier: false })
    assert.strictEqual(carrier.total(), 1)
    yield* dispose(handler)
  })

  liveTest("a stored failure is rejected again on every retry, and the handler does not run again", function*() {
    const { carrier, handler } = shipping()
    const first = yield* invoke(handler, event("o-2", 500), "3 seconds")
    const retry = yield* invoke(handler, event("o-2", 500), "3 seconds")
    assert.isTrue(first._tag === "Error" && first.error instanceof Refused)
    assert.isTrue(retry._tag === "Error" && retry.error instanceof Refused)
    assert.strictEqual(carrier.total(), 0)
    yield* dispose(handler)
  })

  liveTest(
    "the same key with another payload is KeyReused; an event that does not decode is InvalidEvent",
    function*() {
      const { handler } = shipping()
      yield* invoke(handler, event("o-3"), "3 seconds")
      const reused = yield* invoke(handler, event("o-3", 3), "3 seconds")
      assert.isTrue(reused._tag === "Error" && (reused.error as { _tag?: string })._tag === "KeyReused")
      const invalid = yield* invoke(handler, { detail: { orderId: 1, secret: "sk_live_x" } }, "3 seconds")
      assert.isTrue(invalid._tag === "Error" && (invalid.error as { _tag?: string })._tag === "InvalidEvent")
      assert.notInclude(String((invalid as { error: Error }).error.message), "sk_live")
      yield* dispose(handler)
    }
  )

  liveTest(
    "the deadline comes from the remaining time: a late answer is a timeout before Lambda's cut-off",
    function*() {
      // the carrier writes at once and answers after 5 s; the function has 1.2 s
      const { carrier, handler } = shipping({ answerAfter: "5 seconds" })
      const attempts = yield* invokeAsync(handler, event("o-4"), {
        timeout: "1200 millis",
        retryDelays: ["100 millis", "100 millis"]
      })
      // every attempt answered before the runner's cut-off: the first timed out, the retries got the
      // recorded "outcome unknown" (markUnknown) without calling the carrier
      assert.deepStrictEqual(attempts.map((a) => a._tag), ["Error", "Error", "Error"])
      assert.deepStrictEqual(
        attempts.map((a) => a._tag === "Error" && (a.error as { _tag?: string })._tag),
        ["DownstreamTimeout", "DownstreamTimeout", "DownstreamTimeout"]
      )
      assert.strictEqual(carrier.total(), 1)
      yield* dispose(handler)
    }
  )

  liveTest("too little time left is InsufficientTime, before any store call", function*() {
    const { carrier, handler } = shipping()
    const result = yield* Effect.promise(() =>
      handler(event("o-5"), {
        awsRequestId: "r-1",
        getRemainingTimeInMillis: () => 0
      }).then(() => "ok", (error: unknown) => (error as { _tag?: string })._tag)
    )
    assert.strictEqual(result, "InsufficientTime")
    assert.strictEqual(carrier.total(), 0)
    yield* dispose(handler)
  })

  liveTest(
    "a cold start counts against the remaining time once: the time left is what Lambda gave, less the start",
    function*() {
      // building the runtime takes 500 ms of the invocation's 2 s: 1.5 s are left, where counting
      // the start twice would leave 1 s
      const layer = slowMemoryStore("500 millis")
      const handler = LambdaEvent.idempotent({
        name: "cold",
        layer,
        ...byId,
        success: Schema.Number,
        handler: () => Effect.map(LambdaInvocation.remaining, Duration.toMillis)
      })
      const cold = yield* invoke(handler, { id: "1" }, "2 seconds")
      assert.strictEqual(cold._tag, "Ok", JSON.stringify(cold))
      const left = (cold as { readonly value: number }).value
      assert.isAtMost(left, 1500)
      assert.isAbove(left, 1000)
      yield* dispose(handler)
    }
  )

  liveTest(
    "a cold start longer than the invocation: InsufficientTime before the cut-off; the build goes on",
    function*() {
      // building the runtime takes 1.5 s of the invocation's 1 s: the first invocation fails with
      // InsufficientTime before Lambda stops it; the retry 1.2 s later finds the runtime built
      let builds = 0
      let runs = 0
      const handler = LambdaEvent.idempotent({
        name: "cold",
        layer: slowMemoryStore("1500 millis", () => builds++),
        ...byId,
        success: Schema.Number,
        handler: () => Effect.sync(() => ++runs)
      })
      const cold = yield* invoke(handler, { id: "1" }, "1 second")
      assert.strictEqual(cold._tag === "Error" ? (cold.error as { _tag?: string })._tag : cold._tag, "InsufficientTime")
      assert.strictEqual(runs, 0)
      yield* Effect.sleep("1200 millis")
      const warm = yield* invoke(handler, { id: "1" }, "1 second")
      assert.deepStrictEqual(warm._tag === "Ok" && warm.value, 1)
      assert.strictEqual(builds, 1)
      yield* dispose(handler)
    }
  )

  liveTest("the runtime is built once per execution environment, and again after a failed build", function*() {
    let builds = 0
    const layer = Layer.unwrapEffect(Effect.sync(() => {
      builds++
      return builds === 1
        ? Layer.fail("the store is not reachable")
        : IdempotencyStore.layerMemoryWith({ warn: false })
    }))
    const handler = LambdaEvent.idempotent({
      name: "ping",
      layer,
      ...byId,
      success: Schema.String,
      handler: () => Effect.succeed("pong")
    })
    const cold = yield* invoke(handler, { id: "1" }, "3 seconds")
    assert.isTrue(cold._tag === "Error" && (cold.error as { _tag?: string })._tag === "LayerUnavailable")
    for (let i = 0; i < 3; i++) {
      const warm = yield* invoke(handler, { id: `${i}` }, "3 seconds")
      assert.deepStrictEqual(warm._tag === "Ok" && warm.value, "pong")
    }
    assert.strictEqual(builds, 2)
    yield* dispose(handler)
  })

  liveTest(
    "by default the fingerprint is the decoded event: the order of members and undeclared members do not count",
    function*() {
      let runs = 0
      const handler = LambdaEvent.idempotent({
        name: "ship-order",
        layer: IdempotencyStore.layerMemoryWith({ warn: false }),
        event: ShipEvent,
        key: (event) => event.detail.orderId,
        success: Schema.String,
        handler: (event) => Effect.sync(() => (runs++, `track-${event.detail.orderId}`))
      })
      const first = yield* invoke(handler, event("o-6"), "3 seconds")
      // the same event, its members in another order, with members the schema does not declare
      const resent = {
        detail: { items: 2, orderId: "o-6", note: "resent" },
        "detail-type": "OrderPlaced",
        id: "evt-o-6",
        source: "orders",
        traceId: "t-2"
      }
      const retry = yield* invoke(handler, resent, "3 seconds")
      for (const invocation of [first, retry]) {
        assert.deepStrictEqual(invocation._tag === "Ok" && invocation.value, "track-o-6")
      }
      assert.strictEqual(runs, 1)
      const reused = yield* invoke(handler, { ...resent, detail: { orderId: "o-6", items: 3 } }, "3 seconds")
      assert.isTrue(reused._tag === "Error" && (reused.error as { _tag?: string })._tag === "KeyReused")
      assert.strictEqual(runs, 1)
      yield* dispose(handler)
    }
  )

  liveTest("an event that does not encode back for its fingerprint is InvalidEvent, without its contents", function*() {
    let runs = 0
    // an event schema whose encoding refuses what its decoding accepted: OneWay
    const handler = LambdaEvent.idempotent({
      name: "ping",
      layer: IdempotencyStore.layerMemoryWith({ warn: false }),
      event: Schema.Struct({ id: OneWay }),
      key: (event) => event.id,
      success: Schema.String,
      handler: () => Effect.sync(() => (runs++, "pong"))
    })
    const result = yield* invoke(handler, { id: "sk_live_x" }, "3 seconds")
    assert.isTrue(result._tag === "Error" && (result.error as { _tag?: string })._tag === "InvalidEvent")
    assert.notInclude(String((result as { error: Error }).error.message), "sk_live")
    assert.strictEqual(runs, 0)
    yield* dispose(handler)
  })
})
