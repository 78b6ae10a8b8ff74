/**
 * The shared conformance suite and the exit-path suite, on embedded PGlite always (so the fallback
 * of a machine without a server keeps working) and on the PostgreSQL server when `TEST_PG_URL`
 * names one.
 *
 * The suites drive expiry with `TestClock`, so the store reads Effect's `Clock` here.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import { ExitPaths, StoreConformance } from "@effect-idempotency/testing"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Database, TestDatabase } from "./utils/TestDatabase.js"
import { layerClient, layerPglite, layerServer, resetTable, serverUrl } from "./utils/TestDatabase.js"

const store = (database: Layer.Layer<TestDatabase>, table = "idem_conformance") =>
  Layer.effect(
    IdempotencyStore.IdempotencyStore,
    Effect.zipRight(resetTable({ table }), PgIdempotencyStore.make({ table, clock: "effect" }))
  ).pipe(
    Layer.provide(layerClient({ maxConnections: 10 })),
    Layer.provide(database)
  )

const suite = (kind: Database["kind"], database: Layer.Layer<TestDatabase>) => {
  StoreConformance.suite(`PgIdempotencyStore conformance (${kind})`, store(database), { timeout: "2 minutes" })
  ExitPaths.suite(`PgIdempotencyStore exit paths (${kind})`, store(database, "idem_exit_paths"), {
    timeout: "2 minutes"
  })
}

suite("pglite", layerPglite)

if (serverUrl !== undefined) {
  suite("server", layerServer(serverUrl))
}
