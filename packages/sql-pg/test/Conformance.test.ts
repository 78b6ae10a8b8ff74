/**
 * The shared conformance suite, on embedded PGlite always (so the fallback of a machine without a
 * server keeps working) and on the PostgreSQL server when `TEST_PG_URL` names one.
 *
 * The suite drives expiry with `TestClock`, so the store reads Effect's `Clock` here.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import { StoreConformance } from "@effect-idempotency/testing"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Database, TestDatabase } from "./utils/TestDatabase.js"
import { layerClient, layerPglite, layerServer, resetTable, serverUrl } from "./utils/TestDatabase.js"

const TABLE = "idem_conformance"

const store = (database: Layer.Layer<TestDatabase>) =>
  Layer.effect(
    IdempotencyStore.IdempotencyStore,
    Effect.zipRight(resetTable({ table: TABLE }), PgIdempotencyStore.make({ table: TABLE, clock: "effect" }))
  ).pipe(
    Layer.provide(layerClient({ maxConnections: 10 })),
    Layer.provide(database)
  )

const suite = (kind: Database["kind"], database: Layer.Layer<TestDatabase>) =>
  StoreConformance.suite(`PgIdempotencyStore conformance (${kind})`, store(database), { timeout: "2 minutes" })

suite("pglite", layerPglite)

if (serverUrl !== undefined) {
  suite("server", layerServer(serverUrl))
}
