/**
 * The JetStream adapter on a real `nats-server -js`: one effect per `Nats-Msg-Id` when JetStream
 * delivers a message twice (a duplicate published after the duplicate window), a redelivery after a
 * lost acknowledgement replayed, a message another consumer holds nak'd until its outcome is
 * recorded, a poison body (or no id) terminated without running the handler, a failing handler
 * retried then terminated after `maxDeliveries`, two consumers on one durable with 200 messages and with 10,000, the bound on handlers at once, the
 * scope's closing (the message in flight settled, or nak'd after `drainTimeout`), and `workingEvery`.
 */
import { Idempotency, IdempotencyStore } from "@effect-idempotency/core"
import * as JetStreamConsumer from "@effect-idempotency/queue/JetStreamConsumer"
import { assert, layer } from "@effect/vitest"
import { jetstream } from "@nats-io/jetstream"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import type { TestStream } from "./utils/nats.js"
import {
  connection,
  DUPLICATE_WINDOW,
  eventually,
  NatsServer,
  NatsServerLive,
  pullConsumer,
  tapped,
  testStream
} from "./utils/nats.js"

const Order = Schema.Struct({ orderId: Schema.String, cents: Schema.Int })

const Charged = Schema.Struct({ chargeId: Schema.String })

class Unavailable extends Data.TaggedError("Unavailable")<{}> {}

/** The operation of every test: charges an order once, counting each charge in `effects`. */
const charge = (
  effects: Array<string>,
  execute: (order: typeof Order.Type) => Effect.Effect<void, Unavailable> = () => Effect.void
) =>
  ({
    name: "charge-order",
    payload: Order,
    success: Charged,
    execute: (order: typeof Order.Type) =>
      Effect.map(
        Effect.zipRight(execute(order), Effect.sync(() => effects.push(order.orderId))),
        () => ({ chargeId: `ch_${order.orderId}` })
      ),
    timeout: "1 second",
    retryDelay: "100 millis"
  }) as const

const order = (orderId: string) => ({ orderId, cents: 1999 })

/** Each id's number of effects, for ids that have any. */
const counts = (effects: ReadonlyArray<string>) => {
  const byId = new Map<string, number>()
  for (const id of effects) byId.set(id, (byId.get(id) ?? 0) + 1)
  return byId
}

/** A logger layer that keeps each line's level and first message in `logged`. */
const capturedLogs = () => {
  const logged: Array<{ readonly level: string; readonly message: string }> = []
  const logger = Logger.make(({ logLevel, message }) => {
    logged.push({ level: logLevel.label, message: Array.isArray(message) ? String(message[0]) : String(message) })
  })
  return { logged, logger: Logger.replace(Logger.defaultLogger, logger) }
}

/** Every message of the stream acknowledged (or terminated), nothing pending or in flight. */
const settledAll = (stream: TestStream, messages: number, timeout?: Duration.DurationInput) =>
  eventually(
    `${messages} messages settled`,
    Effect.map(
      stream.info,
      (info) => info.num_ack_pending === 0 && info.num_pending === 0 && info.ack_floor.stream_seq === messages
    ),
    timeout
  ).pipe(Effect.tapError(() => Effect.flatMap(stream.info, (info) => Effect.logError("the consumer at the end", info))))

