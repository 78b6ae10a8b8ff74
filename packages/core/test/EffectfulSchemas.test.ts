/**
 * Schemas whose transformations suspend (an effect, not a plain `Either`): the engine reads the
 * steps of synchronous schemas at once, and must take the runtime for these. Every step of the
 * protocol that runs a schema is covered: the payload's fingerprint, the success's recording and
 * replay, a failure's recording and replay, and the failures of each.
 */
import { Idempotency, IdempotencyError, IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { YieldWrap } from "effect/Utils"

/** A string whose decoding and encoding suspend once (so the parser gives an effect). */
const SuspendingString = Schema.transformOrFail(Schema.String, Schema.String, {
  strict: true,
  decode: (s) => Effect.as(Effect.yieldNow(), s),
  encode: (s) => Effect.as(Effect.yieldNow(), s)
})

/** A string that suspends, then refuses `"bad"`: in decoding, in encoding, or in both. */
const refusing = (refuse: { readonly decode: boolean; readonly encode: boolean }) =>
  Schema.transformOrFail(Schema.String, Schema.String, {
    strict: true,
    decode: (s, _, ast) =>
      Effect.flatMap(
        Effect.yieldNow(),
        () => refuse.decode && s === "bad" ? Effect.fail(new ParseResult.Type(ast, s, "refused")) : Effect.succeed(s)
      ),
    encode: (s, _, ast) =>
      Effect.flatMap(
        Effect.yieldNow(),
        () => refuse.encode && s === "bad" ? Effect.fail(new ParseResult.Type(ast, s, "refused")) : Effect.succeed(s)
      )
  })

const SyncOrder = Schema.Struct({ sku: Schema.String, quantity: Schema.Number })
const SuspendingOrder = Schema.Struct({ sku: SuspendingString, quantity: Schema.Number })
const Placed = Schema.Struct({ orderId: SuspendingString })

class OutOfStock extends Schema.TaggedError<OutOfStock>()("OutOfStock", { sku: SuspendingString }) {}

const failsWith = <A, E, R>(effect: Effect.Effect<A, E, R>, tag: string) =>
  Effect.map(Effect.flip(effect), (error) => {
    assert.strictEqual((error as { readonly _tag?: unknown })._tag, tag)
    return error
  })

/** Provides a fresh memory store. */
const order = { sku: "A-1", quantity: 2 }

/** A downstream that answers "bad", and how many times it ran. */
const badDownstream = () => {
  let runs = 0
  return { execute: () => Effect.sync(() => (++runs, "bad")), runs: () => runs }
}

/** The "place" operation of a `SyncOrder`, with the success schema under test. */
const placeOrder = <A, IA, E, R>(
  success: Schema.Schema<A, IA>,
  execute: (order: typeof SyncOrder.Type) => Effect.Effect<A, E, R>
) => Idempotency.make({ name: "place", payload: SyncOrder, success, execute })

/** A test on the memory store; its body is a generator, as `Effect.gen` takes. */
const onMemory = (
  name: string,
  body: () => Generator<YieldWrap<Effect.Effect<unknown, unknown, IdempotencyStore.IdempotencyStore>>, void, unknown>
) => it.effect(name, () => Effect.gen(body).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))))

