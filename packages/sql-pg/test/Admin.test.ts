/**
 * The admin conformance suite, on embedded PGlite always and on the PostgreSQL server when
 * `TEST_PG_URL` names one, with each clock source: the suite does not move time, so the database's
 * clock holds as well as the fiber's.
 *
 * On the server, `unblock`'s DELETE is also made to wait for a concurrent write of the record (a
 * second connection holds it): the refusal then names what that write left, not the record as the
 * statement's snapshot saw it.
 */
import { IdempotencyAdmin, IdempotencyStore } from "@effect-idempotency/core"
import { AdminConformance } from "@effect-idempotency/testing"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { expectReserved, freshId, rawClient, rawQuery, reserveRequest } from "./utils/fixtures.js"
import type { Database } from "./utils/TestDatabase.js"
import {
  awaitLockWaits,
  layerPglite,
  layerServer,
  layerStoreOn,
  runApplication,
  runTable,
  serverUrl,
  TestDatabase
} from "./utils/TestDatabase.js"

const store = (
  database: Layer.Layer<TestDatabase>,
  name: string,
  clock: IdempotencyStore.ClockSource,
  applicationName?: string
) => layerStoreOn(database, name, clock, { applicationName })

const suite = (kind: Database["kind"], database: Layer.Layer<TestDatabase>) => {
  AdminConformance.suite(`PgIdempotencyStore admin (${kind})`, store(database, "idem_admin", "effect"), {
    timeout: "2 minutes"
  })
  AdminConformance.suite(
    `PgIdempotencyStore admin (${kind}, the database's clock)`,
    store(database, "idem_admin_db", "server"),
    { timeout: "2 minutes" }
  )
}

suite("pglite", layerPglite)

if (serverUrl !== undefined) {
  suite("server", layerServer(serverUrl))

  const TABLE = runTable("idem_admin_race")
  const APPLICATION = runApplication("idem-admin-race")

  /** Waits (bounded) until one of the store's statements waits for a row lock. */
  const awaitLockWait = awaitLockWaits(APPLICATION)

  const writes = [
    {
      name: "completes it",
      write: `UPDATE "${TABLE}" SET status = 'COMPLETED', outcome_kind = 'Success', outcome = '1' WHERE id = $1`,
      reason: "completed",
      attempt: 1
    },
    {
      name: "takes it over",
      write: `UPDATE "${TABLE}" SET attempt = attempt + 1, lease_until = lease_until + 3600000 WHERE id = $1`,
      reason: "changed",
      attempt: 2
    }
  ] as const

  layer(
    Layer.provideMerge(IdempotencyAdmin.layer, store(layerServer(serverUrl), "idem_admin_race", "server", APPLICATION)),
    { excludeTestServices: true, timeout: "2 minutes" }
  )("PgIdempotencyStore admin interleavings", (it) => {
    for (const { attempt, name, reason, write } of writes) {
      it.scoped(`an unblock whose DELETE waited for a write that ${name} is refused: ${reason}`, () =>
        Effect.gen(function*() {
          const store = yield* IdempotencyStore.IdempotencyStore
          const admin = yield* IdempotencyAdmin.IdempotencyAdmin
          const database = yield* TestDatabase
          const holder = yield* rawClient(database.url, runApplication("idem-admin-holder"))
          const id = freshId("admin-race")
          expectReserved(yield* store.reserve(reserveRequest(id, { lease: Duration.zero })))
          yield* rawQuery(holder, "BEGIN")
          yield* rawQuery(holder, write, [id.value])
          const unblock = yield* Effect.fork(
            Effect.either(admin.unblock({ operation: id.operation, key: id.key }, {
              reason: "test",
              expect: { attempt: 1 }
            }))
          )
          yield* awaitLockWait
          yield* rawQuery(holder, "COMMIT")
          const result = yield* Fiber.join(unblock)
          assert.isTrue(Either.isLeft(result))
          const refused = (result as Either.Left<IdempotencyAdmin.UnblockRefused, void>).left
          assert.strictEqual(refused._tag, "UnblockRefused")
          assert.strictEqual(refused.reason, reason)
          assert.strictEqual(refused.attempt, attempt)
        }))
    }
  })
}
