/**
 * The orders API's server: the handlers over an `orders` table, the idempotency records in the same
 * PostgreSQL database (`@effect-idempotency/sql-pg`), `IdempotencyHttpApi` for `POST /orders`, the
 * OpenAPI document at `/openapi.json` and its Swagger UI at `/docs`.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyHttpApi } from "@effect-idempotency/platform"
import { PgIdempotencyMigration, PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiSwagger from "@effect/platform/HttpApiSwagger"
import * as HttpServer from "@effect/platform/HttpServer"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { createServer } from "node:http"
import { Order, OrderNotFound, OrdersApi, OutOfStock } from "./Api.js"

export interface Options {
  /** The PostgreSQL database of the orders and of the idempotency records. */
  readonly pgUrl: string
  /** The port on 127.0.0.1; 0 for any free one. */
  readonly port: number
  /** How long creating an order takes (it charges the customer first). */
  readonly processing: Duration.DurationInput
}

const OrderRow = Schema.Struct({
  id: Schema.String,
  sku: Schema.String,
  quantity: Schema.Int,
  created_at: Schema.DateFromSelf
})

const toOrder = (row: typeof OrderRow.Type) =>
  new Order({ id: row.id, sku: row.sku, quantity: row.quantity, createdAt: row.created_at.toISOString() })

const decodeRows = Schema.decodeUnknown(Schema.Array(OrderRow))

const OrdersLive = (processing: Duration.DurationInput) =>
  HttpApiBuilder.group(OrdersApi, "orders", (handlers) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE IF NOT EXISTS orders (
        id text PRIMARY KEY,
        sku text NOT NULL,
        quantity integer NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`
      return handlers
        .handle("create", ({ payload }) =>
          Effect.gen(function*() {
            if (payload.sku === "SOLD-OUT") return yield* new OutOfStock({ sku: payload.sku })
            // the payment provider takes its time: a retry sent meanwhile gets 409
            yield* Effect.sleep(processing)
            const id = `ord_${randomUUID().slice(0, 8)}`
            const rows =
              yield* sql`INSERT INTO orders (id, sku, quantity) VALUES (${id}, ${payload.sku}, ${payload.quantity})
              RETURNING id, sku, quantity, created_at`.pipe(Effect.flatMap(decodeRows), Effect.orDie)
            yield* Effect.logInfo(`order ${id} written: ${payload.quantity} × ${payload.sku}`)
            return toOrder(rows[0]!)
          }))
        .handle("list", () =>
          sql`SELECT id, sku, quantity, created_at FROM orders ORDER BY created_at`.pipe(
            Effect.flatMap(decodeRows),
            Effect.map((rows) => rows.map(toOrder)),
            Effect.orDie
          ))
        .handle("get", ({ path }) =>
          sql`SELECT id, sku, quantity, created_at FROM orders WHERE id = ${path.id}`.pipe(
            Effect.flatMap(decodeRows),
            Effect.orDie,
            Effect.flatMap((rows) =>
              Option.match(Option.fromNullable(rows[0]), {
                onNone: () => Effect.fail(new OrderNotFound({ id: path.id })),
                onSome: (row) => Effect.succeed(toOrder(row))
              })
            )
          ))
    }))

/** The idempotency records, in their default table (created if missing). */
const StoreLive = Layer.effect(
  IdempotencyStore.IdempotencyStore,
  Effect.zipRight(PgIdempotencyMigration.migration(), PgIdempotencyStore.make())
)

const ApiLive = (options: Options) =>
  HttpApiBuilder.api(OrdersApi).pipe(
    Layer.provide(OrdersLive(options.processing)),
    Layer.provide(IdempotencyHttpApi.layer(OrdersApi, {
      // each customer's keys are their own
      scope: (request) => Effect.succeed(request.headers["x-customer-id"]),
      // an order takes seconds, not minutes: a retry meanwhile is told to come back within 11 s
      timeout: "10 seconds",
      logLevel: "Info"
    })),
    Layer.provide(StoreLive)
  )

/** The server, listening on 127.0.0.1 (its `HttpServer` tells the address). */
export const layer = (options: Options) =>
  HttpApiBuilder.serve().pipe(
    Layer.provide(HttpApiSwagger.layer({ path: "/docs" })),
    Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" })),
    Layer.provide(ApiLive(options)),
    HttpServer.withLogAddress,
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: options.port, host: "127.0.0.1" })),
    Layer.provide(PgClient.layer({ url: Redacted.make(options.pgUrl), maxConnections: 8 }))
  )
