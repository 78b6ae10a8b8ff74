/**
 * Spans: one per run, with its outcome as an attribute, when a tracer is installed; none when the
 * default tracer is in place (nobody sees its spans) or tracing is disabled.
 */
import { Idempotency, IdempotencyStore, Tracing } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import type * as MetricState from "effect/MetricState"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as Tracer from "effect/Tracer"

const Order = Schema.Struct({ sku: Schema.String })
const Placed = Schema.Struct({ orderId: Schema.String })

/** The spans started through an installed tracer that wraps the current one. */
const recording = Effect.map(Effect.tracer, (base) => {
  const spans: Array<Tracer.Span> = []
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind, options) => {
      const span = base.span(name, parent, context, links, startTime, kind, options)
      spans.push(span)
      return span
    },
    context: (f, fiber) => base.context(f, fiber)
  })
  return { tracer, spans }
})

/** An operation whose downstream reports the span it runs under, and waits on `gate` when given. */
const operation = (seen: Array<string>, gate?: Deferred.Deferred<void>) =>
  Idempotency.make({
    name: "place-order",
    payload: Order,
    success: Placed,
    execute: (order) =>
      Effect.gen(function*() {
        const span = yield* Effect.option(Effect.currentSpan)
        seen.push(Option.match(span, { onNone: () => "none", onSome: (s) => s.name }))
        if (gate !== undefined) yield* Deferred.await(gate)
        return { orderId: `order-${order.sku}` }
      })
  })

const outcomes = (spans: ReadonlyArray<Tracer.Span>) =>
  spans.filter((span) => span.name === "place-order").map((span) => span.attributes.get("idempotency.outcome"))

