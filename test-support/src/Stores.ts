/**
 * Stores on real servers for the adapters' and the examples' tests: PostgreSQL (the `TEST_PG_URL`
 * server, else PGlite) and DynamoDB (DynamoDB Local or dynalite, as the DynamoDB global setup
 * started them), each on a table of the test's own, optionally reached through a `TcpProxy` that a
 * test can take down or stall.
 *
 * @example
 * for (const backend of [Stores.postgres({ table: "http" }), Stores.dynamodb(endpoint, { table: "http" })]) {
 *   const { context, proxy } = yield* Stores.proxied(backend)
 * }
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore, DynamoDbTable } from "@effect-idempotency/dynamodb"
import { PgIdempotencyMigration, PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import { TcpProxy } from "@effect-idempotency/testing"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import { primary, serverUrl } from "./Postgres.js"

/** A server's address. */
export interface Target {
  readonly host: string
  readonly port: number
}

/** A store's server, and the store on a fresh table of its own reached on a port (a proxy's). */
export interface Backend {
  readonly name: string
  /** The store's server, for the whole suite. */
  readonly target: Effect.Effect<Target, unknown, Scope.Scope>
  /** The store on a fresh table, through the proxy listening on `port`. */
  readonly store: (port: number) => Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>
}

/** A DynamoDB endpoint the DynamoDB global setup started (`inject("dynamodbBackends")`). */
export interface DynamoDbEndpoint {
  readonly name: string
  readonly endpoint: string
}

/** DynamoDB Local when it runs (always in CI), else the first endpoint (dynalite). */
export const preferDynamoDbLocal = (endpoints: ReadonlyArray<DynamoDbEndpoint>): DynamoDbEndpoint =>
  endpoints.find((endpoint) => endpoint.name === "DynamoDB Local") ?? endpoints[0]!

/** A table name of a test's own: `prefix_` and a UUID. */
const pgTable = (prefix: string): string => `${prefix}_${randomUUID().replaceAll("-", "_")}`

/**
 * The PostgreSQL store on a fresh table, migrated first, through a `PgClient` on `url`; with `drop`,
 * the table and its function are dropped when the layer is released (5 seconds at most).
 */
export const pgStore = (options: {
  readonly url: string
  readonly table: string
  readonly maxConnections?: number | undefined
  readonly drop?: boolean | undefined
}): Layer.Layer<IdempotencyStore.IdempotencyStore, unknown> => {
  const table = pgTable(options.table)
  const migrate = options.drop === true
    ? Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.acquireRelease(
        PgIdempotencyMigration.migration({ table }),
        () =>
          sql.unsafe(`DROP TABLE IF EXISTS "${table}"; DROP FUNCTION IF EXISTS "${table}_reserve"`).pipe(
            Effect.timeout("5 seconds"),
            Effect.ignore
          )
      ))
    : PgIdempotencyMigration.migration({ table })
  return Layer.scoped(IdempotencyStore.IdempotencyStore, Effect.zipRight(migrate, PgIdempotencyStore.make({ table })))
    .pipe(
      Layer.provide(PgClient.layer({ url: Redacted.make(options.url), maxConnections: options.maxConnections }))
    )
}

/**
 * PostgreSQL: the `TEST_PG_URL` server, else PGlite serving `pgliteConnections` connections; its
 * stores on tables named `table_<uuid>`.
 */
export const postgres = (options: {
  readonly table: string
  readonly pgliteConnections: number
  readonly maxConnections?: number | undefined
  readonly drop?: boolean | undefined
}): Backend => {
  const database = serverUrl === undefined ? "postgres" : new URL(serverUrl).pathname.slice(1)
  return {
    name: serverUrl === undefined
      ? "PostgreSQL on PGlite (TEST_PG_URL is not set)"
      : "the PostgreSQL server (TEST_PG_URL)",
    target: Effect.map(primary({ maxConnections: options.pgliteConnections }), ({ host, port }) => ({ host, port })),
    store: (port) =>
      pgStore({
        url: `postgres://postgres@127.0.0.1:${port}/${database}`,
        table: options.table,
        maxConnections: options.maxConnections,
        drop: options.drop
      })
  }
}

/** The DynamoDB store on a fresh table (`table-<uuid>`), created first, on `endpoint`. */
export const dynamodbStore = (options: {
  readonly endpoint: string
  readonly table: string
  readonly maxSockets?: number | undefined
}): Layer.Layer<IdempotencyStore.IdempotencyStore, unknown> => {
  const tableName = `${options.table}-${randomUUID()}`
  return Layer.effect(
    IdempotencyStore.IdempotencyStore,
    Effect.zipRight(DynamoDbTable.create({ tableName }), DynamoDbStore.make({ tableName }))
  ).pipe(
    Layer.provide(DynamoDbClient.layer({
      endpoint: options.endpoint,
      region: "us-east-1",
      credentials: { accessKeyId: "local", secretAccessKey: "local" },
      ...(options.maxSockets === undefined ? {} : { requestHandler: { httpAgent: { maxSockets: options.maxSockets } } })
    }))
  )
}

/** DynamoDB on an endpoint the DynamoDB global setup started. */
export const dynamodb = (
  endpoint: DynamoDbEndpoint,
  options: { readonly table: string; readonly maxSockets?: number | undefined }
): Backend => ({
  name: `DynamoDB on ${endpoint.name}`,
  target: Effect.sync(() => {
    const url = new URL(endpoint.endpoint)
    return { host: url.hostname, port: Number(url.port) }
  }),
  store: (port) => dynamodbStore({ endpoint: `http://127.0.0.1:${port}`, ...options })
})

/** The store of a backend behind a proxy, for the life of the scope. */
export const proxied = (backend: Backend) =>
  Effect.gen(function*() {
    const proxy = yield* TcpProxy.make(yield* backend.target)
    const context = yield* Layer.build(backend.store(proxy.port))
    return { proxy, context }
  })
