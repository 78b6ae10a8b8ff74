/**
 * What an OpenTelemetry exporter receives from a run, through `@effect/opentelemetry`: the span named
 * after the operation with its `idempotency.*` attributes (the key's hash, never the key), and the
 * metrics `idempotency.attempts` and `idempotency.attempt.duration` by operation and outcome, with
 * the units and buckets the README gives.
 */
import { Idempotency, IdempotencyKey, IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import { type Histogram, MetricReader } from "@opentelemetry/sdk-metrics"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Telemetry from "../src/telemetry/Telemetry.js"

/** A reader that collects when asked: what a periodic exporter would send. */
class CollectingReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve()
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve()
  }
}

describe("OpenTelemetry", () => {
  it.live("an exporter receives the run's span and the idempotency metrics, with the key hashed", () => {
    const spans = new InMemorySpanExporter()
    const reader = new CollectingReader()
    const telemetry = Telemetry.layer({
      serviceName: "orders",
      spanProcessor: new SimpleSpanProcessor(spans),
      metricReader: reader
    })
    const operation = Idempotency.make({
      name: "create-order",
      payload: Schema.Struct({ sku: Schema.String }),
      success: Schema.Struct({ orderId: Schema.String }),
      execute: (order) => Effect.succeed({ orderId: `order-${order.sku}` })
    })
    return Effect.gen(function*() {
      yield* operation.run({ key: "order-key-1001", payload: { sku: "A-1" } })
      yield* operation.run({ key: "order-key-1001", payload: { sku: "A-1" } })

      const exported = spans.getFinishedSpans().filter((span) => span.name === "create-order")
      assert.deepStrictEqual(exported.map((span) => span.attributes["idempotency.outcome"]), ["executed", "replayed"])
      for (const span of exported) {
        assert.strictEqual(span.attributes["idempotency.operation"], "create-order")
        assert.strictEqual(span.attributes["idempotency.key_hash"], IdempotencyKey.hash("order-key-1001"))
        assert.notInclude(JSON.stringify(span.attributes), "order-key-1001")
      }

      const { resourceMetrics } = yield* Effect.promise(() => reader.collect())
      const metrics = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics)
      const points = (name: string) =>
        metrics.filter((metric) => metric.descriptor.name === name).flatMap((metric) =>
          metric.dataPoints.filter((point) => point.attributes["idempotency.operation"] === "create-order")
        )
      const attempts = points("idempotency.attempts")
      assert.deepStrictEqual(
        Object.fromEntries(attempts.map((point) => [point.attributes["idempotency.outcome"], point.value])),
        { executed: 1, replayed: 1 }
      )
      const durations = points("idempotency.attempt.duration")
      assert.deepStrictEqual(durations.map((point) => point.attributes["idempotency.outcome"]).sort(), [
        "executed",
        "replayed"
      ])

      // the units and buckets the README's table gives
      const descriptor = (name: string) => metrics.find((metric) => metric.descriptor.name === name)!.descriptor
      assert.strictEqual(descriptor("idempotency.attempts").unit, "{attempt}")
      assert.strictEqual(descriptor("idempotency.attempt.duration").unit, "s")
      for (const point of durations) {
        const { boundaries } = (point.value as Histogram).buckets
        assert.deepStrictEqual(boundaries, Array.from({ length: 17 }, (_, i) => 0.001 * 2 ** i))
        assert.strictEqual(boundaries.at(-1), 65.536)
      }
    }).pipe(Effect.provide(Layer.merge(IdempotencyStore.layerMemoryWith({ warn: false }), telemetry)))
  })
})
