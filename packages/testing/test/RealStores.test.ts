/**
 * The known-good properties on the real stores, with fewer cases than on the memory store: the
 * PostgreSQL store (the server named by `TEST_PG_URL`, else embedded PGlite), with expiry on
 * Effect's `Clock` and with the store's default, the database's clock, and the DynamoDB store on
 * every endpoint the DynamoDB package's global setup starts (DynamoDB Local and dynalite, on
 * 127.0.0.1). The clock moves stepwise: simulated time never passes while a store request is in
 * flight.
 *
 * On the database's clock, the store reads `statement_timestamp()` on the server, which `TestClock`
 * cannot move. The property's connections put a schema of the run's own ahead of `pg_catalog` on
 * their `search_path`, with a `statement_timestamp()` that answers the time held in one row, and
 * every store call first sets that row to `TestClock`'s time: the store's own statements, unchanged,
 * read the simulated time from the database.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore, DynamoDbTable } from "@effect-idempotency/dynamodb"
import { PgIdempotencyMigration, PgIdempotencyStore, PgIdempotencyTable } from "@effect-idempotency/sql-pg"
import { Postgres } from "@effect-idempotency/test-support"
import { PlatformModel, RetryProperty } from "@effect-idempotency/testing"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Vitest } from "@effect/vitest"
import { assert, describe, layer } from "@effect/vitest"
import * as Clock from "effect/Clock"
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

type It = Vitest.MethodsNonLive<IdempotencyStore.IdempotencyStore>

/** A known-good property as a test played against the store of the context: it passes every run. */
const check = (
  name: string,
  run: (numRuns: number) => Effect.Effect<RetryProperty.Report, never, IdempotencyStore.IdempotencyStore>,
  guaranteed: (report: RetryProperty.Report) => void
) =>
(it: It, numRuns: number) =>
  it.effect(name, () =>
    Effect.gen(function*() {
      const report = yield* run(numRuns)
      assert.isTrue(report.passed, report.text)
      assert.strictEqual(report.numRuns, numRuns)
      guaranteed(report)
    }), TIMEOUT)

/** The two known-good properties. */
const checks = {
  exactlyOnce: check(
    "keepLease with a deduplicating downstream: exactly once",
    (numRuns) => RetryProperty.run(properties.exactlyOnce, { numRuns }),
    (report) => assert.include(["exactlyOnce", "exactlyOnceWithDeduplication"], report.guarantee)
  ),
  atMostOnce: check(
    "markUnknown with failures stored, without deduplication: at most once",
    (numRuns) => RetryProperty.run(properties.atMostOnce, { numRuns }),
    (report) => assert.notStrictEqual(report.guarantee, "atLeastOnce")
  )
}

const knownGood = (it: It, numRuns: number) => {
  checks.exactlyOnce(it, numRuns)
  checks.atMostOnce(it, numRuns)
}

// PostgreSQL

// a table of this run's own, dropped at the end: runs against one server never share it
const TABLE = `idem_retry_property_${randomUUID().slice(0, 8)}`
const serverUrl = Postgres.serverUrl

/** Creates the simulated clock: a row holding the time, and a `statement_timestamp()` reading it. */
const createClock = (sql: SqlClient.SqlClient, schema: string) =>
  sql.unsafe(
    `CREATE SCHEMA IF NOT EXISTS ${schema};
     CREATE TABLE IF NOT EXISTS ${schema}.simulated_now (millis bigint NOT NULL);
     INSERT INTO ${schema}.simulated_now SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM ${schema}.simulated_now);
     CREATE OR REPLACE FUNCTION ${schema}.statement_timestamp() RETURNS timestamptz LANGUAGE sql STABLE
       AS 'SELECT timestamptz ''epoch'' + millis * interval ''1 millisecond'' FROM ${schema}.simulated_now'`
  ).withoutTransform

