/**
 * Spans only when a tracer is installed (README.md#tracing).
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

const defaultTracer: Tracer.Tracer = Context.get(DefaultServices.liveServices, Tracer.Tracer)

/**
 * Whether spans started by `fiber` reach an installed tracer.
 *
 * @since 0.1.0
 * @category predicates
 */
export const unsafeIsEnabled = (fiber: Fiber.RuntimeFiber<unknown, unknown>): boolean =>
  fiber.getFiberRef(FiberRef.currentTracerEnabled) &&
  Context.get(fiber.getFiberRef(DefaultServices.currentServices), Tracer.Tracer) !== defaultTracer

/**
 * Whether the current fiber's spans reach an installed tracer.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isEnabled: Effect.Effect<boolean> = Effect.withFiberRuntime((fiber) =>
  Effect.succeed(unsafeIsEnabled(fiber))
)

/**
 * `Effect.withSpan` when a tracer is installed; the effect as it is otherwise. With
 * `captureStackTrace: false`, the same span in fewer steps of the runtime.
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
