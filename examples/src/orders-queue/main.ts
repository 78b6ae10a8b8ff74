/**
 * `npm run orders-queue`: the order consumer on RabbitMQ and on NATS JetStream, each with two
 * consumers on one queue, fed a batch of orders in which some messages are published twice; prints
 * what the consumers did and what the tables hold. Orders and records go to an embedded PostgreSQL
 * (PGlite), or to the database of `DATABASE_URL`.
 *
 *   AMQP_URL=amqp://guest:guest@127.0.0.1:5672 NATS_URL=nats://127.0.0.1:4222 npm run orders-queue
 *
 * Exits with 1 if an order is not placed and charged exactly once, with 2 if it could not run.
 */
import { PgIdempotencyMigration } from "@effect-idempotency/sql-pg"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as PgClient from "@effect/sql-pg/PgClient"
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import { randomUUID } from "node:crypto"
import { Connection } from "rabbitmq-client"
import { pglite } from "../Launch.js"
import * as JetStream from "./JetStream.js"
import * as Orders from "./Orders.js"
import * as RabbitMq from "./RabbitMq.js"

const env = (name: string, fallback: string) =>
  process.env[name] === undefined || process.env[name] === "" ? fallback : process.env[name]
const AMQP_URL = env("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672")
const NATS_URL = env("NATS_URL", "nats://127.0.0.1:4222")
const DATABASE_URL = process.env.DATABASE_URL === "" ? undefined : process.env.DATABASE_URL

const ORDERS = 20
const run = randomUUID().slice(0, 6)

/** `ORDERS` orders; every fourth message is published twice, as a producer that retried its publish. */
const batch = (prefix: string) =>
  Array.from({ length: ORDERS }, (_, i) => {
    const orderId = `${prefix}${String(i + 1).padStart(2, "0")}`
    const message = { messageId: `msg-${orderId}`, order: { orderId, sku: "BOOK-42", quantity: 1, amountCents: 1999 } }
    return i % 4 === 3 ? [message, message] : [message]
  }).flat()

/** What the consumers answered: placed (the handler ran and committed), replayed (the record answered), retried, rejected. */
interface Tally {
  readonly placed: number
  readonly replayed: number
  readonly retried: number
  readonly rejected: number
}

/** The order consumer, its settlements counted in `tally`. */
const tallied = (tally: Ref.Ref<Tally>): typeof Orders.consumer => ({
  ...Orders.consumer,
  handle: (delivery, payload) =>
    Effect.tap(Orders.consumer.handle(delivery, payload), (settlement) =>
      Ref.update(tally, (t) => {
        switch (settlement._tag) {
          case "Ack":
            return settlement.replayed ? { ...t, replayed: t.replayed + 1 } : { ...t, placed: t.placed + 1 }
          case "Retry":
            return { ...t, retried: t.retried + 1 }
          case "Reject":
            return { ...t, rejected: t.rejected + 1 }
        }
      }))
})

/** Waits (at most a minute) until `deliveries` messages have been acknowledged. */
const acknowledged = (tally: Ref.Ref<Tally>, deliveries: number) =>
  Ref.get(tally).pipe(
    Effect.repeat({ until: (t) => t.placed + t.replayed >= deliveries, schedule: Schedule.spaced("50 millis") }),
    Effect.timeoutFail({
      duration: "1 minute",
      onTimeout: () => new Error("the consumers did not finish in a minute")
    }),
    Effect.zipRight(Ref.get(tally))
  )

/** Prints what the tables hold for `prefix`; false unless each order has one row and one charge. */
const report = (prefix: string, tally: Tally) =>
  Effect.gen(function*() {
    const counts = yield* Orders.counts(prefix)
    const once = counts.length === ORDERS && counts.every((c) => c.orders === 1 && c.charges === 1)
    const sum = (key: "orders" | "charges") => counts.reduce((n, c) => n + c[key], 0)
    yield* Effect.log(
      `  the consumers: ${tally.placed} placed, ${tally.replayed} answered from the record, ` +
        `${tally.retried} delivered again, ${tally.rejected} rejected`
    )
    yield* Effect.log(
      `  shop_orders rows ${sum("orders")}, payments_charges rows ${sum("charges")}, for ${counts.length} orders: ` +
        (once ? "one order and one charge each ✓" : "NOT one each ✗")
    )
    return once
  })

