import { IdempotencyError, IdempotencyStore } from "@effect-idempotency/core"
import { IdempotentConsumer } from "@effect-idempotency/queue"
import { FaultyStore } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"

const Order = Schema.Struct({ orderId: Schema.String })

class Declined extends Schema.TaggedError<Declined>()("Declined", {}) {}

const first = { key: "msg-1", deliveryCount: 1 }
const order = { orderId: "o-1" }

/** A consumer whose handler counts its runs and does what `behave` says. */
const consumerOf = (
  behave: Effect.Effect<void, Declined>,
  options?: Partial<
    IdempotentConsumer.Options<
      typeof Order.Type,
      typeof Order.Encoded,
      string,
      string,
      Declined,
      never,
      Declined,
      typeof Declined.Encoded
    >
  >
) =>
  Effect.map(Ref.make(0), (runs) => ({
    runs,
    consumer: IdempotentConsumer.make({
      name: "consume",
      payload: Order,
      success: Schema.String,
      execute: ({ orderId }) => Effect.as(Effect.zipRight(Ref.update(runs, (n) => n + 1), behave), orderId),
      retryDelay: "250 millis",
      maxDeliveries: 3,
      ...options
    })
  }))

describe("IdempotentConsumer", () => {
  it.effect("a success is acknowledged, and a redelivery replays it: acknowledged, the handler run once", () =>
    Effect.gen(function*() {
      const { consumer, runs } = yield* consumerOf(Effect.void)
      const settled = yield* consumer.handle(first, order)
      const again = yield* consumer.handle({ key: "msg-1", deliveryCount: 2 }, order)
      assert.deepStrictEqual(settled, IdempotentConsumer.Settlement.Ack({ replayed: false }))
      assert.deepStrictEqual(again, IdempotentConsumer.Settlement.Ack({ replayed: true }))
      assert.strictEqual(yield* Ref.get(runs), 1)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("the same id with another body is rejected (KeyReused) without running", () =>
    Effect.gen(function*() {
      const { consumer, runs } = yield* consumerOf(Effect.void)
      yield* consumer.handle(first, order)
      const reused = yield* consumer.handle(first, { orderId: "o-2" })
      assert.deepStrictEqual(reused, IdempotentConsumer.Settlement.Reject({ reason: "KeyReused" }))
      assert.strictEqual(yield* Ref.get(runs), 1)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("a message without a key is rejected and runs nothing", () =>
    Effect.gen(function*() {
      const { consumer, runs } = yield* consumerOf(Effect.void)
      const settled = yield* consumer.handle({ key: undefined, deliveryCount: 1 }, order)
      assert.strictEqual(settled._tag, "Reject")
      assert.strictEqual(yield* Ref.get(runs), 0)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("keyOf overrides the delivery's key", () =>
    Effect.gen(function*() {
      const { consumer, runs } = yield* consumerOf(Effect.void, { keyOf: (payload) => payload.orderId })
      yield* consumer.handle({ key: "msg-1", deliveryCount: 1 }, order)
      const other = yield* consumer.handle({ key: "msg-2", deliveryCount: 1 }, order)
      assert.deepStrictEqual(other, IdempotentConsumer.Settlement.Ack({ replayed: true }))
      assert.strictEqual(yield* Ref.get(runs), 1)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("a released domain failure is retried, then rejected at maxDeliveries; each delivery runs", () =>
    Effect.gen(function*() {
      const { consumer, runs } = yield* consumerOf(Effect.fail(new Declined()))
      const settlements = yield* Effect.forEach(
        [1, 2, 3],
        (n) => consumer.handle({ key: "msg-1", deliveryCount: n }, order)
      )
      assert.deepStrictEqual(settlements.map((s) => s._tag), ["Retry", "Retry", "Reject"])
      assert.deepStrictEqual(
        settlements[0],
        IdempotentConsumer.Settlement.Retry({ delay: Duration.millis(250), reason: "Declined" })
      )
      assert.strictEqual(yield* Ref.get(runs), 3)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("a recorded domain failure replays on the next delivery without running; onError may acknowledge it", () =>
    Effect.gen(function*() {
      const { consumer, runs } = yield* consumerOf(Effect.fail(new Declined()), {
        failure: Declined,
        onError: () => "ack"
      })
      const settled = yield* consumer.handle(first, order)
      const again = yield* consumer.handle({ key: "msg-1", deliveryCount: 2 }, order)
      assert.strictEqual(settled._tag, "Ack")
      assert.strictEqual(again._tag, "Ack")
      assert.strictEqual(yield* Ref.get(runs), 1)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("onError reject rejects at once", () =>
    Effect.gen(function*() {
      const { consumer } = yield* consumerOf(Effect.fail(new Declined()), { onError: () => "reject" })
      assert.deepStrictEqual(
        yield* consumer.handle(first, order),
        IdempotentConsumer.Settlement.Reject({ reason: "Declined" })
      )
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("a handler that dies is retried, and rejected when it dies on the last delivery", () =>
    Effect.gen(function*() {
      const { consumer } = yield* consumerOf(Effect.die("boom"))
      // two keys: what a redelivery of the same key meets is the record as the defect policy left it
      assert.deepStrictEqual(
        yield* consumer.handle({ key: "msg-1", deliveryCount: 1 }, order),
        IdempotentConsumer.Settlement.Retry({ delay: Duration.millis(250), reason: "the handler died" })
      )
      assert.deepStrictEqual(
        yield* consumer.handle({ key: "msg-2", deliveryCount: 3 }, order),
        IdempotentConsumer.Settlement.Reject({ reason: "the handler died, after 3 deliveries" })
      )
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("the store unreachable: retried, the handler never runs", () =>
    Effect.gen(function*() {
      const { consumer, runs } = yield* consumerOf(Effect.void)
      const settled = yield* consumer.handle(first, order).pipe(
        FaultyStore.withFaults([FaultyStore.unavailable("reserve")])
      )
      assert.deepStrictEqual(
        settled,
        IdempotentConsumer.Settlement.Retry({ delay: Duration.millis(250), reason: "StoreUnavailable" })
      )
      assert.strictEqual(yield* Ref.get(runs), 0)
    }).pipe(Effect.provide(FaultyStore.layer(IdempotencyStore.layerMemory))))

  it.live("a key in progress on another delivery is retried whatever the delivery count, then replays", () =>
    Effect.gen(function*() {
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const { consumer, runs } = yield* consumerOf(
        Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(release))
      )
      const holder = yield* Effect.fork(consumer.handle(first, order))
      yield* Deferred.await(entered)
      const held = yield* consumer.handle({ key: "msg-1", deliveryCount: 99 }, order)
      assert.strictEqual(held._tag, "Retry")
      assert.strictEqual(held._tag === "Retry" ? held.reason : "", "IdempotencyConflict")
      yield* Deferred.succeed(release, undefined)
      assert.deepStrictEqual(yield* Fiber.join(holder), IdempotentConsumer.Settlement.Ack({ replayed: false }))
      assert.deepStrictEqual(
        yield* consumer.handle({ key: "msg-1", deliveryCount: 100 }, order),
        IdempotentConsumer.Settlement.Ack({ replayed: true })
      )
      assert.strictEqual(yield* Ref.get(runs), 1)
    }).pipe(Effect.provide(IdempotencyStore.layerMemory)))

  it("settings no delivery can honour throw InvalidSettings when the consumer is built, naming the setting", () => {
    const operation = { name: "consume", runDetailed: () => Effect.die("never run") }
    const cases: ReadonlyArray<readonly [IdempotentConsumer.SettleOptions<unknown, never>, string]> = [
      [{ maxDeliveries: Number.NaN }, "maxDeliveries"],
      [{ maxDeliveries: 0 }, "maxDeliveries"],
      [{ maxDeliveries: 2.5 }, "maxDeliveries"],
      [{ retryDelay: Number.NaN }, "retryDelay"],
      [{ retryDelay: -1 }, "retryDelay"],
      [{ retryDelay: Duration.infinity }, "retryDelay"],
      [{ retryDelay: "soon" as Duration.DurationInput }, "retryDelay"]
    ]
    for (const [options, setting] of cases) {
      try {
        IdempotentConsumer.fromOperation(operation, options)
        assert.fail(`${JSON.stringify(options)} was accepted`)
      } catch (error) {
        assert.instanceOf(error, IdempotencyError.InvalidSettings)
        assert.strictEqual(error.setting, setting)
        assert.notInclude(error.message, "soon")
      }
    }
    // the bounds themselves are accepted
    IdempotentConsumer.fromOperation(operation, { maxDeliveries: 1, retryDelay: 0 })
  })

  it.effect("apply settles through the transport and swallows a failure to settle", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make<ReadonlyArray<string>>([])
      const note = (what: string) => Ref.update(calls, (all) => [...all, what])
      const settle = {
        ack: Effect.zipRight(note("ack"), Effect.fail("connection closed")),
        retry: (delay: Duration.Duration) => note(`retry ${Duration.toMillis(delay)}`),
        reject: note("reject")
      }
      yield* IdempotentConsumer.apply(IdempotentConsumer.Settlement.Ack({ replayed: false }), settle)
      yield* IdempotentConsumer.apply(
        IdempotentConsumer.Settlement.Retry({ delay: Duration.millis(5), reason: "x" }),
        settle
      )
      yield* IdempotentConsumer.apply(IdempotentConsumer.Settlement.Reject({ reason: "x" }), settle)
      assert.deepStrictEqual(yield* Ref.get(calls), ["ack", "retry 5", "reject"])
    }))
})
