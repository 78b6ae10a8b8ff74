import { Idempotency, IdempotencyStore } from "@effect-idempotency/core"
import { StoreConformance } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { aroundStore } from "./utils/aroundStore.js"

StoreConformance.suite(
  "cached memory store conformance",
  IdempotencyStore.layerCached({ capacity: 100 }).pipe(Layer.provide(IdempotencyStore.layerMemoryWith({ warn: false })))
)

/** A cached memory store, with the calls that reached the store underneath counted. */
const counted = (capacity?: number) =>
  Effect.gen(function*() {
    const base = yield* IdempotencyStore.makeMemory({ warn: false })
    const calls = yield* Ref.make(0)
    const store = yield* IdempotencyStore.makeCached(
      aroundStore(base, (_, call) => Effect.zipRight(Ref.update(calls, (n) => n + 1), call)),
      { capacity }
    )
    return { layer: Layer.succeed(IdempotencyStore.IdempotencyStore, store), calls }
  })

const charge = Idempotency.make({
  name: "cached-charge",
  payload: Schema.Struct({ amount: Schema.Number }),
  success: Schema.Struct({ id: Schema.String }),
  ttl: "10 seconds",
  execute: (payload) => Effect.succeed({ id: `ch_${payload.amount}` })
})

describe("warm-instance cache", () => {
  it.effect("a replay of an outcome this instance completed costs no store call", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* counted()
      const first = yield* charge.runDetailed({ key: "k", payload: { amount: 1 } }).pipe(Effect.provide(layer))
      assert.strictEqual(yield* Ref.get(calls), 2)
      for (let i = 0; i < 5; i++) {
        const replay = yield* charge.runDetailed({ key: "k", payload: { amount: 1 } }).pipe(Effect.provide(layer))
        assert.isTrue(replay.replayed)
        assert.deepStrictEqual(replay.value, first.value)
      }
      assert.strictEqual(yield* Ref.get(calls), 2)
      const reused = yield* Effect.flip(charge.run({ key: "k", payload: { amount: 2 } }).pipe(Effect.provide(layer)))
      assert.strictEqual(reused._tag, "KeyReused")
      assert.strictEqual(yield* Ref.get(calls), 2)
    }))

  it.effect("an outcome another instance recorded is cached from the reservation that returned it", () =>
    Effect.gen(function*() {
      const base = yield* IdempotencyStore.makeMemory({ warn: false })
      const other = Layer.succeed(IdempotencyStore.IdempotencyStore, base)
      yield* charge.run({ key: "k", payload: { amount: 1 } }).pipe(Effect.provide(other))
      const calls = yield* Ref.make(0)
      const cached = yield* IdempotencyStore.makeCached({
        ...base,
        reserve: (request) => Effect.zipRight(Ref.update(calls, (n) => n + 1), base.reserve(request))
      })
      const layer = Layer.succeed(IdempotencyStore.IdempotencyStore, cached)
      for (let i = 0; i < 3; i++) {
        assert.isTrue(
          (yield* charge.runDetailed({ key: "k", payload: { amount: 1 } }).pipe(Effect.provide(layer))).replayed
        )
      }
      assert.strictEqual(yield* Ref.get(calls), 1)
    }))

  it.effect("a copy never outlives the record: once the TTL has passed, the store is asked again", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* counted()
      yield* charge.run({ key: "k", payload: { amount: 1 } }).pipe(Effect.provide(layer))
      yield* TestClock.adjust("9 seconds")
      yield* charge.run({ key: "k", payload: { amount: 1 } }).pipe(Effect.provide(layer))
      assert.strictEqual(yield* Ref.get(calls), 2)
      yield* TestClock.adjust("1 second")
      const fresh = yield* charge.runDetailed({ key: "k", payload: { amount: 1 } }).pipe(Effect.provide(layer))
      assert.isFalse(fresh.replayed)
      assert.strictEqual(yield* Ref.get(calls), 4)
    }))

  it.effect("keeps at most `capacity` records, evicting the least recently used", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* counted(2)
      for (const key of ["a", "b", "c"]) yield* charge.run({ key, payload: { amount: 1 } }).pipe(Effect.provide(layer))
      assert.strictEqual(yield* Ref.get(calls), 6)
      yield* charge.run({ key: "c", payload: { amount: 1 } }).pipe(Effect.provide(layer))
      assert.strictEqual(yield* Ref.get(calls), 6)
      yield* charge.run({ key: "a", payload: { amount: 1 } }).pipe(Effect.provide(layer))
      assert.strictEqual(yield* Ref.get(calls), 7)
    }))

  it.effect("conflicts are never answered from the cache", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* counted()
      const slow = Idempotency.make({
        name: "cached-slow",
        payload: Schema.Null,
        success: Schema.Number,
        execute: () => Effect.as(Effect.sleep("5 seconds"), 1)
      })
      const first = yield* Effect.fork(slow.run({ key: "k", payload: null }).pipe(Effect.provide(layer)))
      yield* Effect.yieldNow()
      for (let i = 0; i < 3; i++) {
        const conflict = yield* Effect.flip(slow.run({ key: "k", payload: null }).pipe(Effect.provide(layer)))
        assert.strictEqual(conflict._tag, "IdempotencyConflict")
      }
      assert.strictEqual(yield* Ref.get(calls), 4)
      yield* TestClock.adjust("5 seconds")
      yield* first.await
    }))
})
