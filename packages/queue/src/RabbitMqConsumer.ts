/**
 * `IdempotentConsumer` on a RabbitMQ queue (`rabbitmq-client`), keyed by `message-id` (README.md#rabbitmq).
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import * as RabbitMqConsumer from "@effect-idempotency/queue/RabbitMqConsumer"
 * import { Effect, Layer, Schema } from "effect"
 * import { Connection } from "rabbitmq-client"
 *
 * const Order = Schema.Struct({ orderId: Schema.String, amountCents: Schema.Int })
 *
 * const consumer = Effect.gen(function*() {
 *   const connection = new Connection("amqp://guest:guest@127.0.0.1:5672")
 *   yield* Effect.addFinalizer(() => Effect.promise(() => connection.close()))
 *   yield* RabbitMqConsumer.consume(connection, {
 *     queue: { queue: "orders", queueOptions: { durable: true, arguments: { "x-queue-type": "quorum" } } },
 *     name: "charge-order",
 *     payload: Order,
 *     success: Schema.Struct({ chargeId: Schema.String }),
 *     execute: (order) => Effect.succeed({ chargeId: `ch_${order.orderId}` })
 *   })
 *   yield* Effect.never
 * }).pipe(Effect.scoped, Effect.provide(IdempotencyStore.layerMemory))
 * ```
 *
 * @since 0.1.0
 */
import type { IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type { AsyncMessage, Connection, Consumer, ConsumerProps } from "rabbitmq-client"
import * as IdempotentConsumer from "./IdempotentConsumer.js"

// rabbitmq-client's ConsumerStatus, by value: its enum is a runtime object of the client
const ACK = 0
const REQUEUE = 1
const DROP = 2
type Status = typeof ACK | typeof REQUEUE | typeof DROP

/**
 * The queue (`rabbitmq-client`'s consumer properties) and how a body becomes the payload.
 *
 * @since 0.1.0
 * @category models
 */
export interface QueueOptions {
  /** The queue and its declaration, QoS and bindings. `requeue` is the adapter's own. */
  readonly queue: Omit<ConsumerProps, "requeue">
  /**
   * The body as the `payload` schema decodes it. Default: the body `rabbitmq-client` decoded (JSON
   * with `contentType: "application/json"`), or a Buffer or string parsed as UTF-8 JSON.
   */
  readonly parse?: ((body: unknown) => unknown) | undefined
}

/**
 * What `consume` takes: the operation and its settlement (`IdempotentConsumer.Options`), and the queue.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<P, IP, A, IA, E, R, EF, IEF>
  extends IdempotentConsumer.Options<P, IP, A, IA, E, R, EF, IEF>, QueueOptions
{}

/**
 * What `consume` takes with a consumer built already (`IdempotentConsumer.fromOperation`).
 *
 * @since 0.1.0
 * @category models
 */
export interface ConsumerOptions<P, IP, R> extends QueueOptions {
  readonly payload: Schema.Schema<P, IP>
  readonly consumer: IdempotentConsumer.Consumer<P, R>
}

const defaultParse = (body: unknown): unknown =>
  Buffer.isBuffer(body) ? JSON.parse(body.toString("utf8")) : typeof body === "string" ? JSON.parse(body) : body

/**
 * A message's key and delivery count (`x-delivery-count` of quorum queues; unknown on a classic queue's redelivery).
 *
 * @since 0.1.0
 * @category utils
 */
export const deliveryOf = (message: AsyncMessage): IdempotentConsumer.Delivery => {
  const counted = message.headers?.["x-delivery-count"]
  const key = typeof message.messageId === "string" && message.messageId !== "" ? message.messageId : undefined
  return {
    key,
    deliveryCount: typeof counted === "number" ? counted + 1 : message.redelivered ? undefined : 1
  }
}

/**
 * Starts a consumer of a queue, stopped with the scope; yields the client's consumer once it is
 * subscribed (README.md#rabbitmq).
 *
 * @since 0.1.0
 * @category constructors
 */
export const consume: {
  <P, IP, R>(
    connection: Connection,
    options: ConsumerOptions<P, IP, R>
  ): Effect.Effect<Consumer, never, Scope.Scope | R>
  <P, IP, A, IA, E, R, EF = never, IEF = never>(
    connection: Connection,
    options: Options<P, IP, A, IA, E, R, EF, IEF>
  ): Effect.Effect<
    Consumer,
    never,
    Scope.Scope | Exclude<R, IdempotencyContext.IdempotencyContext> | IdempotencyStore.IdempotencyStore
  >
} = <P, IP, R, A, IA, E, RO, EF, IEF>(
  connection: Connection,
  options: ConsumerOptions<P, IP, R> | Options<P, IP, A, IA, E, RO, EF, IEF>
): Effect.Effect<Consumer, never, Scope.Scope | R> =>
  Effect.gen(function*() {
    const runtime = yield* Effect.runtime<R>()
    const run = Runtime.runPromise(runtime)
    const consumer = "consumer" in options
      ? options.consumer
      : IdempotentConsumer.make(options) as unknown as IdempotentConsumer.Consumer<P, R>
    const decode = Schema.decodeUnknown(options.payload)
    const parse = options.parse ?? defaultParse
    const handle = (message: AsyncMessage): Effect.Effect<Status, never, R> =>
      Effect.try(() => parse(message.body)).pipe(
        Effect.flatMap(decode),
        Effect.matchEffect({
          onFailure: () =>
            Effect.as(
              Effect.logWarning("idempotent consumer: a message whose body cannot be decoded is rejected").pipe(
                Effect.annotateLogs({ queue: options.queue.queue ?? "", messageId: String(message.messageId ?? "") })
              ),
              DROP as Status
            ),
          onSuccess: (payload) =>
            Effect.flatMap(consumer.handle(deliveryOf(message), payload), (settlement) =>
              IdempotentConsumer.Settlement.$match(settlement, {
                Ack: () => Effect.succeed(ACK as Status),
                Retry: ({ delay }) => Effect.as(Effect.sleep(Duration.min(delay, MAX_HOLD)), REQUEUE as Status),
                Reject: ({ reason }) =>
                  Effect.as(
                    Effect.logWarning("idempotent consumer: a message is rejected").pipe(
                      Effect.annotateLogs({ reason, messageId: String(message.messageId ?? "") })
                    ),
                    DROP as Status
                  )
              }))
        })
      )
    const subscription = yield* Effect.acquireRelease(
      Effect.sync(() =>
        connection.createConsumer({ ...options.queue, requeue: true }, (message) => run(handle(message)))
      ),
      (subscription) => Effect.promise(() => subscription.close())
    )
    // a handler never throws; what the client reports (a channel set up again) is only logged
    subscription.on("error", (error: unknown) => {
      run(Effect.logWarning("idempotent consumer: the RabbitMQ consumer reported an error", error)).catch(() => {})
    })
    // the queue is declared and the consumer subscribed when the client says so: until then a message
    // published to the queue could find no queue
    yield* Effect.async<void>((resume) => {
      const ready = () => resume(Effect.void)
      subscription.once("ready", ready)
      return Effect.sync(() => subscription.off("ready", ready))
    })
    return subscription
  })

/**
 * The longest a message is held before it is requeued (AMQP has no delayed requeue).
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_HOLD: Duration.Duration = Duration.seconds(5)
