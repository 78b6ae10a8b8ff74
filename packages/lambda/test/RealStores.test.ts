/**
 * The Lambda adapter on real stores (the PostgreSQL server, DynamoDB Local), played by the
 * Lambda-like runner: the seed scenario as an asynchronous invocation (a timeout after the
 * downstream wrote, Lambda's retries: exactly one write), and an SQS queue whose batches meet
 * failing records, duplicate deliveries and records slower than the invocation (every record's
 * side effect happens once).
 */
import { IdempotencyContext } from "@effect-idempotency/core"
import { LambdaEvent, LambdaSqs } from "@effect-idempotency/lambda"
import { assert, describe, it } from "@effect/vitest"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { drain, initialized, invokeAsync, makeDownstream } from "./utils/LambdaRunner.js"
import { realStores } from "./utils/stores.js"

const TIMEOUT = "1500 millis"
const Order = Schema.Struct({ orderId: Schema.String, sku: Schema.String })
const Created = Schema.Struct({ orderId: Schema.String, downstreamReplayed: Schema.Boolean })

/** The order operation of both functions below: events keyed by their order id. */
const createOrder = {
  name: "create-order",
  event: Order,
  key: (event: typeof Order.Type) => event.orderId,
  success: Created
} as const

class Unavailable extends Data.TaggedError("Unavailable")<{}> {}

for (const store of realStores) {
  describe(`Lambda on ${store.name}`, () => {
    it.live("the seed scenario as an asynchronous invocation: the write happens once", () =>
      Effect.gen(function*() {
        // the downstream writes at once and answers 4 s later: after the function's 1.5 s timeout
        const order = { orderId: "o-1", sku: "BOOK-42" }
        const unprotected = makeDownstream({ deduplicate: false })
        const plain = (event: typeof order) =>
          Effect.runPromise(unprotected.write(event.orderId, undefined, "4 seconds"))
        const without = yield* invokeAsync(plain, order, {
          timeout: TIMEOUT,
          retryDelays: ["100 millis", "100 millis"]
        })
        assert.deepStrictEqual(without.map((a) => a._tag), ["TimedOut", "TimedOut", "TimedOut"])
        assert.strictEqual(unprotected.total(), 3)

        // markUnknown: every attempt answers before the cut-off; the write happened once
        const atMostOnce = makeDownstream({ deduplicate: false })
        const first = yield* initialized(LambdaEvent.idempotent({
          ...createOrder,
          layer: store.layer(),
          onTimeout: "markUnknown",
          handler: (event) =>
            Effect.map(
              atMostOnce.write(event.orderId, undefined, "4 seconds"),
              (r) => ({ orderId: r.request, downstreamReplayed: r.replayed })
            )
        }))
        const marked = yield* invokeAsync(first, order, { timeout: TIMEOUT, retryDelays: ["100 millis", "100 millis"] })
        assert.deepStrictEqual(marked.map((a) => a._tag), ["Error", "Error", "Error"])
        assert.strictEqual(atMostOnce.total(), 1)
        yield* Effect.promise(() => first.dispose())

        // keepLease, with the key forwarded to a downstream that deduplicates: the retry after the
        // lease takes over, sends the same key, and records the downstream's original answer
        const deduplicating = makeDownstream({ deduplicate: true })
        let calls = 0
        const forwarded = yield* initialized(LambdaEvent.idempotent({
          ...createOrder,
          layer: store.layer(),
          handler: (event) =>
            Effect.gen(function*() {
              const key = yield* IdempotencyContext.stepKey("orders")
              const r = yield* deduplicating.write(event.orderId, key, calls++ === 0 ? "4 seconds" : 0)
              return { orderId: r.request, downstreamReplayed: r.replayed }
            })
        }))
        const kept = yield* invokeAsync(forwarded, order, { timeout: TIMEOUT, retryDelays: ["2 seconds", "2 seconds"] })
        assert.strictEqual(kept[0]!._tag, "Error")
        const last = kept[kept.length - 1]!
        assert.deepStrictEqual(last._tag === "Ok" && last.value, { orderId: "o-1", downstreamReplayed: true })
        assert.strictEqual(deduplicating.total(), 1)
        yield* Effect.promise(() => forwarded.dispose())
      }), 120_000)

    it.live(
      "an SQS queue with failing, duplicate and slow records: each record's side effect happens once",
      () =>
        Effect.gen(function*() {
          const downstream = makeDownstream({ deduplicate: true })
          const messages = Array.from({ length: 12 }, (_, i) => ({
            id: `m-${i}`,
            body: JSON.stringify({ orderId: `o-${i}`, sku: `SKU-${i}` })
          }))
          const failOnce = new Set(["o-3"])
          const slowOnce = new Set(["o-7", "o-8"])
          const handler = yield* initialized(LambdaSqs.batch({
            name: "orders-queue",
            layer: store.layer(),
            body: Schema.parseJson(Order),
            key: (order) => order.orderId,
            concurrency: 4,
            handler: (order) =>
              Effect.gen(function*() {
                if (failOnce.delete(order.orderId)) return yield* new Unavailable()
                const key = yield* IdempotencyContext.stepKey("orders")
                // a slow record: written at once, answered after the invocation's end
                const slow = slowOnce.delete(order.orderId)
                return yield* downstream.write(order.orderId, key, slow ? "4 seconds" : 0)
              })
          }))
          const run = yield* drain(handler, messages, {
            batchSize: 5,
            timeout: TIMEOUT,
            visibilityTimeout: "2 seconds",
            duplicates: new Set(["m-5", "m-10"]),
            maxBatches: 40
          })
          assert.deepStrictEqual(run.left, [])
          assert.strictEqual(run.timedOut, 0, "every invocation answered before its timeout")
          assert.isAbove(run.batches, 3, "failed and slow records came back")
          for (const message of messages) {
            const orderId = JSON.parse(message.body).orderId as string
            assert.strictEqual(downstream.writes.get(orderId), 1, orderId)
          }
          yield* Effect.promise(() => handler.dispose())
        }),
      120_000
    )
  })
}
