/**
 * The example's order consumer in a process of its own (`OrdersQueue.test.ts`), on RabbitMQ or
 * JetStream, stopped at a point where it prints `PAUSED <point>` and waits to be killed with SIGKILL:
 * `after-charge` (the order row and the charge written, the transaction not committed) or
 * `before-ack` (the order, its charge and its record committed, the message not acknowledged).
 *
 * Arguments: `rabbitmq <amqp url> <queue>` or `jetstream <nats url> <topology json>`, then the
 * point and the PostgreSQL URL.
 */
import * as Children from "@effect-idempotency/test-support/Children"
import * as PgClient from "@effect/sql-pg/PgClient"
import { jetstream } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { Connection } from "rabbitmq-client"
import * as JetStream from "../../src/orders-queue/JetStream.js"
import * as Orders from "../../src/orders-queue/Orders.js"
import * as RabbitMq from "../../src/orders-queue/RabbitMq.js"

const [transport, brokerUrl, target, point, databaseUrl] = process.argv.slice(2) as [
  string,
  string,
  string,
  "after-charge" | "before-ack",
  string
]

const pause = Effect.promise(() => Children.pause(point))

/** The example's consumer, stopped once its first fresh acknowledgement is decided (`before-ack`). */
const pausing: typeof Orders.consumer = {
  ...Orders.consumer,
  handle: (delivery, payload) =>
    Effect.tap(
      Orders.consumer.handle(delivery, payload),
      (settlement) => point === "before-ack" && settlement._tag === "Ack" && !settlement.replayed ? pause : Effect.void
    )
}

/** The example's payments service, stopped after its first charge, inside the operation's transaction (`after-charge`). */
const PaymentsPausing = Layer.effect(
  Orders.Payments,
  Effect.map(Orders.Payments, (payments) => ({
    charge: (order: Orders.Order) =>
      Effect.tap(payments.charge(order), () => point === "after-charge" ? pause : Effect.void)
  }))
).pipe(Layer.provide(Orders.PaymentsLive))

const rabbit = Effect.gen(function*() {
  const connection = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const connection = new Connection(brokerUrl)
      connection.on("error", () => {})
      return connection
    }),
    (connection) => Effect.promise(() => connection.close())
  )
  yield* RabbitMq.consume(connection, target, pausing)
  yield* Effect.never
})

const nats = Effect.gen(function*() {
  const nc = yield* Effect.acquireRelease(
    Effect.promise(() => connect({ servers: brokerUrl })),
    (nc) => Effect.promise(() => nc.close())
  )
  yield* JetStream.consume(jetstream(nc), JSON.parse(target) as JetStream.Topology, pausing)
  yield* Effect.never
})

const Database = Layer.provideMerge(
  PaymentsPausing,
  PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 4 })
)

Children.runMain((transport === "rabbitmq" ? rabbit : nats).pipe(Effect.scoped, Effect.provide(Database), Effect.orDie))
