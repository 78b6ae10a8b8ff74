/**
 * The CLI on PostgreSQL: the server named by `TEST_PG_URL`, else embedded PGlite on a loopback port.
 */
import { PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { layerClient, layerPrimary, runTable, TestDatabase } from "../../sql-pg/test/utils/TestDatabase.js"
import { CliStore, scenario } from "./utils/scenario.js"

const table = runTable("cli_records")

scenario("effect-idempotency on PostgreSQL", {
  layer: Layer.mergeAll(
    PgIdempotencyStore.layerWith({ table }).pipe(Layer.provide(layerClient())),
    Layer.effect(
      CliStore,
      Effect.map(TestDatabase, (database) => ({ args: ["--store", database.url, "--table", table] }))
    )
  ).pipe(Layer.provide(layerPrimary)),
  migrated: { applied: true }
})
