import { IdempotencyError, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"

/** A memory store whose `purgeExpired` calls are recorded (the limit asked, the count returned), failing on demand. */
const recorded = Effect.gen(function*() {
  const base = yield* IdempotencyStore.makeMemory({ warn: false })
  const calls = yield* Ref.make<Array<{ readonly limit: number | undefined; readonly purged: number }>>([])
  const failing = yield* Ref.make(false)
  const store: IdempotencyStore.IdempotencyStore["Type"] = {
    ...base,
    purgeExpired: (options) =>
      Effect.flatMap(Ref.get(failing), (fail) =>
        fail
          ? Effect.zipRight(
            Ref.update(calls, (all) => [...all, { limit: options?.limit, purged: -1 }]),
            Effect.fail(new IdempotencyError.StoreUnavailable({ method: "purgeExpired", cause: "down" }))
          )
          : Effect.tap(
            base.purgeExpired(options),
            (purged) => Ref.update(calls, (all) => [...all, { limit: options?.limit, purged }])
          ))
  }
  return { store, calls, failing, layer: Layer.succeed(IdempotencyStore.IdempotencyStore, store) }
})

const reserve = (store: IdempotencyStore.IdempotencyStore["Type"], key: string, ttl: Duration.DurationInput) =>
  store.reserve({
    id: IdempotencyRecord.makeRecordId({ operation: "purge", key: IdempotencyKey.unsafeMake(key) }),
    token: `t-${key}`,
    fingerprint: "f",
    lease: Duration.decode(ttl),
    ttl: Duration.decode(ttl),
    takeover: true
  })

describe("IdempotencyStore.layerPurge", () => {
  it.effect("purges once when built, then once per interval, with the limit given", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* recorded
      const scope = yield* Scope.make()
      yield* Layer.buildWithScope(IdempotencyStore.layerPurge("1 minute", { limit: 7 }), scope).pipe(
        Effect.provide(layer)
      )
      yield* Effect.yieldNow()
      assert.deepStrictEqual((yield* Ref.get(calls)).map((call) => call.limit), [7])
      yield* TestClock.adjust("59 seconds")
      assert.strictEqual((yield* Ref.get(calls)).length, 1)
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* Ref.get(calls)).length, 2)
      yield* TestClock.adjust("3 minutes")
      assert.strictEqual((yield* Ref.get(calls)).length, 5)
      yield* Scope.close(scope, Exit.void)
      yield* TestClock.adjust("10 minutes")
      assert.strictEqual((yield* Ref.get(calls)).length, 5, "no purge runs once the layer's scope is closed")
    }))

  it.scoped("deletes the records that expired, from any store", () =>
    Effect.gen(function*() {
      const { calls, layer, store } = yield* recorded
      yield* reserve(store, "short-1", "30 seconds")
      yield* reserve(store, "short-2", "30 seconds")
      yield* reserve(store, "long", "1 hour")
      yield* Layer.build(IdempotencyStore.layerPurge("1 minute")).pipe(Effect.provide(layer))
      yield* Effect.yieldNow()
      yield* TestClock.adjust("1 minute")
      assert.deepStrictEqual((yield* Ref.get(calls)).map((call) => call.purged), [0, 2])
      yield* TestClock.adjust("1 hour")
      assert.deepStrictEqual((yield* Ref.get(calls)).map((call) => call.purged).slice(-1), [0])
      assert.strictEqual((yield* Ref.get(calls)).reduce((sum, call) => sum + call.purged, 0), 3)
    }))

  it.scoped("a failed round is logged and the next one runs on schedule", () =>
    Effect.gen(function*() {
      const { calls, failing, layer, store } = yield* recorded
      yield* Ref.set(failing, true)
      yield* Layer.build(IdempotencyStore.layerPurge("1 minute")).pipe(Effect.provide(layer))
      yield* Effect.yieldNow()
      yield* TestClock.adjust("1 minute")
      assert.deepStrictEqual((yield* Ref.get(calls)).map((call) => call.purged), [-1, -1])
      yield* reserve(store, "k", "10 seconds")
      yield* Ref.set(failing, false)
      yield* TestClock.adjust("1 minute")
      assert.deepStrictEqual((yield* Ref.get(calls)).map((call) => call.purged), [-1, -1, 1])
    }))

  it.scoped("layerMemoryWith({ purgeInterval, purgeLimit }) is the same purge", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(
        IdempotencyStore.layerMemoryWith({ warn: false, purgeInterval: "1 minute", purgeLimit: 2 })
      )
      const store = yield* Effect.provide(IdempotencyStore.IdempotencyStore, context)
      for (const key of ["a", "b", "c"]) yield* reserve(store, key, "10 seconds")
      yield* TestClock.adjust("1 minute")
      // the round at one minute deleted 2 (its limit): one expired record is left
      assert.strictEqual(yield* store.purgeExpired(), 1)
    }))

  it.scoped("without purgeInterval, nothing is purged in the background", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(IdempotencyStore.layerMemoryWith({ warn: false }))
      const store = yield* Effect.provide(IdempotencyStore.IdempotencyStore, context)
      for (const key of ["a", "b", "c"]) yield* reserve(store, key, "10 seconds")
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(yield* store.purgeExpired(), 3)
    }))
})
