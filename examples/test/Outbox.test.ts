/**
 * The outbox example on embedded PGlite: one order and one message however often the request is
 * retried, and one charge although the relay sent twice (it died between the call and the mark).
 */
import { PgIdempotencyMigration } from "@effect-idempotency/sql-pg"
import { Postgres } from "@effect-idempotency/test-support"
import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Outbox from "../src/outbox/Outbox.js"

const Database = Layer.unwrapScoped(Effect.gen(function*() {
  const database = yield* Postgres.pglite({ maxConnections: 8 })
  return PgClient.layer({
    url: Redacted.make(database.url),
    maxConnections: 4
  })
}))

describe("outbox example", () => {
  it.live("one order, one message, one charge", () =>
    Effect.gen(function*() {
      yield* PgIdempotencyMigration.migration()
      const result = yield* Outbox.demo
      assert.deepStrictEqual(result, { replayed: true, orders: 1, outbox: 1, unsent: 0, sends: 2, charges: 1 })
    }).pipe(Effect.provide(Database)), { timeout: 60_000 })
})