describe("Tracing", () => {
  it.effect("with a tracer installed, each run is one span named after the operation, its outcome an attribute", () =>
    Effect.gen(function*() {
      const { spans, tracer } = yield* recording
      const seen: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const op = operation(seen, gate)
      const traced = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.withTracer(effect, tracer)

      assert.isTrue(yield* traced(Tracing.isEnabled))
      const first = yield* Effect.fork(traced(op.run({ key: "k-1", payload: { sku: "A" } })))
      yield* Effect.yieldNow()
      const conflict = yield* Effect.flip(traced(op.run({ key: "k-1", payload: { sku: "A" } })))
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(first)
      const replay = yield* Idempotency.result(traced(op.run({ key: "k-1", payload: { sku: "A" } })))
      const reused = yield* Effect.flip(traced(op.run({ key: "k-1", payload: { sku: "B" } })))

      assert.strictEqual(conflict._tag, "IdempotencyConflict")
      assert.isTrue(replay.replayed)
      assert.strictEqual(reused._tag, "KeyReused")
      assert.deepStrictEqual(seen, ["place-order"])
      assert.deepStrictEqual(outcomes(spans), ["executed", "conflict", "replayed", "key_reused"])
      // the key is not shown: the first 16 hexadecimal digits of its SHA-256 are
      const digest = new Uint8Array(
        yield* Effect.promise(() => globalThis.crypto.subtle.digest("SHA-256", new TextEncoder().encode("k-1")))
      )
      const hash = [...digest].map((byte) => byte.toString(16).padStart(2, "0")).join("").slice(0, 16)
      for (const span of spans) {
        assert.strictEqual(span.status._tag, "Ended")
        assert.strictEqual(span.attributes.get("idempotency.operation"), "place-order")
        assert.strictEqual(span.attributes.get("idempotency.key_hash"), hash)
        assert.notInclude(JSON.stringify([...span.attributes.values()]), "k-1")
      }
    }).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))))

  it.effect("a failure of the downstream is the outcome of its run's span", () =>
    Effect.gen(function*() {
      const { spans, tracer } = yield* recording
      const op = Idempotency.make({
        name: "place-order",
        payload: Order,
        success: Placed,
        execute: () => Effect.die("boom")
      })
      yield* Effect.exit(op.run({ key: "k-2", payload: { sku: "A" } }).pipe(Effect.withTracer(tracer)))
      assert.deepStrictEqual(outcomes(spans), ["defect"])
      assert.strictEqual(spans[0]!.status._tag, "Ended")
    }).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))))

  it.effect("every run counts once in idempotency.attempts and idempotency.attempt.duration, by operation and outcome", () =>
    Effect.gen(function*() {
      const name = `metered-${globalThis.crypto.randomUUID()}`
      const op = Idempotency.make({
        name,
        payload: Order,
        success: Placed,
        timeout: "1 second",
        execute: (order) => order.sku === "slow" ? Effect.never : Effect.succeed({ orderId: `order-${order.sku}` })
      })
      yield* op.run({ key: "k-1", payload: { sku: "A" } })
      yield* op.run({ key: "k-1", payload: { sku: "A" } })
      yield* Effect.flip(op.run({ key: "k-1", payload: { sku: "B" } }))
      yield* Effect.flip(op.run({ key: "not a key because of spaces", payload: { sku: "A" } }))
      const slow = yield* Effect.fork(Effect.flip(op.run({ key: "k-2", payload: { sku: "slow" } })))
      yield* TestClock.adjust("2 seconds")
      yield* Fiber.join(slow)
      const counts = new Map<string, number>()
      const durations = new Map<string, number>()
      for (const pair of yield* Metric.snapshot) {
        const labels = new Map(pair.metricKey.tags.map((tag) => [tag.key, tag.value]))
        if (labels.get("idempotency.operation") !== name) continue
        const outcome = labels.get("idempotency.outcome")!
        if (pair.metricKey.name === "idempotency.attempts") {
          counts.set(outcome, (pair.metricState as MetricState.MetricState.Counter<number>).count)
        }
        if (pair.metricKey.name === "idempotency.attempt.duration") {
          durations.set(outcome, (pair.metricState as MetricState.MetricState.Histogram).sum)
        }
      }
      assert.deepStrictEqual(
        Object.fromEntries(counts),
        { executed: 1, replayed: 1, key_reused: 1, invalid_key: 1, timeout: 1 }
      )
      // in seconds: the timed-out run took its timeout (less the lease margin's share, at most 1 s)
      assert.strictEqual(durations.get("executed"), 0)
      assert.isAbove(durations.get("timeout")!, 0.5)
      assert.isAtMost(durations.get("timeout")!, 1)
    }).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))))

  it.effect("without a tracer installed, or with tracing disabled, a run starts no span", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const op = operation(seen)
      assert.isFalse(yield* Tracing.isEnabled)
      // the default tracer: the downstream runs under the caller's span, not one of the run's
      yield* op.run({ key: "k-3", payload: { sku: "A" } }).pipe(Effect.withSpan("caller"))
      const { spans, tracer } = yield* recording
      yield* op.run({ key: "k-4", payload: { sku: "A" } }).pipe(
        Effect.withTracerEnabled(false),
        Effect.withTracer(tracer)
      )
      assert.deepStrictEqual(seen, ["caller", "none"])
      assert.deepStrictEqual(spans, [])
    }).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))))

  it.effect("Tracing.withSpan starts its span only when a tracer is installed", () =>
    Effect.gen(function*() {
      const { spans, tracer } = yield* recording
      const inner = Effect.map(Effect.option(Effect.currentSpan), Option.map((span) => span.name))
      const untraced = yield* Tracing.withSpan(inner, "store.get")
      const traced = yield* inner.pipe(Tracing.withSpan("store.get"), Effect.withTracer(tracer))
      assert.isTrue(Option.isNone(untraced))
      assert.deepStrictEqual(traced, Option.some("store.get"))
      assert.deepStrictEqual(spans.map((span) => span.name), ["store.get"])
    }))

  it.effect("Tracing.withSpan without a stack trace: the parent of the spans inside, ended with its exit, the caller's span current again after", () =>
    Effect.gen(function*() {
      const { spans, tracer } = yield* recording
      const options = { attributes: { "db.system": "test" }, captureStackTrace: false } as const
      const currentName = Effect.map(Effect.option(Effect.currentSpan), Option.map((span) => span.name))
      const child = Effect.withSpan(Effect.void, "child")

      const inside = yield* Effect.zipLeft(currentName, child).pipe(
        Tracing.withSpan("store.get", options),
        Effect.zip(currentName),
        Effect.withSpan("caller"),
        Effect.withTracer(tracer)
      )
      assert.deepStrictEqual(inside, [Option.some("store.get"), Option.some("caller")])
      const byName = (name: string) => spans.find((span) => span.name === name)!
      assert.strictEqual(Option.getOrThrow(byName("child").parent).spanId, byName("store.get").spanId)
      assert.strictEqual(Option.getOrThrow(byName("store.get").parent).spanId, byName("caller").spanId)
      assert.strictEqual(byName("store.get").attributes.get("db.system"), "test")

      // a failure and an interruption end the span with their exit, and the caller's context is back
      const failed = yield* Effect.fail("nope").pipe(
        Tracing.withSpan("store.fails", options),
        Effect.flip,
        Effect.zip(currentName),
        Effect.withTracer(tracer)
      )
      assert.deepStrictEqual(failed, ["nope", Option.none()])
      const fails = byName("store.fails").status
      assert.isTrue(fails._tag === "Ended" && Exit.isFailure(fails.exit))

      const fiber = yield* Effect.fork(
        Effect.never.pipe(Tracing.withSpan("store.hangs", options), Effect.withTracer(tracer))
      )
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(fiber)
      const hangs = byName("store.hangs").status
      assert.isTrue(hangs._tag === "Ended" && Exit.isInterrupted(hangs.exit))
      for (const span of spans) assert.strictEqual(span.status._tag, "Ended")
    }))
})
