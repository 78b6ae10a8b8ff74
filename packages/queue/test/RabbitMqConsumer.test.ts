import { IdempotencyStore } from "@effect-idempotency/core"
import type { IdempotentConsumer } from "@effect-idempotency/queue"
import * as RabbitMqConsumer from "@effect-idempotency/queue/RabbitMqConsumer"
import { assert, describe, inject, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import { Connection } from "rabbitmq-client"
import { eventually } from "./utils/eventually.js"

const Order = Schema.Struct({ orderId: Schema.String, amountCents: Schema.Int })
type Order = typeof Order.Type

class Declined extends Schema.TaggedError<Declined>()("Declined", {}) {}

/** A connection to the run's RabbitMQ, closed with the scope. */
const connect = Effect.acquireRelease(
  Effect.promise(async () => {
    const connection = new Connection({ url: inject("amqpUrl"), connectionName: "idempotency-test" })
    connection.on("error", () => {})
    await connection.onConnect(10_000)
    return connection
  }),
  (connection) => Effect.promise(() => connection.close())
)

/**
 * A quorum queue of the test's own (it counts deliveries in `x-delivery-count`), whose rejected
 * messages are dead-lettered to a second queue; both deleted with the scope.
 */
const queues = (connection: Connection) =>
  Effect.gen(function*() {
    const name = `idem-test-${randomUUID().slice(0, 8)}`
    const dead = `${name}-dead`
    yield* Effect.acquireRelease(
      Effect.promise(() => connection.queueDeclare({ queue: dead, durable: true })),
      () => Effect.promise(() => connection.queueDelete({ queue: dead })).pipe(Effect.ignore)
    )
    yield* Effect.addFinalizer(() => Effect.promise(() => connection.queueDelete({ queue: name })).pipe(Effect.ignore))
    return {
      name,
      dead,
      consumer: {
        queue: name,
        queueOptions: {
          durable: true,
          arguments: {
            "x-queue-type": "quorum" as const,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": dead
          }
        },
        qos: { prefetchCount: 8 },
        concurrency: 4
      }
    }
  })

/** Publishes each message (with confirms) to `queue`, its `messageId` the key. */
const publish = (
  connection: Connection,
  queue: string,
  messages: ReadonlyArray<{ readonly id: string; readonly body: unknown }>
) =>
  Effect.acquireUseRelease(
    Effect.sync(() => connection.createPublisher({ confirm: true, maxAttempts: 3 })),
    (publisher) =>
      Effect.forEach(messages, ({ body, id }) =>
        Effect.promise(() =>
          publisher.send({ routingKey: queue, messageId: id, contentType: "application/json", durable: true }, body)
        ), { concurrency: 16, discard: true }),
    (publisher) =>
      Effect.promise(() =>
        publisher.close()
      )
  )

/** The messages in a queue, taken off it. */
const drain = (connection: Connection, queue: string) =>
  Effect.promise(async () => {
    const taken: Array<{ readonly messageId: string | undefined }> = []
    for (let i = 0; i < 1000; i++) {
      const message = await connection.basicGet({ queue, noAck: true })
      if (message === undefined) break
      taken.push({ messageId: message.messageId })
    }
    return taken
  })

const effects = Effect.map(Ref.make(new Map<string, number>()), (ref) => ({
  ref,
  record: (id: string) => Ref.update(ref, (map) => new Map(map).set(id, (map.get(id) ?? 0) + 1)),
  get: Ref.get(ref)
}))

/** The ids of the first `count` messages dead-lettered to `queue`, taken off it as they come. */
const deadLettered = (connection: Connection, queue: string, count: number) =>
  Effect.gen(function*() {
    const dead: Array<string> = []
    yield* eventually(
      `${count} dead-lettered`,
      Effect.map(drain(connection, queue), (taken) => {
        dead.push(...taken.map((m) => m.messageId ?? ""))
        return dead.length >= count
      })
    )
    return dead
  })

/** The consumer of every test: orders charged through `execute`, with `settle`'s settings. */
const charging = (
  queue: RabbitMqConsumer.QueueOptions["queue"],
  execute: (order: Order) => Effect.Effect<{ readonly orderId: string }, Declined>,
  settle?: Pick<IdempotentConsumer.SettleOptions<Order, Declined>, "maxDeliveries" | "retryDelay">
) => ({
  queue,
  name: "charge-order",
  payload: Order,
  success: Schema.Struct({ orderId: Schema.String }),
  execute,
  ...settle
})

const withStore = <A, E>(test: Effect.Effect<A, E, Scope.Scope | IdempotencyStore.IdempotencyStore>) =>
  Effect.provide(test, IdempotencyStore.layerMemory)

describe("RabbitMqConsumer", () => {
  it.scopedLive(
    "10,000 messages, one in ten published twice, two consumers: one effect per id, every delivery acknowledged",
    () =>
      withStore(Effect.gen(function*() {
        const connection = yield* connect
        const queue = yield* queues(connection)
        const seen = yield* effects
        const options = charging(
          queue.consumer,
          (order) => Effect.as(seen.record(order.orderId), { orderId: order.orderId })
        )
        const first = yield* RabbitMqConsumer.consume(connection, options)
        const second = yield* RabbitMqConsumer.consume(connection, options)
        const ids = Array.from({ length: 10_000 }, (_, i) => `order-${i}`)
        const messages = ids.flatMap((id, i) => {
          const message = { id, body: { orderId: id, amountCents: 100 + i } }
          return i % 10 === 0 ? [message, message] : [message]
        })
        yield* publish(connection, queue.name, messages)
        yield* eventually(
          "every delivery acknowledged",
          Effect.sync(() => first.stats.acknowledged + second.stats.acknowledged === messages.length),
          "120 seconds"
        )
        const counted = yield* seen.get
        assert.strictEqual(counted.size, ids.length)
        assert.deepStrictEqual([...new Set(counted.values())], [1])
        // both consumers took part
        assert.isAbove(first.stats.acknowledged, 0)
        assert.isAbove(second.stats.acknowledged, 0)
        assert.strictEqual(first.stats.dropped + second.stats.dropped, 0)
      })),
    { timeout: 180_000 }
  )

  it.scopedLive(
    "a message whose key is in progress on another delivery is requeued, then replays: one effect",
    () =>
      withStore(Effect.gen(function*() {
        const connection = yield* connect
        const queue = yield* queues(connection)
        const seen = yield* effects
        const entered = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const consumer = yield* RabbitMqConsumer.consume(
          connection,
          charging(queue.consumer, (order) =>
            Effect.gen(function*() {
              yield* Deferred.succeed(entered, undefined)
              yield* Deferred.await(release)
              yield* seen.record(order.orderId)
              return { orderId: order.orderId }
            }), { retryDelay: "50 millis" })
        )
        const message = { id: "order-held", body: { orderId: "order-held", amountCents: 1999 } }
        yield* publish(connection, queue.name, [message])
        yield* Deferred.await(entered)
        yield* publish(connection, queue.name, [message])
        yield* eventually("the second delivery requeued", Effect.sync(() => consumer.stats.requeued > 0))
        yield* Deferred.succeed(release, undefined)
        yield* eventually("both deliveries acknowledged", Effect.sync(() => consumer.stats.acknowledged === 2))
        assert.deepStrictEqual([...(yield* seen.get)], [["order-held", 1]])
        assert.strictEqual(consumer.stats.dropped, 0)
      })),
    { timeout: 60_000 }
  )

  it.scopedLive(
    "a body that does not decode, or a message without an id, is dead-lettered and runs nothing",
    () =>
      withStore(Effect.gen(function*() {
        const connection = yield* connect
        const queue = yield* queues(connection)
        const seen = yield* effects
        const consumer = yield* RabbitMqConsumer.consume(
          connection,
          charging(queue.consumer, (order) => Effect.as(seen.record(order.orderId), { orderId: order.orderId }))
        )
        yield* publish(connection, queue.name, [{ id: "order-bad", body: { orderId: 42 } }])
        // an empty message-id: no key
        yield* publish(connection, queue.name, [{ id: "", body: { orderId: "no-id", amountCents: 1 } }])
        yield* eventually("both messages rejected", Effect.sync(() => consumer.stats.dropped === 2))
        assert.sameMembers(yield* deadLettered(connection, queue.dead, 2), ["order-bad", ""])
        assert.strictEqual((yield* seen.get).size, 0)
      })),
    { timeout: 60_000 }
  )

  it.scopedLive(
    "a handler that keeps failing is retried, then dead-lettered after maxDeliveries",
    () =>
      withStore(Effect.gen(function*() {
        const connection = yield* connect
        const queue = yield* queues(connection)
        const attempts = yield* Ref.make(0)
        // not in a `failure` schema: released, so each delivery runs again
        const consumer = yield* RabbitMqConsumer.consume(
          connection,
          charging(
            queue.consumer,
            () => Effect.zipRight(Ref.update(attempts, (n) => n + 1), Effect.fail(new Declined())),
            { maxDeliveries: 3, retryDelay: "20 millis" }
          )
        )
        yield* publish(connection, queue.name, [{
          id: "order-declined",
          body: { orderId: "order-declined", amountCents: 5 }
        }])
        yield* eventually("the message rejected", Effect.sync(() => consumer.stats.dropped === 1))
        assert.strictEqual(yield* Ref.get(attempts), 3)
        assert.strictEqual(consumer.stats.requeued, 2)
        assert.deepStrictEqual(yield* deadLettered(connection, queue.dead, 1), ["order-declined"])
      })),
    { timeout: 60_000 }
  )
})
