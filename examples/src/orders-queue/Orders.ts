/**
 * The order consumer both brokers share: a message places an order (a row of `shop_orders`) and
 * charges it through the payments service (a row of its own table, `payments_charges`), and the
 * message's idempotency record commits in the same PostgreSQL transaction (`PgTransactional`). A
 * consumer that dies after the commit and before the acknowledgement gets the message again, and
 * the record answers it: the order is placed and charged once per message id.
 */
import { IdempotentConsumer } from "@effect-idempotency/queue"
import { PgTransactional } from "@effect-idempotency/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"

/** A message's body: the order to place and charge. Its key is the message's id, not a field. */
export const Order = Schema.Struct({
  orderId: Schema.String,
  sku: Schema.String,
  quantity: Schema.Int,
  amountCents: Schema.Int
})

export type Order = typeof Order.Type

/** What the operation records, and what a redelivery gets back. */
export const Placed = Schema.Struct({ orderRow: Schema.String, chargeId: Schema.String })

/** The downstream: a payments service whose charges are rows of its own table, in the same database. */
export class Payments extends Context.Tag("examples/orders-queue/Payments")<Payments, {
  readonly charge: (order: Order) => Effect.Effect<{ readonly chargeId: string }, SqlError>
}>() {}

/** `Payments` on PostgreSQL: each call inserts a charge (no key, no deduplication of its own). */
export const PaymentsLive: Layer.Layer<Payments, never, SqlClient.SqlClient> = Layer.effect(
  Payments,
  Effect.map(SqlClient.SqlClient, (sql) => ({
    charge: (order) => {
      const chargeId = `ch_${randomUUID()}`
      return Effect.as(
        sql`INSERT INTO payments_charges (charge_id, order_id, amount_cents)
          VALUES (${chargeId}, ${order.orderId}, ${order.amountCents})`,
        { chargeId }
      )
    }
  }))
)

/** The shop's orders and the payments service's charges. Neither has a unique order id: nothing but the record dedupes. */
export const createTables: Effect.Effect<void, SqlError, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS shop_orders (
    id text PRIMARY KEY, order_id text NOT NULL, sku text NOT NULL, quantity int NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now())`
  yield* sql`CREATE TABLE IF NOT EXISTS payments_charges (
    charge_id text PRIMARY KEY, order_id text NOT NULL, amount_cents int NOT NULL)`
})

/** The operation's definition: the order row, then the charge, on the `SqlClient` the transaction holds. */
export const placeOrderOptions = {
  name: "place-order",
  payload: Order,
  success: Placed,
  execute: (order: Order) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const orderRow = `row_${randomUUID()}`
      yield* sql`INSERT INTO shop_orders (id, order_id, sku, quantity)
        VALUES (${orderRow}, ${order.orderId}, ${order.sku}, ${order.quantity})`
      const { chargeId } = yield* Effect.flatMap(Payments, (payments) => payments.charge(order))
      return { orderRow, chargeId }
    }),
  // the transaction's answer by then, or rolled back: shorter than the brokers' redelivery timers
  timeout: "5 seconds"
} as const

/** The order, its charge and its record in one transaction (README.md, "the inbox in the same transaction"). */
export const placeOrder = PgTransactional.make(placeOrderOptions)

/** How a message is settled: a failing one comes back after a second, and is rejected after 5 deliveries. */
export const settleOptions = { maxDeliveries: 5, retryDelay: "1 second" } as const

/** The consumer both transports run: one `placeOrder` per message id. */
export const consumer: IdempotentConsumer.Consumer<Order, SqlClient.SqlClient | Payments> = IdempotentConsumer
  .fromOperation(placeOrder, settleOptions)

/** Order rows and charges per order id, for the ids starting with `prefix`, counted from the tables themselves. */
export const counts = (prefix: string): Effect.Effect<
  ReadonlyArray<{ readonly orderId: string; readonly orders: number; readonly charges: number }>,
  SqlError,
  SqlClient.SqlClient
> =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql<{ readonly order_id: string; readonly orders: number; readonly charges: number }>`
      SELECT order_id, sum(orders)::int AS orders, sum(charges)::int AS charges FROM (
        SELECT order_id, 1 AS orders, 0 AS charges FROM shop_orders WHERE starts_with(order_id, ${prefix})
        UNION ALL
        SELECT order_id, 0, 1 FROM payments_charges WHERE starts_with(order_id, ${prefix})
      ) AS rows GROUP BY order_id ORDER BY order_id`.pipe(
        Effect.map((rows) => rows.map((row) => ({ orderId: row.order_id, orders: row.orders, charges: row.charges })))
      )
  )
