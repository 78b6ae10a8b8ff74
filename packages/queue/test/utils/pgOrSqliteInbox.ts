/**
 * The inbox of the consumers the kill tests run in processes of their own (`rabbitChild.ts`,
 * `jetstreamChild.ts`): orders charged through a transactional operation, so the charge (a row of
 * the charges table) and the message's record commit together, on a SQLite file (`SqlTransactional`)
 * or a PostgreSQL database (`PgTransactional`). The parent creates both tables.
 *
 * The points where a child stops, prints `PAUSED <point>` and waits to be killed: `before-handler`
 * (the message received, nothing begun), `in-handler` (the transaction open, nothing written),
 * `after-write` (the charge written, not committed), `before-ack` (committed, not acknowledged).
 */
import { IdempotentConsumer } from "@effect-idempotency/queue"
import { SqlTransactional } from "@effect-idempotency/sql"
import { PgIdempotencyTable, PgTransactional } from "@effect-idempotency/sql-pg"
import * as Children from "@effect-idempotency/test-support/Children"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"

/** Where a child stops; `finish` runs until the message is acknowledged. */
export const POINTS = ["before-handler", "in-handler", "after-write", "before-ack"] as const

/** The body of every message. */
export const Order = Schema.Struct({ orderId: Schema.String, amountCents: Schema.Int })

/** The database of a child: `sqlite:<file>`, or a PostgreSQL URL. */
export const sqlitePrefix = "sqlite:"

/**
 * The consumer of a child (stopping at `point`) and the `SqlClient` it runs on: `database` as
 * `sqlitePrefix` or a PostgreSQL URL says, the records in `records`, the charges in `charges`.
 */
export const inbox = (options: {
  readonly database: string
  readonly records: string
  readonly charges: string
  readonly point: string
}): {
  readonly consumer: IdempotentConsumer.Consumer<typeof Order.Type, SqlClient.SqlClient>
  readonly layer: Layer.Layer<SqlClient.SqlClient, SqlError | ConfigError.ConfigError>
} => {
  const pauseAt = (here: string) => here === options.point ? Effect.promise(() => Children.pause(here)) : Effect.void
  const charge = {
    name: "charge-order",
    payload: Order,
    success: Schema.Struct({ chargeId: Schema.String }),
    execute: ({ amountCents, orderId }: typeof Order.Type) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* pauseAt("in-handler")
        const chargeId = `ch_${randomUUID()}`
        yield* sql`INSERT INTO ${sql(options.charges)} ${
          sql.insert({ charge_id: chargeId, order_id: orderId, amount_cents: amountCents })
        }`
        yield* pauseAt("after-write")
        return { chargeId }
      }).pipe(Effect.orDie)
  }
  const sqlite = options.database.startsWith(sqlitePrefix)
  const consumer = sqlite
    ? IdempotentConsumer.fromOperation(SqlTransactional.make({ ...charge, table: options.records }))
    : IdempotentConsumer.fromOperation(
      PgTransactional.make({ ...charge, table: Either.getOrThrow(PgIdempotencyTable.make({ table: options.records })) })
    )
  return {
    consumer: {
      ...consumer,
      handle: (delivery, payload) =>
        Effect.zipRight(
          pauseAt("before-handler"),
          Effect.tap(
            consumer.handle(delivery, payload),
            (settlement) => settlement._tag === "Ack" ? pauseAt("before-ack") : Effect.void
          )
        )
    },
    layer: sqlite
      ? SqliteClient.layer({ filename: options.database.slice(sqlitePrefix.length) })
      : PgClient.layer({ url: Redacted.make(options.database), maxConnections: 2 })
  }
}
