/**
 * Every published package loads from `dist` through its `exports` map (the testing kit is
 * type-checked only: it needs a running vitest), deep module imports work, and `internal` modules
 * are closed.
 */
import type * as Testing from "@effect-idempotency/testing"
import { ok, rejects } from "node:assert"

const packages = "core sql sql-pg dynamodb redis http platform netlify lambda workflow queue".split(" ")
for (const name of packages) {
  const module: Record<string, unknown> = await import(`@effect-idempotency/${name}`)
  ok(Object.keys(module).length > 0, `@effect-idempotency/${name} exports nothing`)
}
// the queue's transports are deep imports only, each loading its client (an optional peer)
for (const transport of ["RabbitMqConsumer", "JetStreamConsumer", "PersistedQueueConsumer"]) {
  const module: Record<string, unknown> = await import(`@effect-idempotency/queue/${transport}`)
  ok(Object.keys(module).length > 0, `@effect-idempotency/queue/${transport} exports nothing`)
}
const deep = await import("@effect-idempotency/core/IdempotencyError")
ok(typeof deep.isLeaseLost === "function", "a deep import reaches the module")
// one module of each private folder: the engine, the stores' shared code, the primitives
for (const internal of ["internal/telemetry", "store/memory", "base/sha256"]) {
  await rejects(import(`@effect-idempotency/core/${internal}`), { code: "ERR_PACKAGE_PATH_NOT_EXPORTED" })
}

// the testing kit's public types resolve from its declarations
export type Suite = typeof Testing.StoreConformance
console.log(`imports: ${packages.length} packages from dist; internal modules are not exported`)
