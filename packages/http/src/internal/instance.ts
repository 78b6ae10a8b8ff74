import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import type * as Runtime from "effect/Runtime"
import * as SynchronizedRef from "effect/SynchronizedRef"
import { LayerUnavailable } from "../HttpIdempotencyError.js"

/**
 * The runtime of a warm instance (a serverless function, an isolate): built from the layer on first
 * use, then reused. A build that fails is disposed and forgotten, so the next request builds again
 * (a store that was unreachable at a cold start does not disable the instance for good).
 *
 * @internal
 */
export interface Instance<R> {
  readonly runtime: Effect.Effect<Runtime.Runtime<R>, LayerUnavailable>
  readonly dispose: Effect.Effect<void>
}

/** @internal */
export const make = <R, E>(layer: Layer.Layer<R, E>): Effect.Effect<Instance<R>> =>
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
