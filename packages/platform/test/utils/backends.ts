/**
 * The stores the server tests run on, each reached through a `TcpProxy` so a test can take it
 * down: the PostgreSQL server named by `TEST_PG_URL` (embedded PGlite when it is unset), and DynamoDB
 * Local, started by the DynamoDB store's global setup (dynalite where Java is missing; CI requires
 * DynamoDB Local).
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore, DynamoDbTable } from "@effect-idempotency/dynamodb"
import { PgIdempotencyMigration, PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import { TcpProxy } from "@effect-idempotency/testing"
import * as PgClient from "@effect/sql-pg/PgClient"
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import { inject } from "vitest"

declare module "vitest" {
  export interface ProvidedContext {
    readonly dynamodbBackends: ReadonlyArray<{ readonly name: string; readonly endpoint: string }>
  }
}

export interface Backend {
  readonly name: string
  /** The store's server, for the whole suite. */
  readonly target: Effect.Effect<{ readonly host: string; readonly port: number }, unknown, Scope.Scope>
  /** The store on a fresh table, through the proxy listening on `port`. */
  readonly store: (port: number) => Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>
}

const serverUrl = process.env.TEST_PG_URL === "" ? undefined : process.env.TEST_PG_URL

const pgStore = (database: string) => (port: number) => {
  const table = `http_${randomUUID().replaceAll("-", "_")}`
  return Layer.effect(
    IdempotencyStore.IdempotencyStore,
    Effect.zipRight(PgIdempotencyMigration.migration({ table }), PgIdempotencyStore.make({ table }))
  ).pipe(
    Layer.provide(PgClient.layer({
      url: Redacted.make(`postgres://postgres@127.0.0.1:${port}/${database}`),
      maxConnections: 20
    }))
  )
}

export const postgres: Backend = serverUrl === undefined
  ? {
    name: "PostgreSQL on PGlite (TEST_PG_URL is not set)",
    target: Effect.gen(function*() {
      const db = yield* Effect.acquireRelease(
        Effect.promise(() => PGlite.create()),
        (db) => Effect.promise(() => db.close())
      )
      const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 40 })
      yield* Effect.acquireRelease(Effect.promise(() => server.start()), () => Effect.promise(() => server.stop()))
      const [host, port] = server.getServerConn().split(":")
      return { host: host!, port: Number(port) }
    }),
    store: pgStore("postgres")
  }
  : {
    name: "the PostgreSQL server (TEST_PG_URL)",
    target: Effect.sync(() => {
      const url = new URL(serverUrl)
      return { host: url.hostname, port: Number(url.port || 5432) }
    }),
    store: pgStore(new URL(serverUrl).pathname.slice(1))
  }

const dynamodbBackends = inject("dynamodbBackends")

/** DynamoDB Local; dynalite only where the global setup found no Java (CI requires DynamoDB Local). */
const dynamodbBackend = dynamodbBackends.find((backend) => backend.name === "DynamoDB Local") ??
  dynamodbBackends[0]!

export const dynamodb: Backend = {
  name: `DynamoDB on ${dynamodbBackend.name}`,
  target: Effect.sync(() => {
    const url = new URL(dynamodbBackend.endpoint)
    return { host: url.hostname, port: Number(url.port) }
  }),
  store: (port) => {
    const tableName = `http-${randomUUID()}`
    return Layer.effect(
      IdempotencyStore.IdempotencyStore,
      Effect.zipRight(DynamoDbTable.create({ tableName }), DynamoDbStore.make({ tableName }))
    ).pipe(
      Layer.provide(DynamoDbClient.layer({
        endpoint: `http://127.0.0.1:${port}`,
        region: "us-east-1",
        credentials: { accessKeyId: "local", secretAccessKey: "local" },
        requestHandler: { httpAgent: { maxSockets: 256 } }
      }))
    )
  }
}

export const backends: ReadonlyArray<Backend> = [postgres, dynamodb]

/** The store of a backend behind a proxy, for the life of the scope. */
export const proxiedStore = (backend: Backend) =>
  Effect.gen(function*() {
    const proxy = yield* TcpProxy.make(yield* backend.target)
    const context = yield* Layer.build(backend.store(proxy.port))
    return { proxy, context }
  })