const rabbitMq = Effect.gen(function*() {
  const connection = yield* Effect.acquireRelease(
    Effect.tryPromise(async () => {
      const connection = new Connection({ url: AMQP_URL, retryLow: 100, retryHigh: 500 })
      connection.on("error", () => {})
      await connection.onConnect(5_000)
      return connection
    }),
    (connection) => Effect.promise(() => connection.close())
  ).pipe(Effect.mapError((cause) => new Error(`no RabbitMQ answers at ${AMQP_URL}`, { cause })))
  const queue = `orders-example-${run}`
  yield* Effect.addFinalizer(() => Effect.promise(() => connection.queueDelete({ queue })).pipe(Effect.ignore))
  const tally = yield* Ref.make<Tally>({ placed: 0, replayed: 0, retried: 0, rejected: 0 })
  // two consumers on one queue: the duplicates of a message may run on both at once
  yield* RabbitMq.consume(connection, queue, tallied(tally))
  yield* RabbitMq.consume(connection, queue, tallied(tally))
  const messages = batch(`ord-${run}-rmq-`)
  yield* Effect.log(`RabbitMQ: queue ${queue} (quorum), 2 consumers`)
  yield* Effect.log(
    `  published ${messages.length} messages: ${ORDERS} orders, ${messages.length - ORDERS} of them twice`
  )
  yield* RabbitMq.publish(connection, queue, messages)
  return yield* report(`ord-${run}-rmq-`, yield* acknowledged(tally, messages.length))
})

const jetStream = Effect.gen(function*() {
  const nc = yield* Effect.acquireRelease(
    Effect.tryPromise({
      try: () => connect({ servers: NATS_URL, timeout: 5_000 }),
      catch: (cause) => new Error(`no NATS server answers at ${NATS_URL}`, { cause })
    }),
    (nc) => Effect.promise(() => nc.drain())
  )
  const jsm = yield* Effect.promise(() => jetstreamManager(nc))
  const js = jetstream(nc)
  // a duplicate window of a second, so that a publish retried later is stored again: the consumer's part
  const topology = {
    stream: `ORDERS_EXAMPLE_${run}`,
    subject: `orders-example.${run}`,
    durable: "place-order",
    ackWait: JetStream.defaults.ackWait,
    duplicateWindow: "1 second"
  } as const
  yield* Effect.acquireRelease(
    JetStream.declare(jsm, topology),
    () => Effect.promise(() => jsm.streams.delete(topology.stream)).pipe(Effect.ignore)
  )
  const tally = yield* Ref.make<Tally>({ placed: 0, replayed: 0, retried: 0, rejected: 0 })
  yield* JetStream.consume(js, topology, tallied(tally))
  yield* JetStream.consume(js, topology, tallied(tally))
  const messages = batch(`ord-${run}-js-`)
  const twice = messages.filter((m, i) => messages[i - 1] === m)
  yield* Effect.log(`NATS JetStream: stream ${topology.stream}, 2 consumers on the durable ${topology.durable}`)
  const stored = yield* JetStream.publish(js, topology.subject, messages)
  yield* Effect.log(
    `  published ${messages.length} messages: ${ORDERS} orders, ${twice.length} of them twice; ` +
      `JetStream stored ${stored} (the others fell in its duplicate window)`
  )
  yield* Effect.sleep("1500 millis")
  const again = yield* JetStream.publish(js, topology.subject, twice)
  yield* Effect.log(`  published those ${twice.length} again after the window: JetStream stored ${again}`)
  return yield* report(`ord-${run}-js-`, yield* acknowledged(tally, stored + again))
})

const program = Effect.gen(function*() {
  const database = DATABASE_URL ?? (yield* pglite).url
  yield* Effect.log(`PostgreSQL: ${DATABASE_URL === undefined ? "embedded PGlite" : "the database of DATABASE_URL"}`)
  // the payments service on the database of the orders and the records
  const Database = Layer.provideMerge(
    Orders.PaymentsLive,
    PgClient.layer({ url: Redacted.make(database), maxConnections: 10 })
  )
  const ok = yield* Effect.gen(function*() {
    yield* PgIdempotencyMigration.migration()
    yield* Orders.createTables
    const rabbit = yield* Effect.scoped(rabbitMq)
    const nats = yield* Effect.scoped(jetStream)
    return rabbit && nats
  }).pipe(Effect.provide(Database))
  if (!ok) process.exitCode = 1
}).pipe(
  Effect.scoped,
  Effect.catchAllCause((cause) => {
    const error = Cause.squash(cause)
    return Effect.zipRight(
      Effect.logError(`the example could not run: ${error instanceof Error ? error.message : String(error)}`),
      Effect.sync(() => process.exitCode = 2)
    )
  })
)

NodeRuntime.runMain(program, { disableErrorReporting: true })
