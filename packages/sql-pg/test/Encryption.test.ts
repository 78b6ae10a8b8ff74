/**
 * The encryption wrapper's shared cases (test-support's `StoreEncryption`) over the PostgreSQL
 * store, on embedded PGlite always and on the PostgreSQL server when `TEST_PG_URL` names one.
 */
import * as StoreEncryption from "@effect-idempotency/test-support/StoreEncryption"
import { layerPglite, layerServer, layerStoreOn, serverUrl } from "./utils/TestDatabase.js"

StoreEncryption.suite(
  "PgIdempotencyStore encryption (pglite)",
  layerStoreOn(layerPglite, "idem_encryption", "effect"),
  { timeout: "2 minutes" }
)

if (serverUrl !== undefined) {
  StoreEncryption.suite(
    "PgIdempotencyStore encryption (server)",
    layerStoreOn(layerServer(serverUrl), "idem_encryption", "effect"),
    { timeout: "2 minutes" }
  )
}
