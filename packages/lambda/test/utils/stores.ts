/**
 * The real stores the Lambda tests run on: the PostgreSQL server named by `TEST_PG_URL` (embedded
 * PGlite when it is unset) and DynamoDB Local (dynalite where Java is missing, outside CI), each on
 * a table of the test's own, removed when the function is disposed.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore, DynamoDbTable } from "@effect-idempotency/dynamodb"
import { PgIdempotencyMigration, PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { randomUUID } from "node:crypto"
import { inject } from "vitest"

declare module "vitest" {
  export interface ProvidedContext {
    readonly dynamodbBackends: ReadonlyArray<{ readonly name: string; readonly endpoint: string }>
  }
}

export interface StoreBackend {
  readonly name: string
  /** A store layer on a fresh table of its own. */
  readonly layer: () => Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>
}

const serverUrl = process.env.TEST_PG_URL === "" ? undefined : process.env.TEST_PG_URL

/** PGlite behind a socket, started on first use and kept for the file's tests. */
let pglite: Promise<string> | undefined
const pgliteUrl = () => {
  pglite ??= PGlite.create().then(async (db) => {
    const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 16 })
    await server.start()
    return `postgres://postgres@${server.getServerConn()}/postgres`
  })
  return pglite
}

const postgres: StoreBackend = {
  name: serverUrl === undefined ? "PostgreSQL (PGlite: TEST_PG_URL is not set)" : "PostgreSQL (the TEST_PG_URL server)",
  layer: () => {
    const table = `lambda_${randomUUID().replaceAll("-", "_")}`
    return Layer.scoped(
      IdempotencyStore.IdempotencyStore,
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* Effect.acquireRelease(
          PgIdempotencyMigration.migration({ table }),
          () =>
            sql.unsafe(`DROP TABLE IF EXISTS "${table}"; DROP FUNCTION IF EXISTS "${table}_reserve"`).pipe(
              Effect.ignore
            )
        )
        return yield* PgIdempotencyStore.make({ table })
      })
    ).pipe(
      Layer.provide(Layer.unwrapEffect(Effect.map(
        Effect.promise(() => serverUrl === undefined ? pgliteUrl() : Promise.resolve(serverUrl)),
        (url) => PgClient.layer({ url: Redacted.make(url), maxConnections: 8 })
      )))
    )
  }
}

const dynamodb = (backend: { readonly name: string; readonly endpoint: string }): StoreBackend => ({
  name: `DynamoDB (${backend.name})`,
  layer: () => {
    const tableName = `lambda-${randomUUID()}`
    return Layer.effect(
      IdempotencyStore.IdempotencyStore,
      Effect.zipRight(DynamoDbTable.create({ tableName }), DynamoDbStore.make({ tableName }))
    ).pipe(
      Layer.provide(DynamoDbClient.layer({
        endpoint: backend.endpoint,
        region: "us-east-1",
        credentials: { accessKeyId: "local", secretAccessKey: "local" }
      }))
    )
  }
})

/** PostgreSQL, and DynamoDB Local when it runs (always in CI), else dynalite. */
export const realStores: ReadonlyArray<StoreBackend> = [
  postgres,
  dynamodb(
    inject("dynamodbBackends").find((backend) => backend.name === "DynamoDB Local") ?? inject("dynamodbBackends")[0]!
  )
]
