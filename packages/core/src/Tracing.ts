/**
 * Spans only where someone can see them. Effect's default tracer keeps every span in memory and
 * exports none, yet each span costs a few microseconds and wraps every failure raised inside it.
 * The runs of `Idempotency` and the stores of this project start their spans through this module:
 * only when a tracer is installed (`Effect.withTracer`, `Layer.setTracer`, `@effect/opentelemetry`)
 * and tracing is enabled; otherwise the effect runs as it is.
 *
 * ```ts
 * import { Tracing } from "@effect-idempotency/core"
 * import { Effect } from "effect"
 *
 * // a span named "MyStore.get" when a tracer is installed, nothing otherwise
 * const get = (key: string) => lookup(key).pipe(Tracing.withSpan("MyStore.get", { attributes: { key } }))
 * ```
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import { dual } from "effect/Function"
import * as Tracer from "effect/Tracer"
import { inSpan } from "./base/span.js"

/** Effect's own tracer, the one in place when none was installed. */
const defaultTracer: Tracer.Tracer = Context.get(DefaultServices.liveServices, Tracer.Tracer)

/**
 * Whether spans started by `fiber` reach an installed tracer: tracing is enabled and the tracer is
 * not Effect's default one.
 *
 * @since 0.1.0
 * @category predicates
 */
export const unsafeIsEnabled = (fiber: Fiber.RuntimeFiber<unknown, unknown>): boolean =>
  fiber.getFiberRef(FiberRef.currentTracerEnabled) &&
  Context.get(fiber.getFiberRef(DefaultServices.currentServices), Tracer.Tracer) !== defaultTracer

/**
 * Whether the current fiber's spans reach an installed tracer (see `unsafeIsEnabled`).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isEnabled: Effect.Effect<boolean> = Effect.withFiberRuntime((fiber) =>
  Effect.succeed(unsafeIsEnabled(fiber))
)

/**
 * `Effect.withSpan` when a tracer is installed (see `unsafeIsEnabled`); the effect as it is
 * otherwise. With `captureStackTrace: false` the span is the same, started and ended in fewer
 * steps of the runtime (the span is set as the parent in the fiber's context directly, where
 * `Effect.withSpan` scopes the context with an acquire-use-release of its own).
 *
 * @since 0.1.0
 * @category combinators
 */
export const withSpan: {
  (name: string, options?: Tracer.SpanOptions): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, name: string, options?: Tracer.SpanOptions): Effect.Effect<A, E, R>
} = dual(
  (args) => Effect.isEffect(args[0]),
  <A, E, R>(self: Effect.Effect<A, E, R>, name: string, options?: Tracer.SpanOptions): Effect.Effect<A, E, R> =>
    Effect.withFiberRuntime((fiber) =>
      !unsafeIsEnabled(fiber)
        ? self
        : options?.captureStackTrace === false
        ? inSpan(self, name, options)
        : Effect.withSpan(self, name, options)
    )
)
