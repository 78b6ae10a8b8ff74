/**
 * The stores the server tests run on, each reached through a `TcpProxy` so a test can take it
 * down: the PostgreSQL server named by `TEST_PG_URL` (embedded PGlite when it is unset), and DynamoDB
 * Local, started by the DynamoDB store's global setup (dynalite where Java is missing; CI requires
 * DynamoDB Local).
 */
import { Stores } from "@effect-idempotency/test-support"
import { inject } from "vitest"

declare module "vitest" {
  export interface ProvidedContext {
    readonly dynamodbBackends: ReadonlyArray<Stores.DynamoDbEndpoint>
  }
}

export type Backend = Stores.Backend

export const postgres: Backend = Stores.postgres({ table: "http", pgliteConnections: 40, maxConnections: 20 })

/** DynamoDB Local; dynalite only where the global setup found no Java (CI requires DynamoDB Local). */
export const dynamodb: Backend = Stores.dynamodb(Stores.preferDynamoDbLocal(inject("dynamodbBackends")), {
  table: "http",
  maxSockets: 256
})

export const backends: ReadonlyArray<Backend> = [postgres, dynamodb]

/** The store of a backend behind a proxy, for the life of the scope. */
export const proxiedStore = Stores.proxied
