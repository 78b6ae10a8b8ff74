/**
 * A consumer's broker connection cut (through `TcpProxy`) once a message's outcome is recorded: before
 * its acknowledgement goes out, or while the acknowledgement is on the wire (the proxy holds the
 * first bytes that carry one, then cuts). The client connects again and the broker delivers the
 * message again: the recorded outcome answers it, so each message id has one side effect, every
 * message is acknowledged in the end, and the consumer still takes new messages.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotentConsumer } from "@effect-idempotency/queue"
import * as JetStreamConsumer from "@effect-idempotency/queue/JetStreamConsumer"
import * as RabbitMqConsumer from "@effect-idempotency/queue/RabbitMqConsumer"
import { TcpProxy } from "@effect-idempotency/testing"
import { assert, inject, layer } from "@effect/vitest"
import { jetstream } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import { Connection } from "rabbitmq-client"
import { eventually } from "./utils/eventually.js"
import { NatsServer, NatsServerLive, testStream } from "./utils/nats.js"

const Order = Schema.Struct({ orderId: Schema.String, amountCents: Schema.Int })

/** The message whose first acknowledgement the connection loses. */
const CUT_KEY = "order-5"

const MESSAGES = 20

/** Where the connection is cut, from the moment `CUT_KEY`'s outcome is recorded. */
type CutMode = "before the ack goes out" | "while the ack is on the wire"

/** One run of the consumer: the order, the delivery count and how it was settled. */
interface Seen {
  readonly orderId: string
  readonly deliveryCount: number | undefined
  readonly settlement: IdempotentConsumer.Settlement
}

/** What a test watches: the side effects by id, and every settlement. */
const watching = Effect.sync(() => ({ effects: new Map<string, number>(), seen: [] as Array<Seen> }))

/**
 * The consumer of every test (a memory store in this process) that counts each side effect and
 * each settlement, and cuts the connection (through `cut`) once, after `CUT_KEY`'s first outcome.
 */
const charging = (
  watched: Effect.Effect.Success<typeof watching>,
  cut: Effect.Effect<void>
): IdempotentConsumer.Consumer<typeof Order.Type, IdempotencyStore.IdempotencyStore> => {
  const consumer = IdempotentConsumer.make({
    name: "charge-order",
    payload: Order,
    success: Schema.Struct({ chargeId: Schema.String }),
    execute: ({ orderId }) =>
      Effect.sync(() => {
        watched.effects.set(orderId, (watched.effects.get(orderId) ?? 0) + 1)
        return { chargeId: `ch_${orderId}` }
      })
  })
  let cutDone = false
  return {
    ...consumer,
    handle: (delivery, payload) =>
      Effect.tap(consumer.handle(delivery, payload), (settlement) =>
        Effect.suspend(() => {
          // by the order, not the delivery's key: a consumer keyed wrongly is still cut at the same message
          watched.seen.push({ orderId: payload.orderId, deliveryCount: delivery.deliveryCount, settlement })
          if (cutDone || payload.orderId !== CUT_KEY || settlement._tag !== "Ack") return Effect.void
          cutDone = true
          return cut
        }))
  }
}

/**
 * The cut of `mode` through `proxy`: at once, or once the proxy holds the first client bytes for
 * which `isAck` holds (the cut waits in `scope`, so the handler returns and the ack is sent).
 */
const cutting = (proxy: TcpProxy.TcpProxy, mode: CutMode, isAck: (bytes: Uint8Array) => boolean, scope: Scope.Scope) =>
  mode === "before the ack goes out" ? proxy.cut : Effect.zipRight(
    proxy.stall({ when: isAck }),
    Effect.forkIn(
      Effect.zipRight(
        eventually("the acknowledgement held", Effect.map(proxy.held, (held) => held.requests > 0)).pipe(Effect.orDie),
        proxy.cut
      ),
      scope
    )
  )

/** What every test asserts once the messages are settled: one effect per id, `CUT_KEY` delivered again and replayed. */
const assertReplayed = (watched: Effect.Effect.Success<typeof watching>, ids: ReadonlyArray<string>) => {
  assert.deepStrictEqual(Object.fromEntries(watched.effects), Object.fromEntries(ids.map((id) => [id, 1])))
  const cut = watched.seen.filter((seen) => seen.orderId === CUT_KEY)
  assert.isAtLeast(cut.length, 2)
  assert.deepStrictEqual(cut[0]!.settlement, IdempotentConsumer.Settlement.Ack({ replayed: false }))
  assert.deepStrictEqual(cut.at(-1)!.settlement, IdempotentConsumer.Settlement.Ack({ replayed: true }))
  assert.isAbove(cut.at(-1)!.deliveryCount ?? 0, 1)
}

const order = (orderId: string) => ({ orderId, amountCents: 1999 })

const ids = Array.from({ length: MESSAGES }, (_, i) => `order-${i}`)

const MODES: ReadonlyArray<CutMode> = ["before the ack goes out", "while the ack is on the wire"]

// an AMQP method frame (type 1, channel, size) of basic.ack (class 60, method 80)
const isAmqpAck = (bytes: Uint8Array) => {
  for (let i = 0; i + 10 < bytes.length; i++) {
    if (bytes[i] === 1 && bytes[i + 7] === 0 && bytes[i + 8] === 60 && bytes[i + 9] === 0 && bytes[i + 10] === 80) {
      return true
    }
  }
  return false
}

const textDecoder = new TextDecoder()

