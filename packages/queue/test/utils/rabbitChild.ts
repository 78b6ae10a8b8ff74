/**
 * A RabbitMQ consumer in a process of its own (`KilledConsumer.test.ts`): orders charged through a
 * transactional operation on a SQLite file, so the charge (a row of `charges`) and the message's
 * record commit together.
 *
 * Arguments: the AMQP URL, the queue, the file, and where to stop: `in-handler` (the transaction
 * open, nothing written), `after-write` (the charge written, not committed), `before-ack` (committed,
 * the message not acknowledged); at each it prints `PAUSED <point>` and waits to be killed. With
 * `finish` it consumes until it has acknowledged a message, then prints `DONE`.
 */
import { IdempotentConsumer } from "@effect-idempotency/queue"
import * as RabbitMqConsumer from "@effect-idempotency/queue/RabbitMqConsumer"
import { SqlIdempotencyMigration, SqlTransactional } from "@effect-idempotency/sql"
import * as Children from "@effect-idempotency/test-support/Children"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { Connection } from "rabbitmq-client"

const [url, queue, filename, point] = process.argv.slice(2) as [string, string, string, string]

const Order = Schema.Struct({ orderId: Schema.String, amountCents: Schema.Int })

const pauseAt = (here: string) => here === point ? Effect.promise(() => Children.pause(here)) : Effect.void

const charge = SqlTransactional.make({
  name: "charge-order",
  payload: Order,
  success: Schema.Struct({ chargeId: Schema.String }),
  execute: ({ amountCents, orderId }) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* pauseAt("in-handler")
      const chargeId = `ch_${randomUUID()}`
      yield* sql`INSERT INTO charges (charge_id, order_id, amount_cents) VALUES (${chargeId}, ${orderId}, ${amountCents})`
      yield* pauseAt("after-write")
      return { chargeId }
    }).pipe(Effect.orDie)
})

const consumer = IdempotentConsumer.fromOperation(charge)

const program = Effect.gen(function*() {
  yield* SqlIdempotencyMigration.migrate()
  const connection = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const connection = new Connection(url)
      connection.on("error", () => {})
      return connection
    }),
    (connection) => Effect.promise(() => connection.close())
  )
  const subscription = yield* RabbitMqConsumer.consume(connection, {
    queue: { queue, queueOptions: { durable: true, arguments: { "x-queue-type": "quorum" } } },
    payload: Order,
    consumer: {
      ...consumer,
      handle: (delivery, payload) =>
        Effect.tap(
          consumer.handle(delivery, payload),
          (settlement) => settlement._tag === "Ack" ? pauseAt("before-ack") : Effect.void
        )
    }
  })
  // `finish`: until the message is acknowledged (bounded: the test's own timeout is longer)
  yield* Effect.sync(() => subscription.stats.acknowledged > 0).pipe(
    Effect.filterOrFail((done) => done, () => new Error("not acknowledged yet")),
    Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.upTo("60 seconds")))
  )
}).pipe(Effect.scoped, Effect.provide(SqliteClient.layer({ filename })), Effect.orDie)

Children.runMain(program)
