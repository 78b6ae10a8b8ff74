/**
 * The encryption wrapper's shared cases (test-support's `StoreEncryption`) over the SQL store, on
 * each engine: the run's MariaDB server, SQLite (`better-sqlite3`) and libSQL (a local file).
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import * as StoreEncryption from "@effect-idempotency/test-support/StoreEncryption"
import * as Layer from "effect/Layer"
import { engines, layerClient, uniqueTable } from "./utils/databases.js"

for (const engine of engines) {
  StoreEncryption.suite(
    `SqlIdempotencyStore encryption (${engine})`,
    Layer.effect(
      IdempotencyStore.IdempotencyStore,
      SqlIdempotencyStore.make({ table: uniqueTable("idem_encryption"), clock: "effect", migrate: true })
    ).pipe(Layer.provide(layerClient(engine)), Layer.orDie),
    { timeout: "2 minutes" }
  )
}
