/**
 * `maxHold` on the SQL stores (SQLite through `better-sqlite3`, libSQL, the run's MariaDB): a
 * downstream inside an uninterruptible region that outlives it is let go at maxHold, its heartbeat
 * stops then, and each timeout policy applies (`StoreFaults.heldUntilMaxHoldUnderEachPolicy`, in real time).
 */
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import * as StoreFaults from "@effect-idempotency/test-support/StoreFaults"
import { describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { engines, layerClient, uniqueTable } from "./utils/databases.js"

describe("maxHold on the SQL stores", () => {
  for (const engine of engines) {
    it.live(`${engine}: the heartbeat stops at maxHold and each timeout policy applies`, () =>
      Effect.gen(function*() {
        const client = yield* Layer.build(layerClient(engine))
        const store = yield* SqlIdempotencyStore.make({ table: uniqueTable("idem_hold"), migrate: true }).pipe(
          Effect.provide(client),
          Effect.orDie
        )
        yield* StoreFaults.heldUntilMaxHoldUnderEachPolicy(store)
      }).pipe(Effect.scoped), 60_000)
  }
})
