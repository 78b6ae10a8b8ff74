import { IdempotencyStore } from "@effect-idempotency/core"
import { AdminConformance } from "@effect-idempotency/testing"

AdminConformance.suite("memory store admin", IdempotencyStore.layerMemoryWith({ warn: false }))
