/**
 * The order consumer on NATS JetStream (`@effect-idempotency/queue/JetStreamConsumer`): a stream of
 * orders and a durable pull consumer, keyed by each message's `Nats-Msg-Id` header.
 */
import * as JetStreamConsumer from "@effect-idempotency/queue/JetStreamConsumer"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream"
import { AckPolicy } from "@nats-io/jetstream"
import { headers } from "@nats-io/transport-node"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Orders from "./Orders.js"

/** A stream, its subject and its durable pull consumer. */
export interface Topology {
  readonly stream: string
  readonly subject: string
  readonly durable: string
  /** How long a delivery may stay unacknowledged before JetStream delivers it again. */
  readonly ackWait: Duration.DurationInput
  /** The window in which JetStream drops a publish whose `Nats-Msg-Id` it has seen. */
  readonly duplicateWindow: Duration.DurationInput
}

/** Ten seconds to acknowledge: longer than the operation's answer (its timeout and the commit). */
export const defaults = { ackWait: "10 seconds", duplicateWindow: "2 minutes" } as const

const nanos = (duration: Duration.DurationInput) => Duration.toMillis(duration) * 1_000_000

/** Creates (or updates) the stream and its durable consumer. */
export const declare = (jsm: JetStreamManager, topology: Topology): Effect.Effect<void> =>
  Effect.promise(async () => {
    await jsm.streams.add({
      name: topology.stream,
      subjects: [topology.subject],
      duplicate_window: nanos(topology.duplicateWindow)
    })
    await jsm.consumers.add(topology.stream, {
      durable_name: topology.durable,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(topology.ackWait),
      max_deliver: -1
    })
  })

/**
 * While a message's handler runs, JetStream is told it is being worked on this often: a handler slowed
 * by its database past `ack_wait` is not delivered again meanwhile (each delivery counts towards
 * `maxDeliveries`).
 */
export const workingEvery = "2 seconds"

/** Consumes the durable with the order consumer, 4 messages at a time, until the scope closes. */
export const consume = (
  js: JetStreamClient,
  topology: Topology,
  consumer: typeof Orders.consumer = Orders.consumer
): Effect.Effect<
  void,
  JetStreamConsumer.JetStreamConsumerError,
  Scope.Scope | SqlClient.SqlClient | Orders.Payments
> =>
  Effect.flatMap(
    Effect.tryPromise({
      try: () => js.consumers.get(topology.stream, topology.durable),
      catch: (cause) => new JetStreamConsumer.JetStreamConsumerError({ message: "no such consumer", cause })
    }),
    (source) => JetStreamConsumer.consume(source, { payload: Orders.Order, consumer, concurrency: 4, workingEvery })
  )

/** Publishes each order under its `Nats-Msg-Id`; yields how many JetStream stored (the others were duplicates it dropped). */
export const publish = (
  js: JetStreamClient,
  subject: string,
  messages: ReadonlyArray<{ readonly messageId: string; readonly order: Orders.Order }>
): Effect.Effect<number> =>
  Effect.reduce(messages, 0, (stored, { messageId, order }) =>
    Effect.promise(() => {
      const h = headers()
      h.set(JetStreamConsumer.MSG_ID_HEADER, messageId)
      return js.publish(subject, JSON.stringify(order), { headers: h })
    }).pipe(Effect.map((ack) => ack.duplicate ? stored : stored + 1)))
