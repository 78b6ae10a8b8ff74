/**
 * The downstream of the Worker example: an order API, a Worker of its own that the shop Worker
 * reaches through a service binding. It stands for any API that writes at once, answers late and
 * does not deduplicate: each `POST /orders` inserts a row into its `orders` table (D1) first, then
 * waits `RESPONSE_DELAY_MS` before it answers, so a caller that stops waiting has already caused the
 * write. Each row keeps the exact answer sent for it, so a test can compare what a client was
 * replayed with what the order API said.
 */
import { D1SqlClient } from "@effect-idempotency/sql"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

/** An order, as a client sends it. */
export const Order = Schema.Struct({
  sku: Schema.NonEmptyTrimmedString,
  quantity: Schema.Int.pipe(Schema.positive())
})
export type Order = typeof Order.Type

/** The order API's answer to a write. */
export const Created = Schema.Struct({ orderId: Schema.String, sku: Schema.String, quantity: Schema.Int })
export type Created = typeof Created.Type

/** The bindings of the order API. */
export interface Env {
  /** Its database, with the `orders` table. */
  readonly DB: D1SqlClient.D1Database
  /** How long after its write it answers, in milliseconds (a `[vars]` entry). Default 0. */
  readonly RESPONSE_DELAY_MS?: string | undefined
}

const delayOf = (env: Env): Duration.Duration =>
  Schema.decodeUnknownOption(Schema.NumberFromString)(env.RESPONSE_DELAY_MS).pipe(
    Option.map(Duration.millis),
    Option.getOrElse(() => Duration.zero)
  )

const decodeOrder = Schema.decodeUnknown(Schema.parseJson(Order))

/** Writes the order, then answers after the delay; the answer's bytes are kept with the row. */
const create = (order: Order, delay: Duration.Duration) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const created: Created = { orderId: `ord_${crypto.randomUUID()}`, sku: order.sku, quantity: order.quantity }
    const body = JSON.stringify(created)
    yield* sql`CREATE TABLE IF NOT EXISTS orders (
      id TEXT PRIMARY KEY,
      sku TEXT NOT NULL,
      quantity INTEGER NOT NULL,
      response TEXT NOT NULL
    )`
    yield* sql`INSERT INTO orders (id, sku, quantity, response)
      VALUES (${created.orderId}, ${created.sku}, ${created.quantity}, ${body})`
    yield* Effect.sleep(delay)
    return new Response(body, { status: 201, headers: { "content-type": "application/json" } })
  })

export default {
  fetch: (request: Request, env: Env): Promise<Response> =>
    Effect.gen(function*() {
      if (request.method !== "POST" || new URL(request.url).pathname !== "/orders") {
        return Response.json({ error: "not found" }, { status: 404 })
      }
      const order = yield* Effect.flatMap(Effect.promise(() => request.text()), decodeOrder)
      return yield* create(order, delayOf(env))
    }).pipe(
      Effect.catchTags({
        ParseError: () => Effect.succeed(Response.json({ error: "not an order" }, { status: 400 })),
        SqlError: (error) =>
          Effect.as(Effect.logError(error), Response.json({ error: "the order was not written" }, { status: 500 }))
      }),
      Effect.provide(D1SqlClient.layer(env.DB)),
      Effect.runPromise
    )
}
