/**
 * The order consumer on RabbitMQ (`@effect-idempotency/queue/RabbitMqConsumer`): a quorum queue, so
 * that deliveries are counted, keyed by each message's `message-id`.
 */
import * as RabbitMqConsumer from "@effect-idempotency/queue/RabbitMqConsumer"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Connection, Consumer } from "rabbitmq-client"
import * as Orders from "./Orders.js"

/** The queue's declaration: durable, quorum (it counts deliveries for `maxDeliveries`), 4 messages at a time. */
export const queueOptions = (queue: string): RabbitMqConsumer.QueueOptions["queue"] => ({
  queue,
  queueOptions: { durable: true, arguments: { "x-queue-type": "quorum" } },
  qos: { prefetchCount: 8 },
  concurrency: 4
})

/** Consumes `queue` with the order consumer until the scope closes; yields once subscribed. */
export const consume = (
  connection: Connection,
  queue: string,
  consumer: typeof Orders.consumer = Orders.consumer
): Effect.Effect<Consumer, never, Scope.Scope | SqlClient.SqlClient | Orders.Payments> =>
  RabbitMqConsumer.consume(connection, { queue: queueOptions(queue), payload: Orders.Order, consumer })

/** Publishes each order under its message id, confirmed by the broker. */
export const publish = (
  connection: Connection,
  queue: string,
  messages: ReadonlyArray<{ readonly messageId: string; readonly order: Orders.Order }>
): Effect.Effect<void> =>
  Effect.acquireUseRelease(
    Effect.sync(() => connection.createPublisher({ confirm: true })),
    (publisher) =>
      Effect.forEach(messages, ({ messageId, order }) =>
        Effect.promise(() =>
          publisher.send({ routingKey: queue, messageId, contentType: "application/json", durable: true }, order)
        ), { discard: true }),
    (publisher) =>
      Effect.promise(() =>
        publisher.close()
      )
  )
