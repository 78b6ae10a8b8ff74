import { IdempotencyStore } from "@effect-idempotency/core"
import { StoreConformance } from "@effect-idempotency/testing"

StoreConformance.suite("memory store conformance", IdempotencyStore.layerMemoryWith({ warn: false }))