describe("schemas that suspend", () => {
  it("are effects, not plain Eithers (the premise of this suite)", () => {
    assert.isFalse(Either.isEither(Schema.encode(SuspendingOrder)({ sku: "A-1", quantity: 2 })))
    assert.isFalse(Either.isEither(Schema.decodeUnknown(Placed)({ orderId: "o-1" })))
    assert.isTrue(Either.isEither(Schema.encode(SyncOrder)({ sku: "A-1", quantity: 2 })))
  })

  onMemory("a payload schema that suspends fingerprints as its synchronous twin, and tells a reused key", function*() {
    assert.strictEqual(
      yield* Idempotency.fingerprint(SuspendingOrder, order),
      yield* Idempotency.fingerprint(SyncOrder, order)
    )
    let executions = 0
    const place = Idempotency.make({
      name: "place",
      payload: SuspendingOrder,
      success: Schema.String,
      execute: (order: typeof SuspendingOrder.Type) => Effect.sync(() => `order-${order.sku}-${++executions}`)
    })
    const first = yield* place.runDetailed({ key: "k-1", payload: order })
    const again = yield* place.runDetailed({ key: "k-1", payload: order })
    assert.deepStrictEqual([first.value, first.replayed], ["order-A-1-1", false])
    assert.deepStrictEqual([again.value, again.replayed], ["order-A-1-1", true])
    yield* failsWith(place.run({ key: "k-1", payload: { sku: "B-2", quantity: 2 } }), "KeyReused")
    assert.strictEqual(executions, 1)
  })

  onMemory("a payload the suspending schema refuses is InvalidPayload, and no store is touched", function*() {
    let executions = 0
    const place = Idempotency.make({
      name: "place",
      payload: Schema.Struct({ sku: refusing({ decode: false, encode: true }) }),
      success: Schema.String,
      execute: () => Effect.sync(() => `order-${++executions}`)
    })
    const error = yield* failsWith(place.run({ key: "k-1", payload: { sku: "bad" } }), "InvalidPayload")
    assert.instanceOf(error, IdempotencyError.InvalidPayload)
    assert.strictEqual(executions, 0)
    // the key was never reserved: a valid payload under it executes
    assert.strictEqual(yield* place.run({ key: "k-1", payload: { sku: "good" } }), "order-1")
  })

  onMemory("a success schema that suspends records the outcome and replays it decoded", function*() {
    let executions = 0
    const place = placeOrder(
      Placed,
      (order: typeof SyncOrder.Type) => Effect.sync(() => ({ orderId: `${order.sku}-${++executions}` }))
    )
    const first = yield* place.runDetailed({ key: "k-1", payload: order })
    const again = yield* place.runDetailed({ key: "k-1", payload: order })
    assert.deepStrictEqual(first, { value: { orderId: "A-1-1" }, replayed: false, attempt: 1, recorded: true })
    assert.deepStrictEqual(again, { value: { orderId: "A-1-1" }, replayed: true, attempt: 1, recorded: true })
    assert.strictEqual(executions, 1)
  })

  onMemory(
    "an outcome the suspending schema will not encode is kept as not replayable: no retry runs it again",
    function*() {
      const bad = badDownstream()
      const place = placeOrder(refusing({ decode: false, encode: true }), bad.execute)
      const first = yield* failsWith(place.run({ key: "k-1", payload: order }), "OutcomeNotReplayable")
      const again = yield* failsWith(place.run({ key: "k-1", payload: order }), "OutcomeNotReplayable")
      assert.isFalse((first as IdempotencyError.OutcomeNotReplayable).replayed)
      assert.isTrue((again as IdempotencyError.OutcomeNotReplayable).replayed)
      assert.strictEqual(bad.runs(), 1)
    }
  )

  onMemory("a recorded outcome the suspending schema no longer decodes replays as StoredOutcomeInvalid", function*() {
    const bad = badDownstream()
    const { execute } = bad
    // recorded under a schema that takes "bad"
    const before = placeOrder(Schema.String, execute)
    assert.strictEqual(yield* before.run({ key: "k-1", payload: order }), "bad")
    // replayed under one whose decoding suspends and refuses it
    const after = placeOrder(refusing({ decode: true, encode: false }), execute)
    yield* failsWith(after.run({ key: "k-1", payload: order }), "StoredOutcomeInvalid")
    assert.strictEqual(bad.runs(), 1)
  })

  onMemory(
    "a success whose value the suspending schema takes in but not back is not handed to the caller",
    function*() {
      // the caller gets what a replay would get: a value that encodes but does not decode is refused
      // on the first run too, and recorded as not replayable
      const bad = badDownstream()
      const place = placeOrder(refusing({ decode: true, encode: false }), bad.execute)
      yield* failsWith(place.run({ key: "k-1", payload: order }), "OutcomeNotReplayable")
      yield* failsWith(place.run({ key: "k-1", payload: order }), "OutcomeNotReplayable")
      assert.strictEqual(bad.runs(), 1)
    }
  )

  onMemory("a failure schema that suspends records the failure and replays it", function*() {
    let executions = 0
    const place = Idempotency.make({
      name: "place",
      payload: SyncOrder,
      success: Schema.String,
      failure: OutOfStock,
      execute: (order: typeof SyncOrder.Type) =>
        Effect.suspend(() => (++executions, Effect.fail(new OutOfStock({ sku: order.sku }))))
    })
    const first = yield* Effect.flip(place.run({ key: "k-1", payload: order }))
    const again = yield* Effect.flip(place.run({ key: "k-1", payload: order }))
    assert.instanceOf(first, OutOfStock)
    assert.instanceOf(again, OutOfStock)
    assert.strictEqual((again as OutOfStock).sku, "A-1")
    assert.strictEqual(executions, 1)
  })
})
