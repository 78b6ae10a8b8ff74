/**
 * The transactional mode with an outbox: an order and the message for the payments API are
 * written in the transaction that reserves and records the key; the message is sent after the
 * commit, by a relay, with the key forwarded from the operation.
 *
 * What this gives:
 *
 * - the order row, the outbox row and the idempotency record commit together or not at all: a
 *   retried request writes one order and one message, whatever crashed where;
 * - the payments API is called only for committed orders (never for a transaction that rolled
 *   back), at least once: the relay sends again when it crashed after the call and before marking
 *   the row sent. The message carries the key derived for the step (`IdempotencyContext.stepKey`),
 *   the same on every send, so an API that deduplicates by `Idempotency-Key` charges once.
 */
import { IdempotencyContext } from "@effect-idempotency/core"
import { PgTransactional } from "@effect-idempotency/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

export const NewOrder = Schema.Struct({ sku: Schema.String, quantity: Schema.Int, amountCents: Schema.Int })

export const Order = Schema.Struct({ orderId: Schema.String })

/** The tables of the example: the orders and the outbox, next to the idempotency records. */
export const createTables: Effect.Effect<void, SqlError, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS orders (
    id text PRIMARY KEY, sku text NOT NULL, quantity int NOT NULL, amount_cents int NOT NULL)`
  yield* sql`CREATE TABLE IF NOT EXISTS outbox (
    id bigserial PRIMARY KEY, idempotency_key text NOT NULL, body jsonb NOT NULL, sent_at timestamptz)`
})

/** Places an order: the order row and its payment message, in the operation's transaction. */
export const placeOrder = PgTransactional.make({
  name: "place-order",
  payload: NewOrder,
  success: Order,
  execute: (order) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const orderId = crypto.randomUUID()
      yield* sql`INSERT INTO orders (id, sku, quantity, amount_cents)
        VALUES (${orderId}, ${order.sku}, ${order.quantity}, ${order.amountCents})`
      // the payments API's key: the same on every retry of this request, and on every send
      const paymentKey = yield* IdempotencyContext.stepKey("payments")
      const body = JSON.stringify({ orderId, amountCents: order.amountCents })
      yield* sql`INSERT INTO outbox (idempotency_key, body) VALUES (${paymentKey}, ${body}::jsonb)`
      return { orderId }
    })
})

/** The external API: `charge` with an `Idempotency-Key`. */
export interface Payments {
  readonly charge: (key: string, body: unknown) => Effect.Effect<void>
}

/**
 * Sends the unsent messages, then marks them sent. Rows are claimed `FOR UPDATE SKIP LOCKED`, so
 * relays on several instances never send one row at once; a relay that dies after the call and
 * before the mark leaves the row unsent, and the next send carries the same key.
 */
export const relay = (payments: Payments): Effect.Effect<number, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      const rows = yield* sql<{ readonly id: string; readonly idempotency_key: string; readonly body: unknown }>`
        SELECT id, idempotency_key, body FROM outbox WHERE sent_at IS NULL ORDER BY id LIMIT 100
        FOR UPDATE SKIP LOCKED`
      for (const row of rows) {
        yield* payments.charge(row.idempotency_key, row.body)
        yield* sql`UPDATE outbox SET sent_at = now() WHERE id = ${row.id}`
      }
      return rows.length
    }))
  })

/**
 * The example end to end: a request placed and retried, a relay that dies after the API's call
 * and before marking its row sent, and the relay run again. Returns what the database and the API
 * hold at the end.
 */
export const demo: Effect.Effect<
  {
    readonly replayed: boolean
    readonly orders: number
    readonly outbox: number
    readonly unsent: number
    readonly sends: number
    readonly charges: number
  },
  unknown,
  SqlClient.SqlClient
> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* createTables
  const request = { key: "order-2f6c1d", payload: { sku: "A-1", quantity: 2, amountCents: 1999 } }
  const first = yield* placeOrder.runDetailed(request)
  // the client never got the answer and sends the request again: the recorded outcome comes back
  const retry = yield* placeOrder.runDetailed(request)

  // an API that deduplicates by key: a second call with a key it has seen charges nothing
  const charged = new Map<string, unknown>()
  let sends = 0
  const payments: Payments = {
    charge: (key, body) =>
      Effect.sync(() => {
        sends++
        if (!charged.has(key)) charged.set(key, body)
      })
  }
  // the first relay dies after the API's call and before the mark: its transaction rolls back
  const dying: Payments = { charge: (key, body) => Effect.zipRight(payments.charge(key, body), Effect.die("killed")) }
  yield* Effect.exit(relay(dying))
  yield* relay(payments)

  const count = (query: string) => Effect.map(sql.unsafe<{ readonly n: number }>(query), (rows) => rows[0]?.n ?? 0)
  return {
    replayed: retry.replayed && first.value.orderId === retry.value.orderId,
    orders: yield* count("SELECT count(*)::int AS n FROM orders"),
    outbox: yield* count("SELECT count(*)::int AS n FROM outbox"),
    unsent: yield* count("SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL"),
    sends,
    charges: charged.size
  }
})
