/**
 * The outbox example on embedded PGlite: one order and one message however often the request is
 * retried, and one charge although the relay sent twice (it died between the call and the mark).
 */
import { PgIdempotencyMigration } from "@effect-idempotency/sql-pg"
import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, describe, it } from "@effect/vitest"
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Outbox from "../src/outbox/Outbox.js"

const Database = Layer.unwrapScoped(Effect.gen(function*() {
  const db = yield* Effect.acquireRelease(
    Effect.promise(() => PGlite.create()),
    (db) => Effect.promise(() => db.close())
  )
  const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 8 })
  yield* Effect.acquireRelease(Effect.promise(() => server.start()), () => Effect.promise(() => server.stop()))
  return PgClient.layer({
    url: Redacted.make(`postgres://postgres@${server.getServerConn()}/postgres`),
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
