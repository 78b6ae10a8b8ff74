/**
 * The known-good properties on the real stores, with fewer cases than on the memory store: the
 * PostgreSQL store (the server named by `TEST_PG_URL`, else embedded PGlite), with expiry on
 * Effect's `Clock`, and the DynamoDB store on every endpoint the DynamoDB package's global setup
 * starts (DynamoDB Local and dynalite, on 127.0.0.1). The clock moves stepwise: simulated time never
 * passes while a store request is in flight.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore, DynamoDbTable } from "@effect-idempotency/dynamodb"
import { PgIdempotencyMigration, PgIdempotencyStore, PgIdempotencyTable } from "@effect-idempotency/sql-pg"
import { PlatformModel, RetryProperty } from "@effect-idempotency/testing"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Vitest } from "@effect/vitest"
import { assert, describe, layer } from "@effect/vitest"
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as TestServices from "effect/TestServices"
import { randomUUID } from "node:crypto"
import { inject } from "vitest"
import { createOrder, order, OrdersApiSimulated, runs } from "./utils/orders.js"

declare module "vitest" {
  export interface ProvidedContext {
    readonly dynamodbBackends: ReadonlyArray<{ readonly name: string; readonly endpoint: string }>
  }
}

const TIMEOUT = { timeout: 600_000 }

/** The two known-good configurations, played against the store of the context. */
const properties = {
  exactlyOnce: {
    operation: createOrder({ name: "create-order-exactly-once", timeout: "2 seconds", onTimeout: "keepLease" }),
    payload: order,
    platform: PlatformModel.awsLambdaAsync,
    deduplicate: true,
    services: OrdersApiSimulated,
    store: IdempotencyStore.IdempotencyStore,
    require: "exactlyOnce" as const
  },
  atMostOnce: {
    operation: createOrder({
      name: "create-order-at-most-once",
      timeout: "2 seconds",
      onTimeout: "markUnknown",
      onTransient: "store"
    }),
    payload: order,
    platform: PlatformModel.awsLambdaAsync,
    deduplicate: false,
    services: OrdersApiSimulated,
    downstream: { failures: ["Rejected", "Unavailable"] },
    store: IdempotencyStore.IdempotencyStore
  }
}

const knownGood = (it: Vitest.MethodsNonLive<IdempotencyStore.IdempotencyStore>, numRuns: number) => {
  it.effect("keepLease with a deduplicating downstream: exactly once", () =>
    Effect.gen(function*() {
      const report = yield* RetryProperty.run(properties.exactlyOnce, { numRuns })
      assert.isTrue(report.passed, report.text)
      assert.strictEqual(report.numRuns, numRuns)
      assert.include(["exactlyOnce", "exactlyOnceWithDeduplication"], report.guarantee)
    }), TIMEOUT)

  it.effect("markUnknown with failures stored, without deduplication: at most once", () =>
    Effect.gen(function*() {
      const report = yield* RetryProperty.run(properties.atMostOnce, { numRuns })
      assert.isTrue(report.passed, report.text)
      assert.strictEqual(report.numRuns, numRuns)
      assert.notStrictEqual(report.guarantee, "atLeastOnce")
    }), TIMEOUT)
}

// PostgreSQL

// a table of this run's own, dropped at the end: runs against one server never share it
const TABLE = `idem_retry_property_${randomUUID().slice(0, 8)}`
const serverUrl = process.env.TEST_PG_URL === "" ? undefined : process.env.TEST_PG_URL

/** Embedded PGlite, served on a loopback port for the `pg` driver. */
const pgliteUrl = Effect.gen(function*() {
  const db = yield* Effect.acquireRelease(
    Effect.promise(() => PGlite.create()),
    (db) => Effect.promise(() => db.close())
  )
  const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 20 })
  yield* Effect.acquireRelease(Effect.promise(() => server.start()), () => Effect.promise(() => server.stop()))
  return `postgres://postgres@${server.getServerConn()}/postgres`
})

const PgStore = Layer.unwrapScoped(
  Effect.map(serverUrl === undefined ? pgliteUrl : Effect.succeed(serverUrl), (url) =>
    Layer.scoped(
      IdempotencyStore.IdempotencyStore,
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const table = yield* PgIdempotencyTable.make({ table: TABLE })
        const drop =
          sql.unsafe(`DROP TABLE IF EXISTS ${table.qualified}; DROP FUNCTION IF EXISTS ${table.reserveFunction}`)
            .withoutTransform
        yield* Effect.acquireRelease(
          Effect.zipRight(drop, PgIdempotencyMigration.migration({ table: TABLE })),
          () => Effect.ignore(drop)
        )
        return yield* PgIdempotencyStore.make({ table: TABLE, clock: "effect" })
      })
    ).pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 10 }))))
)

// DynamoDB: DynamoDB Local (when Java is found; required in CI), which returns the existing item
// on a failed condition, and dynalite, which does not, so the store reads it back: both paths

const dynamoStore = (endpoint: string) => {
  const tableName = `retry-property-${randomUUID()}`
  return DynamoDbStore.layerWith({ tableName }).pipe(
    Layer.provide(Layer.effectDiscard(TestServices.provideLive(DynamoDbTable.create({ tableName })))),
    Layer.provide(
      DynamoDbClient.layer({
        endpoint,
        region: "us-east-1",
        credentials: { accessKeyId: "local", secretAccessKey: "local" }
      })
    )
  )
}

// the properties on every store run at once: each case waits on its own TestClock
describe.concurrent("RetryProperty on the real stores", () => {
  layer(PgStore, { timeout: "2 minutes" })(
    `on the PostgreSQL store (${serverUrl === undefined ? "PGlite" : "TEST_PG_URL"})`,
    (it) => knownGood(it, runs(60))
  )

  for (const backend of inject("dynamodbBackends")) {
    layer(dynamoStore(backend.endpoint), { timeout: "2 minutes" })(
      `on the DynamoDB store (${backend.name})`,
      (it) => knownGood(it, runs(60))
    )
  }
})
