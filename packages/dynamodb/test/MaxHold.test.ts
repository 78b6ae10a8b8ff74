/**
 * `maxHold` on the DynamoDB store, on a fresh table of each endpoint the global setup started
 * (DynamoDB Local, dynalite): a downstream inside an uninterruptible region that outlives it is let
 * go at maxHold, its heartbeat stops then, and each timeout policy applies
 * (`StoreFaults.heldUntilMaxHoldUnderEachPolicy`, in real time).
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import * as StoreFaults from "@effect-idempotency/test-support/StoreFaults"
import { describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { backends, storeLayer } from "./utils/backends.js"

describe("maxHold on the DynamoDB store", () => {
  for (const backend of backends) {
    it.live(
      `${backend.name}: the heartbeat stops at maxHold and each timeout policy applies`,
      () =>
        Effect.gen(function*() {
          const context = yield* Layer.build(storeLayer(backend))
          const store = Context.get(context, IdempotencyStore.IdempotencyStore)
          yield* StoreFaults.heldUntilMaxHoldUnderEachPolicy(store)
        }).pipe(Effect.scoped),
      60_000
    )
  }
})
