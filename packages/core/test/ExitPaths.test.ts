/**
 * Every exit of the downstream after the reservation, on the memory store (the same suite runs on
 * the PostgreSQL and DynamoDB stores), and the checks that need no store: payloads that cannot be
 * fingerprinted, and the error guards.
 */
import { Idempotency, IdempotencyError, IdempotencyStore } from "@effect-idempotency/core"
import { ExitPaths } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import { aroundStore } from "./utils/aroundStore.js"

ExitPaths.suite("exit paths on the memory store", IdempotencyStore.layerMemoryWith({ warn: false }))

/** The memory store, counting its calls. */
const countingStore = Effect.gen(function*() {
  const base = yield* IdempotencyStore.makeMemory({ warn: false })
  const calls = yield* Ref.make(0)
  const store = aroundStore(base, (_, call) => Effect.zipRight(Ref.update(calls, (n) => n + 1), call), [
    "purgeExpired"
  ])
  return { calls, layer: Layer.succeed(IdempotencyStore.IdempotencyStore, store) }
})

describe("exit paths", () => {
  describe("payloads", () => {
    it.effect("a payload that does not encode is a typed error that does not echo it", () =>
      Effect.gen(function*() {
        const store = yield* countingStore
        const operation = Idempotency.make({
          name: "payload",
          payload: Schema.Struct({ token: Schema.String.pipe(Schema.maxLength(4)) }),
          success: Schema.String,
          execute: () => Effect.succeed("ok")
        })
        const error = yield* Effect.flip(
          operation.run({ key: "k", payload: { token: "sk_live_secret" } }).pipe(Effect.provide(store.layer))
        )
        assert.strictEqual(error._tag, "InvalidPayload")
        assert.notInclude(error.message, "sk_live")
        assert.include((error as IdempotencyError.InvalidPayload).detail, "[\"token\"]")
        assert.strictEqual(IdempotencyError.httpStatus(error as IdempotencyError.IdempotencyError), 400)
        assert.strictEqual(yield* Ref.get(store.calls), 0)
      }).pipe(Effect.provide(Layer.empty)))

    it.effect("a payload nested too deeply to fingerprint is a typed error, not a defect", () =>
      Effect.gen(function*() {
        let deep: unknown = "leaf"
        for (let i = 0; i < 200_000; i++) deep = [deep]
        const operation = Idempotency.make({
          name: "payload",
          payload: Schema.Unknown,
          success: Schema.String,
          execute: () => Effect.succeed("ok")
        })
        const error = yield* Effect.flip(operation.run({ key: "k", payload: deep }))
        assert.strictEqual(error._tag, "InvalidPayload")
      }).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))))
  })

  describe("error guards", () => {
    it("match this library's errors by type id, not by tag", () => {
      class KeyReused extends Schema.TaggedError<KeyReused>()("KeyReused", { operation: Schema.String }) {}
      assert.isFalse(IdempotencyError.isIdempotencyError(new KeyReused({ operation: "mine" })))
      assert.isTrue(IdempotencyError.isIdempotencyError(new IdempotencyError.KeyReused({ operation: "o", key: "k" })))
      // an error from another installed copy of this package carries the same registered type id
      const fromAnotherCopy = Object.assign(new Error("lease lost"), {
        _tag: "LeaseLost",
        [Symbol.for("@effect-idempotency/core/IdempotencyError")]: Symbol.for(
          "@effect-idempotency/core/IdempotencyError"
        )
      })
      assert.isTrue(IdempotencyError.isLeaseLost(fromAnotherCopy))
      assert.isFalse(IdempotencyError.isLeaseLost(Object.assign(new Error("x"), { _tag: "LeaseLost" })))
    })
  })
})
