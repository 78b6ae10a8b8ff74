/**
 * The order consumers of `src/orders-queue` on a real RabbitMQ and a real NATS JetStream, with the
 * orders, the charges and the records in PostgreSQL (the server of `TEST_PG_URL`, else PGlite). For
 * each broker: a consumer in a process of its own commits an order and is killed with SIGKILL before
 * its acknowledgement; then a batch in which some messages are published twice (JetStream: again
 * after its duplicate window) goes to two consumers on the same queue, with the killed message
 * delivered again. Counted from the shop's and the payments service's own tables: one order row and
 * one charge per message id, the handler ran once per id, and every delivery was acknowledged.
 */
import type { Idempotency } from "@effect-idempotency/core"
import { IdempotentConsumer } from "@effect-idempotency/queue"
import { PgIdempotencyMigration } from "@effect-idempotency/sql-pg"
import { Postgres } from "@effect-idempotency/test-support"
import * as Children from "@effect-idempotency/test-support/Children"
import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, inject, layer } from "@effect/vitest"
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import { randomUUID } from "node:crypto"
import { fileURLToPath } from "node:url"
import { Connection } from "rabbitmq-client"
import * as JetStream from "../src/orders-queue/JetStream.js"
import * as Orders from "../src/orders-queue/Orders.js"
import * as RabbitMq from "../src/orders-queue/RabbitMq.js"

const CHILD = fileURLToPath(new URL("./utils/ordersQueueChild.ts", import.meta.url))

/** The URL of the database the consumers (and the killed child) write to. */
class DatabaseUrl extends Context.Tag("test/DatabaseUrl")<DatabaseUrl, string>() {}

const Database = Layer.unwrapScoped(Effect.gen(function*() {
  const database = yield* Postgres.primary({ maxConnections: 30 })
  const client = PgClient.layer({ url: Redacted.make(database.url), maxConnections: 12 })
  const ready = Layer.effectDiscard(Effect.zipRight(PgIdempotencyMigration.migration(), Orders.createTables))
  return Layer.mergeAll(Layer.succeed(DatabaseUrl, database.url), Orders.PaymentsLive, ready).pipe(
    Layer.provideMerge(client)
  )
}))

interface Settled {
  readonly key: string
  readonly how: "placed" | "replayed" | "retried" | "rejected"
  readonly reason?: string
  /** The operation's failure, as JSON (its first 300 characters), when it failed. */
  readonly failure?: string
}

const described = (cause: Cause.Cause<unknown>): string =>
  (JSON.stringify(Option.getOrElse(Cause.failureOption(cause), () => Cause.pretty(cause))) ?? "").slice(0, 300)

/**
 * The example's consumer (`Orders.placeOrder` with `Orders.settleOptions`), each settlement it
 * decides noted in `settled`, with the operation's failure behind it.
 */
const tallied = (settled: Ref.Ref<ReadonlyArray<Settled>>): typeof Orders.consumer => ({
  ...Orders.consumer,
  handle: (delivery, payload) =>
    Effect.suspend(() => {
      let failure: string | undefined
      const consumer = IdempotentConsumer.fromOperation({
        name: Orders.placeOrder.name,
        runDetailed: (request: Idempotency.Request<Orders.Order>) =>
          Effect.tapErrorCause(Orders.placeOrder.runDetailed(request), (cause) =>
            Effect.sync(() => {
              failure = described(cause)
            }))
      }, Orders.settleOptions)
      return Effect.tap(consumer.handle(delivery, payload), (settlement) => {
        const how: Settled["how"] = settlement._tag === "Ack"
          ? settlement.replayed ? "replayed" : "placed"
          : settlement._tag === "Retry"
          ? "retried"
          : "rejected"
        const reason = settlement._tag === "Ack" ? undefined : settlement.reason
        return Ref.update(settled, (all) => [
          ...all,
          {
            key: delivery.key ?? "",
            how,
            ...(reason === undefined ? {} : { reason }),
            ...(failure === undefined ? {} : { failure })
          }
        ])
      })
    })
})