layer(NatsServerLive, { excludeTestServices: true, timeout: "1 minute" })("JetStreamConsumer on nats-server", (it) => {
  it.scoped("a duplicate JetStream delivers again (published after the duplicate window) runs once, and every message is acked", () =>
    Effect.gen(function*() {
      const stream = yield* testStream("once")
      const effects: Array<string> = []
      const { source, tap } = tapped(yield* pullConsumer(stream))
      yield* JetStreamConsumer.consume(source, { ...charge(effects), concurrency: 4 })
      const ids = Array.from({ length: 20 }, (_, i) => `m-${i}`)
      for (const id of ids) assert.isTrue(yield* stream.publish(id, order(id)))
      yield* eventually("the first deliveries charged", Effect.sync(() => effects.length === ids.length))
      yield* Effect.sleep(Duration.sum(DUPLICATE_WINDOW, "200 millis"))
      // stored again, not deduplicated by JetStream: the consumer gets each id twice
      for (const id of ids) assert.isTrue(yield* stream.publish(id, order(id)))
      yield* settledAll(stream, 2 * ids.length)
      assert.deepStrictEqual(Object.fromEntries(counts(effects)), Object.fromEntries(ids.map((id) => [id, 1])))
      assert.strictEqual(tap.deliveries.length, 2 * ids.length)
      assert.strictEqual(tap.settled.filter((s) => s.how === "ack").length, 2 * ids.length)
    }).pipe(Effect.scoped, Effect.provide(IdempotencyStore.layerMemory)))

  it.scoped("a redelivery after a lost acknowledgement replays the recorded outcome and is acked", () =>
    Effect.gen(function*() {
      const stream = yield* testStream("lost-ack")
      const effects: Array<string> = []
      const { source, tap } = tapped(yield* pullConsumer(stream), {
        loseAck: (_, deliveryCount) => deliveryCount === 1
      })
      yield* JetStreamConsumer.consume(source, charge(effects))
      yield* stream.publish("m-1", order("m-1"))
      yield* settledAll(stream, 1)
      assert.deepStrictEqual(effects, ["m-1"])
      assert.deepStrictEqual(tap.settled.map((s) => [s.how, s.deliveryCount]), [["lost-ack", 1], ["ack", 2]])
      assert.strictEqual((yield* stream.info).num_redelivered, 0)
    }).pipe(Effect.scoped, Effect.provide(IdempotencyStore.layerMemory)))

  it.scoped("a message whose key another consumer holds is nak'd with the lease's delay, comes back and replays", () =>
    Effect.gen(function*() {
      const stream = yield* testStream("held")
      const effects: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const held = yield* Deferred.make<void>()
      // another consumer's attempt holds m-1 until the gate opens
      const other = Idempotency.make(
        charge(effects, () => Effect.zipRight(Deferred.succeed(held, undefined), Deferred.await(gate)))
      )
      const holder = yield* Effect.fork(other.run({ key: "m-1", payload: order("m-1") }))
      yield* Deferred.await(held)
      const { source, tap } = tapped(yield* pullConsumer(stream))
      yield* JetStreamConsumer.consume(source, charge(effects))
      yield* stream.publish("m-1", order("m-1"))
      yield* eventually("the held message nak'd", Effect.sync(() => tap.settled.some((s) => s.how === "nak")))
      const nak = tap.settled[0]!
      assert.strictEqual(nak.how, "nak")
      assert.isAbove(nak.delay ?? 0, 10)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      yield* settledAll(stream, 1)
      assert.deepStrictEqual(effects, ["m-1"])
      assert.deepStrictEqual(tap.settled.map((s) => s.how), ["nak", "ack"])
      assert.deepStrictEqual(tap.deliveries.map((d) => d.deliveryCount), [1, 2])
    }).pipe(Effect.scoped, Effect.provide(IdempotencyStore.layerMemory)))

  it.scoped("a body that does not parse or decode, or a message without Nats-Msg-Id, is terminated, and the handler never runs", () =>
    Effect.gen(function*() {
      const stream = yield* testStream("poison")
      const effects: Array<string> = []
      const { source, tap } = tapped(yield* pullConsumer(stream))
      yield* JetStreamConsumer.consume(source, charge(effects))
      yield* stream.publish("not-json", new TextEncoder().encode("{ not json"))
      yield* stream.publish("not-an-order", { orderId: 42 })
      // a good body without a Nats-Msg-Id: no key to record it under
      yield* stream.publish(undefined, order("m-0"))
      yield* stream.publish("m-1", order("m-1"))
      yield* settledAll(stream, 4)
      assert.deepStrictEqual(effects, ["m-1"])
      assert.deepStrictEqual(tap.settled.map((s) => [s.key, s.how]), [
        ["not-json", "term"],
        ["not-an-order", "term"],
        [undefined, "term"],
        ["m-1", "ack"]
      ])
      assert.strictEqual(tap.deliveries.length, 4)
    }).pipe(Effect.scoped, Effect.provide(IdempotencyStore.layerMemory)))

  it.scoped("a handler that keeps failing is delivered again, then terminated after maxDeliveries", () =>
    Effect.gen(function*() {
      const stream = yield* testStream("failing")
      const effects: Array<string> = []
      let attempts = 0
      const { source, tap } = tapped(yield* pullConsumer(stream))
      yield* JetStreamConsumer.consume(source, {
        ...charge(effects, () => Effect.zipRight(Effect.sync(() => attempts++), Effect.fail(new Unavailable()))),
        maxDeliveries: 3
      })
      yield* stream.publish("m-1", order("m-1"))
      yield* settledAll(stream, 1)
      // nothing comes back after the termination
      yield* Effect.sleep("500 millis")
      assert.strictEqual(attempts, 3)
      assert.deepStrictEqual(effects, [])
      assert.deepStrictEqual(tap.settled.map((s) => [s.how, s.deliveryCount]), [["nak", 1], ["nak", 2], ["term", 3]])
      assert.strictEqual(tap.settled[0]!.delay, 100)
    }).pipe(Effect.scoped, Effect.provide(IdempotencyStore.layerMemory)))

  it.scoped("two consumers on one durable: 200 messages and 50 duplicates, one effect per id", () =>
    Effect.gen(function*() {
      const stream = yield* testStream("two")
      const effects: Array<string> = []
      const slow = charge(effects, () => Effect.sleep("10 millis"))
      const first = tapped(yield* pullConsumer(stream, true))
      const second = tapped(yield* pullConsumer(stream, true))
      yield* JetStreamConsumer.consume(first.source, { ...slow, concurrency: 4 })
      yield* JetStreamConsumer.consume(second.source, { ...slow, concurrency: 4 })
      const ids = Array.from({ length: 200 }, (_, i) => `m-${i}`)
      for (const id of ids) yield* stream.publish(id, order(id))
      yield* Effect.sleep(Duration.sum(DUPLICATE_WINDOW, "50 millis"))
      // while the first deliveries are still being handled
      for (const id of ids.slice(0, 50)) assert.isTrue(yield* stream.publish(id, order(id)))
      yield* settledAll(stream, 250)
      assert.strictEqual(effects.length, ids.length)
      assert.deepStrictEqual([...counts(effects).values()].filter((n) => n !== 1), [])
      assert.strictEqual(first.tap.deliveries.length + second.tap.deliveries.length >= 250, true)
      assert.isAbove(first.tap.deliveries.length, 0)
      assert.isAbove(second.tap.deliveries.length, 0)
    }).pipe(Effect.scoped, Effect.provide(IdempotencyStore.layerMemory)))

  it.scoped(
    "10,000 messages, one in ten published again past the duplicate window, two consumers: one effect per id, all acked",
    () =>
      Effect.gen(function*() {
        const stream = yield* testStream("ten-thousand")
        const effects: Array<string> = []
        const first = tapped(yield* pullConsumer(stream, true))
        const second = tapped(yield* pullConsumer(stream, true))
        yield* JetStreamConsumer.consume(first.source, { ...charge(effects), concurrency: 16 })
        yield* JetStreamConsumer.consume(second.source, { ...charge(effects), concurrency: 16 })
        const ids = Array.from({ length: 10_000 }, (_, i) => `t-${i}`)
        yield* Effect.forEach(ids, (id) => stream.publish(id, order(id)), { concurrency: 64, discard: true })
        yield* Effect.sleep(Duration.sum(DUPLICATE_WINDOW, "50 millis"))
        const again = ids.filter((_, i) => i % 10 === 0)
        const stored = yield* Effect.forEach(again, (id) => stream.publish(id, order(id)), { concurrency: 64 })
        assert.isTrue(stored.every(Boolean))
        yield* settledAll(stream, ids.length + again.length, "150 seconds")
        assert.strictEqual(effects.length, ids.length)
        assert.deepStrictEqual([...counts(effects).values()].filter((n) => n !== 1), [])
        assert.isAbove(first.tap.deliveries.length, 0)
        assert.isAbove(second.tap.deliveries.length, 0)
      }).pipe(Effect.scoped, Effect.provide(IdempotencyStore.layerMemory)),
    { timeout: 180_000 }
  )

  it.scoped("concurrency bounds the handlers running at once, and that many do run at once", () =>
    Effect.gen(function*() {
      const stream = yield* testStream("bounded")
      const effects: Array<string> = []
      let running = 0
      let most = 0
      const { source } = tapped(yield* pullConsumer(stream))
      yield* JetStreamConsumer.consume(source, {
        ...charge(effects, () =>
          Effect.acquireUseRelease(
            Effect.sync(() => {
              running++
              most = Math.max(most, running)
            }),
            () => Effect.sleep("50 millis"),
            () => Effect.sync(() => void running--)
          )),
        concurrency: 3
      })
      for (let i = 0; i < 12; i++) yield* stream.publish(`b-${i}`, order(`b-${i}`))
      yield* settledAll(stream, 12)
      assert.strictEqual(effects.length, 12)
      assert.strictEqual(most, 3)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.scoped("closing the scope lets the message in flight be settled, then pulls no more", () =>
    Effect.gen(function*() {
      const stream = yield* testStream("close")
      const effects: Array<string> = []
      let interrupted = false
      const started = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const { source, tap } = tapped(yield* pullConsumer(stream))
      const scope = yield* Scope.make()
      yield* JetStreamConsumer.consume(
        source,
        charge(effects, () =>
          Effect.zipRight(
            Deferred.succeed(started, undefined),
            Deferred.await(gate).pipe(Effect.onInterrupt(() => Effect.sync(() => void (interrupted = true))))
          ))
      ).pipe(Scope.extend(scope))
      yield* stream.publish("m-1", order("m-1"))
      yield* Deferred.await(started).pipe(Effect.timeout("10 seconds"))
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* Effect.sleep("100 millis")
      // still waiting for the handler
      assert.isUndefined(closing.unsafePoll() ?? undefined)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(closing).pipe(Effect.timeout("5 seconds"))
      assert.isFalse(interrupted)
      assert.deepStrictEqual(effects, ["m-1"])
      assert.deepStrictEqual(tap.settled.map((s) => [s.key, s.how]), [["m-1", "ack"]])
      yield* stream.publish("m-2", order("m-2"))
      yield* Effect.sleep("500 millis")
      assert.deepStrictEqual(effects, ["m-1"])
      assert.strictEqual(tap.deliveries.length, 1)
      const info = yield* stream.info
      assert.strictEqual(info.num_pending, 1)
      assert.strictEqual(info.num_ack_pending, 0)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.scoped("a handler still running after drainTimeout is interrupted and nak'd; the next consumer runs it once", () =>
    Effect.gen(function*() {
      const stream = yield* testStream("interrupted")
      const effects: Array<string> = []
      const started = yield* Deferred.make<void>()
      const first = tapped(yield* pullConsumer(stream))
      const scope = yield* Scope.make()
      yield* JetStreamConsumer.consume(first.source, {
        ...charge(effects, () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)),
        timeout: "3 seconds",
        drainTimeout: "200 millis"
      }).pipe(Scope.extend(scope))
      yield* stream.publish("m-1", order("m-1"))
      yield* Deferred.await(started).pipe(Effect.timeout("10 seconds"))
      const closedAt = yield* Clock.currentTimeMillis
      // a scope closes uninterruptibly: its fiber is awaited with the bound
      yield* Effect.fork(Scope.close(scope, Exit.void)).pipe(Effect.flatMap(Fiber.join), Effect.timeout("5 seconds"))
      // at drainTimeout, long before the operation's timeout (3 seconds) would have ended the handler
      assert.isBelow((yield* Clock.currentTimeMillis) - closedAt, 1_500)
      assert.deepStrictEqual(first.tap.settled.map((s) => [s.how, s.deliveryCount]), [["nak", 1]])
      const second = tapped(yield* pullConsumer(stream))
      yield* JetStreamConsumer.consume(second.source, charge(effects))
      yield* settledAll(stream, 1)
      assert.deepStrictEqual(effects, ["m-1"])
      // the interrupted attempt's lease is kept (its timeout policy): nak'd until it ends, then taken over
      const settled = second.tap.settled.map((s) => s.how)
      assert.strictEqual(settled.at(-1), "ack")
      assert.deepStrictEqual(settled.slice(0, -1).filter((how) => how !== "nak"), [])
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))
  it.scoped("a handler longer than ack_wait is not delivered again while it runs when workingEvery is set", () =>
    Effect.gen(function*() {
      const stream = yield* testStream("working", { ack_wait: 1_000_000_000 })
      const effects: Array<string> = []
      const { source, tap } = tapped(yield* pullConsumer(stream))
      yield* JetStreamConsumer.consume(source, {
        ...charge(effects, () => Effect.sleep("2500 millis")),
        timeout: "5 seconds",
        workingEvery: "300 millis",
        // a pull stays open while the message runs, as it would on another consumer of the durable
        concurrency: 2
      })
      yield* stream.publish("m-1", order("m-1"))
      yield* settledAll(stream, 1)
      assert.deepStrictEqual(effects, ["m-1"])
      assert.deepStrictEqual(tap.deliveries.map((d) => d.deliveryCount), [1])
      assert.deepStrictEqual(tap.settled.map((s) => s.how), ["ack"])
      assert.strictEqual((yield* stream.info).num_redelivered, 0)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))
  it.scoped("a pull that ends with its connection, before the scope closes, is logged at ERROR", () =>
    Effect.gen(function*() {
      const stream = yield* testStream("closed")
      const nc = yield* connection((yield* NatsServer).url)
      const source = yield* Effect.promise(() => jetstream(nc).consumers.get(stream.stream, stream.durable))
      const { logged, logger } = capturedLogs()
      const effects: Array<string> = []
      yield* JetStreamConsumer.consume(source, charge(effects)).pipe(Effect.provide(logger))
      yield* stream.publish("m-1", order("m-1"))
      yield* settledAll(stream, 1)
      yield* Effect.promise(() => nc.close())
      yield* eventually(
        "the end of the pull logged",
        Effect.sync(() =>
          logged.some((l) => l.level === "ERROR" && l.message === "idempotent consumer: the consumer stopped")
        )
      )
      assert.deepStrictEqual(effects, ["m-1"])
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))
  it.scoped("a consumer deleted on the server, which the pull outlives, is logged at ERROR", () =>
    Effect.gen(function*() {
      const stream = yield* testStream("deleted")
      const source = yield* pullConsumer(stream)
      const { logged, logger } = capturedLogs()
      const effects: Array<string> = []
      yield* JetStreamConsumer.consume(source, charge(effects)).pipe(Effect.provide(logger))
      yield* stream.publish("m-1", order("m-1"))
      yield* settledAll(stream, 1)
      yield* Effect.promise(() => stream.jsm.consumers.delete(stream.stream, stream.durable))
      yield* eventually(
        "the deletion logged",
        Effect.sync(() =>
          logged.some((l) =>
            l.level === "ERROR" &&
            l.message === "idempotent consumer: JetStream reports consumer_deleted; restart the consumer"
          )
        )
      )
      assert.deepStrictEqual(effects, ["m-1"])
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))
  it.scoped("with workingEvery, a message that waited in the pull's buffer says working() when its handler starts", () =>
    Effect.gen(function*() {
      // ack_wait 2 s, handlers of 1.5 s, two at a time: the pull holds the next messages meanwhile, and
      // a first working() only 1.8 s after a handler's start would come past its message's ack_wait
      const stream = yield* testStream("buffered", { ack_wait: 2_000_000_000 })
      const effects: Array<string> = []
      const { source, tap } = tapped(yield* pullConsumer(stream))
      yield* JetStreamConsumer.consume(source, {
        ...charge(effects, () => Effect.sleep("1500 millis")),
        timeout: "5 seconds",
        workingEvery: "1800 millis",
        concurrency: 2
      })
      const ids = ["m-1", "m-2", "m-3", "m-4", "m-5", "m-6"]
      for (const id of ids) yield* stream.publish(id, order(id))
      yield* settledAll(stream, ids.length)
      assert.deepStrictEqual([...effects].sort(), ids)
      assert.deepStrictEqual(tap.deliveries.filter((d) => d.deliveryCount > 1), [])
      assert.strictEqual((yield* stream.info).num_redelivered, 0)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))
})
