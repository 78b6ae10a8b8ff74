import { ExitPaths, StoreConformance } from "@effect-idempotency/testing"
import { backends, storeLayer } from "./utils/backends.js"

for (const backend of backends) {
  StoreConformance.suite(`DynamoDbStore conformance on ${backend.name}`, storeLayer(backend))
  ExitPaths.suite(`DynamoDbStore exit paths on ${backend.name}`, storeLayer(backend))
}
