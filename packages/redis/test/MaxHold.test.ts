/**
 * `maxHold` on the Redis store (the server of `TEST_REDIS_URL`, else the `redis-server` the global
 * setup started), under a key prefix of its own and the server's clock: a downstream inside an
 * uninterruptible region that outlives it is let go at maxHold, its heartbeat stops then, and each
 * timeout policy applies (`StoreFaults.heldUntilMaxHoldUnderEachPolicy`, in real time).
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import * as StoreFaults from "@effect-idempotency/test-support/StoreFaults"
import { describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { storeLayer, uniquePrefix } from "./utils/fixtures.js"

describe("maxHold on the Redis store", () => {
  it.live("the heartbeat stops at maxHold and each timeout policy applies", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(storeLayer({ clock: "server", prefix: uniquePrefix("max-hold") })).pipe(
        Effect.orDie
      )
      const store = Context.get(context, IdempotencyStore.IdempotencyStore)
      yield* StoreFaults.heldUntilMaxHoldUnderEachPolicy(store)
    }).pipe(Effect.scoped), 60_000)
})
