/**
 * One runtime per warm instance of a serverless function (a Lambda execution environment, a
 * Netlify function instance, an isolate): the layer (a store's connections, the handler's
 * services) is built on the first request and reused by the next ones; a build that fails answers
 * `LayerUnavailable` and is tried again on the next request. Every adapter of this repository runs
 * on it.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import type * as Runtime from "effect/Runtime"
import * as SynchronizedRef from "effect/SynchronizedRef"
import { LayerUnavailable } from "./HttpIdempotencyError.js"

/**
 * The runtime of a warm instance (a serverless function, an isolate): built from the layer on first
 * use, then reused. A build that fails is disposed and forgotten, so the next request builds again
 * (a store that was unreachable at a cold start does not disable the instance for good).
 *
 * @since 0.1.0
 * @category models
 */
export interface WarmRuntime<R> {
  readonly runtime: Effect.Effect<Runtime.Runtime<R>, LayerUnavailable>
  readonly dispose: Effect.Effect<void>
}

/**
 * A warm runtime of a layer (see `WarmRuntime`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <R, E>(layer: Layer.Layer<R, E>): Effect.Effect<WarmRuntime<R>> =>
  Effect.map(SynchronizedRef.make(Option.none<ManagedRuntime.ManagedRuntime<R, E>>()), (cell) => {
    const build = SynchronizedRef.modifyEffect(cell, (current) => {
      if (Option.isSome(current)) {
        return Effect.map(current.value.runtimeEffect, (runtime) => [runtime, current] as const)
      }
      const managed = ManagedRuntime.make(layer)
      return managed.runtimeEffect.pipe(
        Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : managed.disposeEffect),
        Effect.map((runtime) => [runtime, Option.some(managed)] as const)
      )
    })
    return {
      runtime: Effect.flatMap(
        SynchronizedRef.get(cell),
        (current) => Option.isSome(current) ? current.value.runtimeEffect : build
      ).pipe(
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause as Cause.Cause<never>)
            : Effect.fail(new LayerUnavailable({ cause: Cause.squash(cause) }))
        )
      ),
      dispose: SynchronizedRef.updateEffect(
        cell,
        (current) =>
          Option.isSome(current) ? Effect.as(current.value.disposeEffect, Option.none()) : Effect.succeed(current)
      )
    }
  })
