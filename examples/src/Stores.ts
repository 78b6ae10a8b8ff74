/**
 * The idempotency stores the scenario can run against, selected on the command line:
 *
 * - `PGlite` (the default): embedded PostgreSQL in WASM, served on a loopback port by
 *   test-support's `PgliteServer`, so the `pg` driver talks to it as to any server. Nothing to install.
 * - `Postgres`: a PostgreSQL server at a URL (`--pg-url`).
 * - `DynamoDB`: an endpoint such as DynamoDB Local (`--dynamodb-endpoint`).
 * - `Redis`: a Redis or Valkey server at a URL (`--redis-url`).
 * - `Memory`: the in-process store (`--store memory`).
 *
 * The SQL stores also count their rows for a key straight from the table, as an operator would; the
 * Redis store counts the keys of a client key on the server.
 */
import { IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore, DynamoDbTable } from "@effect-idempotency/dynamodb"
import { RedisClient, RedisStore } from "@effect-idempotency/redis"
import { PgIdempotencyMigration, PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import * as Launch from "./Launch.js"

export type Choice =
  | { readonly _tag: "PGlite" }
  | { readonly _tag: "Postgres"; readonly url: string }
  | { readonly _tag: "DynamoDB"; readonly endpoint: string; readonly tableName?: string | undefined }
  | { readonly _tag: "Redis"; readonly url: string; readonly prefix?: string | undefined }
  | { readonly _tag: "Memory" }

export interface Store {
  /** What the report calls it. */
  readonly description: string
  readonly store: IdempotencyStore.IdempotencyStore["Type"]
  /** The rows of a client key, counted in the table itself (SQL stores). */
  readonly rowsOfKey?: ((key: string) => Effect.Effect<number, unknown>) | undefined
  /** How `rowsOfKey` counts, when not by SQL. */
  readonly rowsOfKeyLabel?: string | undefined
}

/** The table of the SQL stores: its own, so the demo never touches an application's records. */
export const PG_TABLE = "examples_idempotency_records"

/** The table of the DynamoDB store. */
export const DYNAMODB_TABLE = "examples-idempotency"

/** The key prefix of the Redis store: its own, so the demo never touches an application's records. */
export const REDIS_PREFIX = "examples-idempotency:"

const Count = Schema.Struct({ n: Schema.Number })

const postgres = (url: string, description: string): Effect.Effect<Store, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const context = yield* Layer.build(PgClient.layer({ url: Redacted.make(url), maxConnections: 4 }))
    const sql = Context.get(context, SqlClient.SqlClient)
    yield* Effect.provide(PgIdempotencyMigration.migration({ table: PG_TABLE }), context)
    const store = yield* Effect.provide(PgIdempotencyStore.make({ table: PG_TABLE }), context)
    const rowsOfKey = (key: string) =>
      sql`SELECT count(*)::int AS n FROM ${sql(PG_TABLE)} WHERE key = ${key}`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(Count))),
        Effect.map((rows) => rows[0]?.n ?? 0)
      )
    return { description, store, rowsOfKey }
  })

/** Embedded PostgreSQL: PGlite behind `PgliteServer` on a free loopback port. */
const pglite: Effect.Effect<Store, unknown, Scope.Scope> = Effect.flatMap(
  Launch.pglite,
  ({ address, url }) => postgres(url, `PGlite (embedded PostgreSQL, served on ${address}), table ${PG_TABLE}`)
)

const redactUrl = (url: string): string => {
  const parsed = new URL(url)
  if (parsed.password !== "") parsed.password = "***"
  return parsed.toString()
}

const dynamodb = (endpoint: string, tableName: string): Effect.Effect<Store, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const context = yield* Layer.build(DynamoDbClient.layer({
      endpoint,
      region: process.env.AWS_REGION ?? "us-east-1",
      // a local endpoint (DynamoDB Local, dynalite) accepts any credentials
      credentials: {
        accessKeyId: process.env.AWS_ACCESS_KEY_ID ?? "local",
        secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY ?? "local"
      }
    }))
    yield* Effect.provide(DynamoDbTable.create({ tableName }), context)
    const store = yield* Effect.provide(DynamoDbStore.make({ tableName }), context)
    return { description: `DynamoDB at ${endpoint}, table ${tableName}`, store }
  })

/** A `SCAN MATCH` pattern that matches `text` literally. */
const globEscape = (text: string) => text.replace(/[*?[\]\\]/g, "\\$&")

const redis = (url: string, prefix: string): Effect.Effect<Store, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const context = yield* Layer.build(RedisClient.layer({ url }))
    const { client } = Context.get(context, RedisClient.RedisClient)
    const store = yield* Effect.provide(RedisStore.make({ prefix }), context)
    // every record of a client key, whatever its operation and scope: `<prefix>{<operation>#…<key>}`
    const rowsOfKey = (key: string) =>
      Effect.tryPromise(async () => {
        const pattern = `${globEscape(prefix)}{*#${globEscape(key)}}`
        let count = 0
        for (const node of "nodes" in client ? client.nodes("master") : [client]) {
          let cursor = "0"
          do {
            const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000)
            cursor = next
            count += keys.length
          } while (cursor !== "0")
        }
        return count
      })
    return {
      description: `Redis at ${redactUrl(url)}, key prefix ${prefix}`,
      store,
      rowsOfKey,
      rowsOfKeyLabel: `keys for this key on the server (SCAN MATCH ${prefix}{*#<key>})`
    }
  })

/**
 * Connects the store and warms its write paths before the scenario's clock starts: a reservation,
 * a completion that expires at once, and a read, on a record of its own. The first attempt's time
 * limit then measures the function, not the setup of a cold client or a cold emulator.
 */
const warmUp = (store: Store): Effect.Effect<Store, unknown> =>
  Effect.gen(function*() {
    const id = IdempotencyRecord.makeRecordId({ operation: "warm-up", key: yield* IdempotencyKey.generate })
    const token = yield* Effect.sync(() => randomUUID())
    const lease = Duration.seconds(10)
    yield* store.store.reserve({ id, token, fingerprint: "warm-up", lease, ttl: lease, takeover: true })
    yield* store.store.complete({
      id,
      token,
      outcome: IdempotencyRecord.StoredOutcome.Timeout(),
      ttl: Duration.millis(1)
    })
    yield* store.store.get(id)
    return store
  })

/** The store of a choice, started for the life of the scope. */
export const make = (choice: Choice): Effect.Effect<Store, unknown, Scope.Scope> =>
  Effect.flatMap(connect(choice), warmUp)

const connect = (choice: Choice): Effect.Effect<Store, unknown, Scope.Scope> => {
  switch (choice._tag) {
    case "PGlite":
      return pglite
    case "Postgres":
      return postgres(choice.url, `PostgreSQL at ${redactUrl(choice.url)}, table ${PG_TABLE}`)
    case "DynamoDB":
      return dynamodb(choice.endpoint, choice.tableName ?? DYNAMODB_TABLE)
    case "Redis":
      return redis(choice.url, choice.prefix ?? REDIS_PREFIX)
    case "Memory":
      return Effect.map(IdempotencyStore.makeMemory({ warn: false }), (store) => ({
        description: "memory (this process only)",
        store
      }))
  }
}