/** Every call of `store` first sets the database's simulated clock to `TestClock`'s time. */
const onSimulatedClock = (
  store: IdempotencyStore.IdempotencyStore["Type"],
  sql: SqlClient.SqlClient,
  schema: string
): IdempotencyStore.IdempotencyStore["Type"] => {
  const sync = Effect.flatMap(
    Clock.currentTimeMillis,
    (millis) => Effect.orDie(sql.unsafe(`UPDATE ${schema}.simulated_now SET millis = $1`, [millis]).withoutTransform)
  )
  const synced = <A extends ReadonlyArray<unknown>, B, E>(f: (...args: A) => Effect.Effect<B, E>) => (...args: A) =>
    Effect.zipRight(sync, f(...args))
  return {
    reserve: synced(store.reserve),
    complete: synced(store.complete),
    release: synced(store.release),
    markFailed: synced(store.markFailed),
    extend: synced(store.extend),
    get: synced(store.get),
    purgeExpired: synced(store.purgeExpired)
  }
}

/** On the database's clock, the connections resolve `statement_timestamp()` in the clock's schema first. */
const withClock = (url: string, clock: IdempotencyStore.ClockSource, schema: string): string => {
  if (clock === "effect") return url
  const parsed = new URL(url)
  parsed.searchParams.set("options", `-c search_path=${schema},pg_catalog,public`)
  return parsed.toString()
}

/**
 * A PostgreSQL store on a table of its own; on the database's clock, with a simulated clock in a
 * schema of its own (each property's `TestClock` drives its own).
 */
const PgStore = (clock: IdempotencyStore.ClockSource, property: string) => {
  const schema = `clock_${property.toLowerCase()}_${randomUUID().slice(0, 8)}`
  return Layer.unwrapScoped(
    Effect.map(Postgres.primary({ maxConnections: 20 }), ({ url }) =>
      Layer.scoped(
        IdempotencyStore.IdempotencyStore,
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          if (clock === "server") {
            // first: the table and its function are created in the clock's schema, first on the path
            yield* Effect.acquireRelease(
              createClock(sql, schema),
              () => Effect.ignore(sql.unsafe(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).withoutTransform)
            )
            // PGlite serves every connection from its one session, which ignores the URL's options
            if (serverUrl === undefined) {
              yield* sql.unsafe(`SET search_path TO ${schema}, pg_catalog, public`).withoutTransform
            }
          }
          const name = `${TABLE}_${clock === "effect" ? "e" : "d"}_${property.slice(0, 5).toLowerCase()}`
          const table = yield* PgIdempotencyTable.make({ table: name })
          const drop =
            sql.unsafe(`DROP TABLE IF EXISTS ${table.qualified}; DROP FUNCTION IF EXISTS ${table.reserveFunction}`)
              .withoutTransform
          yield* Effect.acquireRelease(
            Effect.zipRight(drop, PgIdempotencyMigration.migration({ table: name })),
            () => Effect.ignore(drop)
          )
          const store = yield* PgIdempotencyStore.make({ table: name, clock })
          return clock === "effect" ? store : onSimulatedClock(store, sql, schema)
        })
      ).pipe(Layer.provide(PgClient.layer({ url: Redacted.make(withClock(url, clock, schema)), maxConnections: 10 }))))
  )
}

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
  const label = serverUrl === undefined ? "PGlite" : "TEST_PG_URL"
  layer(PgStore("effect", "all"), { timeout: "2 minutes" })(
    `on the PostgreSQL store (${label}, Effect's clock)`,
    (it) => knownGood(it, runs(60))
  )
  // one store per property: each property's TestClock drives its own simulated database clock
  for (const property of ["exactlyOnce", "atMostOnce"] as const) {
    layer(PgStore("server", property), { timeout: "2 minutes" })(
      `on the PostgreSQL store (${label}, the database's clock)`,
      (it) => checks[property](it, runs(40))
    )
  }

  for (const backend of inject("dynamodbBackends")) {
    layer(dynamoStore(backend.endpoint), { timeout: "2 minutes" })(
      `on the DynamoDB store (${backend.name})`,
      (it) => knownGood(it, runs(60))
    )
  }
})