const acks = (settled: ReadonlyArray<Settled>): ReadonlyArray<Settled> =>
  settled.filter((s) => s.how === "placed" || s.how === "replayed")

/** Waits (50 ms polls) until `expected` deliveries are acknowledged; fails after a minute with what was settled. */
const acknowledged = (settled: Ref.Ref<ReadonlyArray<Settled>>, expected: number) =>
  Ref.get(settled).pipe(
    Effect.repeat({ until: (all) => acks(all).length >= expected, schedule: Schedule.spaced("50 millis") }),
    Effect.timeout("1 minute"),
    Effect.catchTag("TimeoutException", () =>
      Effect.flatMap(Ref.get(settled), (all) =>
        Effect.fail(
          new Error(
            `${acks(all).length} of ${expected} deliveries acknowledged in a minute; the others: ${
              JSON.stringify(all.filter((s) => s.how === "retried" || s.how === "rejected"))
            }`
          )
        )))
  )

/** The killed child's order, then 40 orders of which every fourth is published twice. */
const scenario = () => {
  const prefix = `ord-${randomUUID().slice(0, 8)}-`
  const message = (suffix: string) => ({
    messageId: `msg-${prefix}${suffix}`,
    order: { orderId: `${prefix}${suffix}`, sku: "BOOK-42", quantity: 1, amountCents: 1999 }
  })
  const killed = message("killed")
  const orders = Array.from({ length: 40 }, (_, i) => message(String(i + 1).padStart(2, "0")))
  const twice = orders.filter((_, i) => i % 4 === 3)
  const batch = orders.flatMap((m, i) => i % 4 === 3 ? [m, m] : [m])
  return { prefix, killed, orders, twice, batch }
}

type Point = "after-charge" | "before-ack"

/**
 * What every test asserts at the end: each of the 41 orders has one row and one charge; the
 * handler ran once for each id of the batch, and here for the killed child's id only if the child's
 * transaction never committed; the duplicates, and the killed child's id if its commit happened,
 * were answered from their records.
 */
const exactlyOnce = (s: ReturnType<typeof scenario>, point: Point, settled: ReadonlyArray<Settled>) =>
  Effect.gen(function*() {
    const counts = yield* Orders.counts(s.prefix)
    assert.strictEqual(counts.length, 41)
    for (const row of counts) assert.deepStrictEqual(row, { orderId: row.orderId, orders: 1, charges: 1 })
    const keys = (how: Settled["how"]) => acks(settled).filter((a) => a.how === how).map((a) => a.key).sort()
    const ids = (messages: ReadonlyArray<{ readonly messageId: string }>) => messages.map((m) => m.messageId).sort()
    assert.deepStrictEqual(keys("placed"), ids(point === "after-charge" ? [s.killed, ...s.orders] : s.orders))
    assert.deepStrictEqual(keys("replayed"), ids(point === "before-ack" ? [s.killed, ...s.twice] : s.twice))
  })

/**
 * Runs the example's consumer in a child until `point` of the killed order's message, and kills it
 * there: before the commit nothing of it is left; after the commit, its order and its charge are.
 */
const killedAt = (point: Point, args: ReadonlyArray<string>, s: ReturnType<typeof scenario>) =>
  Effect.gen(function*() {
    assert.strictEqual(
      yield* Children.runUntilMarker(CHILD, [...args, point, yield* DatabaseUrl]),
      `PAUSED ${point} (SIGKILL)`
    )
    assert.deepStrictEqual(
      yield* Orders.counts(s.prefix),
      point === "after-charge" ? [] : [{ orderId: s.killed.order.orderId, orders: 1, charges: 1 }]
    )
  })

const amqpConnection = Effect.acquireRelease(
  Effect.promise(async () => {
    const connection = new Connection(inject("amqpUrl"))
    connection.on("error", () => {})
    await connection.onConnect(10_000)
    return connection
  }),
  (connection) => Effect.promise(() => connection.close())
)

const natsConnection = Effect.acquireRelease(
  Effect.promise(() => connect({ servers: inject("natsUrl"), timeout: 5_000 })),
  (nc) => Effect.promise(() => nc.close())
)

