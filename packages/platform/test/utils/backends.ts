/**
 * The stores the server tests run on, each reached through a `TcpProxy` so a test can take it
 * down: the PostgreSQL server named by `TEST_PG_URL` (embedded PGlite when it is unset), and DynamoDB
 * Local, started by the DynamoDB store's global setup (dynalite where Java is missing; CI requires
 * DynamoDB Local).
 */
import type { IdempotencyStore } from "@effect-idempotency/core"
import { Stores } from "@effect-idempotency/test-support"
import type * as HttpApp from "@effect/platform/HttpApp"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { inject } from "vitest"
import { serve } from "./server.js"

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

/** The app `make` builds on the store of `backend` behind a proxy, served on loopback: its client, and the proxy. */
export const servedOn = <E, R, EM>(
  backend: Backend,
  make: (store: Context.Context<IdempotencyStore.IdempotencyStore>) => Effect.Effect<HttpApp.Default<E, R>, EM>
) =>
  Effect.gen(function*() {
    const { context, proxy } = yield* proxiedStore(backend)
    const client = yield* serve(yield* make(context))
    return { client, proxy }
  })
