/**
 * The real stores the Lambda tests run on: the PostgreSQL server named by `TEST_PG_URL` (embedded
 * PGlite when it is unset) and DynamoDB Local (dynalite where Java is missing, outside CI), each on
 * a table of the test's own (PostgreSQL's removed when the function is disposed).
 */
import type { IdempotencyStore } from "@effect-idempotency/core"
import { Postgres, Stores } from "@effect-idempotency/test-support"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import { inject } from "vitest"

declare module "vitest" {
  export interface ProvidedContext {
    readonly dynamodbBackends: ReadonlyArray<Stores.DynamoDbEndpoint>
  }
}

export interface StoreBackend {
  readonly name: string
  /** A store layer on a fresh table of its own. */
  readonly layer: () => Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>
}

/** The PostgreSQL server, or PGlite behind a socket, started on first use and kept for the file's tests. */
let database: Promise<string> | undefined
const databaseUrl = () => {
  database ??= Effect.runPromise(
    Effect.map(Scope.extend(Postgres.primary({ maxConnections: 16 }), Effect.runSync(Scope.make())), (db) => db.url)
  )
  return database
}

const postgres: StoreBackend = {
  name: Postgres.serverUrl === undefined
    ? "PostgreSQL (PGlite: TEST_PG_URL is not set)"
    : "PostgreSQL (the TEST_PG_URL server)",
  layer: () =>
    Layer.unwrapEffect(Effect.map(
      Effect.promise(databaseUrl),
      (url) => Stores.pgStore({ url, table: "lambda", maxConnections: 8, drop: true })
    ))
}

const dynamodb = (endpoint: Stores.DynamoDbEndpoint): StoreBackend => ({
  name: `DynamoDB (${endpoint.name})`,
  layer: () => Stores.dynamodbStore({ endpoint: endpoint.endpoint, table: "lambda" })
})

/** PostgreSQL, and DynamoDB Local when it runs (always in CI), else dynalite. */
export const realStores: ReadonlyArray<StoreBackend> = [
  postgres,
  dynamodb(Stores.preferDynamoDbLocal(inject("dynamodbBackends")))
]