layer(Database, { excludeTestServices: true, timeout: "2 minutes" })("the order consumers on real brokers", (it) => {
  it.scoped.each<Point>(["after-charge", "before-ack"])(
    "RabbitMQ: a consumer killed at %s, duplicates, two consumers: one order and one charge per message id",
    (point) =>
      Effect.gen(function*() {
        const s = scenario()
        const connection = yield* amqpConnection
        const queue = `orders-test-${s.prefix.slice(4, 12)}`
        yield* Effect.addFinalizer(() => Effect.promise(() => connection.queueDelete({ queue })).pipe(Effect.ignore))
        yield* Effect.promise(() => connection.queueDeclare({ ...RabbitMq.queueOptions(queue).queueOptions, queue }))

        yield* RabbitMq.publish(connection, queue, [s.killed])
        yield* killedAt(point, ["rabbitmq", inject("amqpUrl"), queue], s)

        const settled = yield* Ref.make<ReadonlyArray<Settled>>([])
        yield* Effect.scoped(Effect.gen(function*() {
          // two consumers, each on a connection of its own, on the same queue
          for (const _ of [1, 2]) yield* RabbitMq.consume(yield* amqpConnection, queue, tallied(settled))
          yield* RabbitMq.publish(connection, queue, s.batch)
          // the killed child's message, delivered again, and the batch
          yield* acknowledged(settled, 1 + s.batch.length)
        }))
        // the consumers are closed: anything they held unacknowledged would be back in the queue
        const { messageCount } = yield* Effect.promise(() => connection.queueDeclare({ queue, passive: true }))
        assert.strictEqual(messageCount, 0)
        yield* exactlyOnce(s, point, yield* Ref.get(settled))
      }),
    150_000
  )

  it.scoped.each<Point>(["after-charge", "before-ack"])(
    "JetStream: a consumer killed at %s, duplicates past the window, two consumers: one order and one charge per message id",
    (point) =>
      Effect.gen(function*() {
        const s = scenario()
        const nc = yield* natsConnection
        const jsm = yield* Effect.promise(() => jetstreamManager(nc))
        const js = jetstream(nc)
        const suffix = s.prefix.slice(4, 12)
        // the deployed consumer's settings, with a shorter wait before the killed child's message comes
        // back (still longer than the operation's timeout, and the consumer says `working()` meanwhile)
        const topology: JetStream.Topology = {
          stream: `ORDERS_TEST_${suffix}`,
          subject: `orders-test.${suffix}`,
          durable: "place-order",
          ackWait: "6 seconds",
          duplicateWindow: "500 millis"
        }
        yield* Effect.acquireRelease(
          JetStream.declare(jsm, topology),
          () => Effect.promise(() => jsm.streams.delete(topology.stream)).pipe(Effect.ignore)
        )

        assert.strictEqual(yield* JetStream.publish(js, topology.subject, [s.killed]), 1)
        yield* killedAt(point, ["jetstream", inject("natsUrl"), JSON.stringify(topology)], s)

        const settled = yield* Ref.make<ReadonlyArray<Settled>>([])
        yield* Effect.scoped(Effect.gen(function*() {
          for (const _ of [1, 2]) {
            yield* JetStream.consume(jetstream(yield* natsConnection), topology, tallied(settled))
          }
          // JetStream drops the duplicates inside its window, and stores them again after it
          assert.strictEqual(yield* JetStream.publish(js, topology.subject, s.batch), s.orders.length)
          yield* Effect.sleep("700 millis")
          assert.strictEqual(yield* JetStream.publish(js, topology.subject, s.twice), s.twice.length)
          // the killed child's message, delivered again, the batch and the late duplicates
          yield* acknowledged(settled, 1 + s.orders.length + s.twice.length)
        }))
        const info = yield* Effect.promise(() => jsm.consumers.info(topology.stream, topology.durable))
        assert.strictEqual(info.num_ack_pending, 0)
        assert.strictEqual(info.num_pending, 0)
        assert.strictEqual(info.ack_floor.stream_seq, 1 + s.orders.length + s.twice.length)
        yield* exactlyOnce(s, point, yield* Ref.get(settled))
      }),
    150_000
  )
})