// a NATS publish of `+ACK` to a JetStream acknowledgement subject
const isNatsAck = (bytes: Uint8Array) => {
  const text = textDecoder.decode(bytes)
  return text.includes("PUB $JS.ACK.") && text.includes("\r\n+ACK\r\n")
}

/** A connection to `url` that connects again after a cut within 100 to 500 ms, closed with the scope. */
const rabbitConnection = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const connection = new Connection({ url, retryLow: 100, retryHigh: 500 })
      connection.on("error", () => {})
      await connection.onConnect(10_000)
      return connection
    }),
    (connection) => Effect.promise(() => connection.close())
  )

layer(NatsServerLive, { excludeTestServices: true, timeout: "2 minutes" })("a broker connection cut mid-ack", (it) => {
  for (const mode of MODES) {
    it.scoped(
      `RabbitMQ, ${mode}: the redelivery replays, one effect per id, all acked, the consumer still running`,
      () =>
        Effect.gen(function*() {
          const url = new URL(inject("amqpUrl"))
          const proxy = yield* TcpProxy.make({ host: url.hostname, port: Number(url.port === "" ? 5672 : url.port) })
          const direct = yield* rabbitConnection(url.href)
          const proxied = new URL(url)
          proxied.hostname = "127.0.0.1"
          proxied.port = String(proxy.port)
          const connection = yield* rabbitConnection(proxied.href)
          const queue = `idem-cut-${randomUUID().slice(0, 8)}`
          yield* Effect.addFinalizer(() => Effect.promise(() => direct.queueDelete({ queue })).pipe(Effect.ignore))
          const watched = yield* watching
          const scope = yield* Effect.scope
          const subscription = yield* RabbitMqConsumer.consume(connection, {
            queue: {
              queue,
              queueOptions: { durable: true, arguments: { "x-queue-type": "quorum" } },
              qos: { prefetchCount: 4 },
              concurrency: 2
            },
            payload: Order,
            consumer: charging(watched, cutting(proxy, mode, isAmqpAck, scope))
          })
          const publish = (id: string) =>
            Effect.acquireUseRelease(
              Effect.sync(() => direct.createPublisher({ confirm: true })),
              (publisher) =>
                Effect.promise(() =>
                  publisher.send(
                    { routingKey: queue, messageId: id, contentType: "application/json", durable: true },
                    order(id)
                  )
                ),
              (publisher) => Effect.promise(() => publisher.close())
            )
          yield* Effect.forEach(ids, publish, { discard: true })
          yield* eventually("every message replayed or charged", Effect.sync(() => watched.effects.size === MESSAGES))
          yield* eventually(
            `${CUT_KEY} replayed`,
            Effect.sync(() => watched.seen.some((seen) => seen.orderId === CUT_KEY && seen.deliveryCount !== 1))
          )
          // still consuming, on the connection it made again
          yield* publish("order-after")
          yield* eventually("the message after the cut charged", Effect.sync(() => watched.effects.has("order-after")))
          assert.strictEqual(yield* proxy.connections, 1)
          // acknowledged: once the consumer is closed, nothing unacknowledged goes back to the queue
          yield* Effect.promise(() => subscription.close())
          const { messageCount } = yield* Effect.promise(() => direct.queueDeclare({ queue, passive: true }))
          assert.strictEqual(messageCount, 0)
          assertReplayed(watched, [...ids, "order-after"])
        }).pipe(Effect.provide(IdempotencyStore.layerMemory)),
      90_000
    )

    it.scoped(
      `JetStream, ${mode}: the redelivery replays, one effect per id, all acked, the consumer still running`,
      () =>
        Effect.gen(function*() {
          const url = new URL((yield* NatsServer).url)
          const proxy = yield* TcpProxy.make({ host: url.hostname, port: Number(url.port === "" ? 4222 : url.port) })
          // the durable delivers again 2 seconds after a delivery that is not acknowledged
          const stream = yield* testStream("cut", { ack_wait: 2_000_000_000 })
          const nc = yield* Effect.acquireRelease(
            Effect.promise(() =>
              connect({
                servers: `127.0.0.1:${proxy.port}`,
                reconnectTimeWait: 100,
                maxReconnectAttempts: -1,
                ignoreClusterUpdates: true
              })
            ),
            (nc) => Effect.promise(() => nc.close())
          )
          const watched = yield* watching
          const scope = yield* Effect.scope
          const source = yield* Effect.promise(() =>
            jetstream(nc, { timeout: 1_000 }).consumers.get(stream.stream, stream.durable)
          )
          yield* JetStreamConsumer.consume(source, {
            payload: Order,
            consumer: charging(watched, cutting(proxy, mode, isNatsAck, scope)),
            concurrency: 2
          })
          for (const id of ids) assert.isTrue(yield* stream.publish(id, order(id)))
          const acked = (messages: number) =>
            eventually(
              `${messages} messages acknowledged`,
              Effect.map(
                stream.info,
                (info) => info.num_ack_pending === 0 && info.num_pending === 0 && info.ack_floor.stream_seq === messages
              )
            )
          yield* acked(MESSAGES)
          // still consuming, on the connection it made again
          yield* stream.publish("order-after", order("order-after"))
          yield* acked(MESSAGES + 1)
          assert.strictEqual(yield* proxy.connections, 1)
          assertReplayed(watched, [...ids, "order-after"])
        }).pipe(Effect.provide(IdempotencyStore.layerMemory)),
      90_000
    )
  }
})
