/**
 * A RabbitMQ consumer in a process of its own (`KilledConsumer.test.ts`), charging orders through
 * the inbox of `pgOrSqliteInbox.ts`.
 *
 * Arguments: the AMQP URL, the queue, the database, the records table, the charges table, and where
 * to stop (`pgOrSqliteInbox.POINTS`: it prints `PAUSED <point>` and waits to be killed). With
 * `finish` it consumes until it has acknowledged a message, then prints `DONE`.
 */
import * as RabbitMqConsumer from "@effect-idempotency/queue/RabbitMqConsumer"
import * as Children from "@effect-idempotency/test-support/Children"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { Connection } from "rabbitmq-client"
import { inbox, Order } from "./pgOrSqliteInbox.js"

const [url, queue, database, records, charges, point] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string
]

const { consumer, layer } = inbox({ database, records, charges, point })

const program = Effect.gen(function*() {
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
    consumer
  })
  // `finish`: until the message is acknowledged (bounded: the test's own timeout is longer)
  yield* Effect.sync(() => subscription.stats.acknowledged > 0).pipe(
    Effect.filterOrFail((done) => done, () => new Error("not acknowledged yet")),
    Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.upTo("60 seconds")))
  )
}).pipe(Effect.scoped, Effect.provide(layer), Effect.orDie)

Children.runMain(program)
