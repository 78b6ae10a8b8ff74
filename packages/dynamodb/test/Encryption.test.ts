/**
 * The encryption wrapper's shared cases (test-support's `StoreEncryption`) over the DynamoDB store,
 * on each endpoint the global setup started (DynamoDB Local, dynalite).
 */
import * as StoreEncryption from "@effect-idempotency/test-support/StoreEncryption"
import { backends, storeLayer } from "./utils/backends.js"

for (const backend of backends) {
  StoreEncryption.suite(`DynamoDbStore encryption on ${backend.name}`, storeLayer(backend))
}
