/**
 * One runtime per warm instance of a serverless function, under every adapter of this repository.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import type * as Runtime from "effect/Runtime"
import * as SynchronizedRef from "effect/SynchronizedRef"
import { LayerUnavailable } from "./HttpIdempotencyError.js"

/**
 * Built on first use and reused; a failed build is released and tried again by the next request.
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
    const current = SynchronizedRef.modifyEffect(cell, (current) =>
      Option.isSome(current)
        ? Effect.succeed([current.value, current] as const)
        : Effect.sync(() => {
          const managed = ManagedRuntime.make(layer)
          return [managed, Option.some(managed)] as const
        }))
    // unless a newer build replaced it already
    const forget = (managed: ManagedRuntime.ManagedRuntime<R, E>) =>
      Effect.flatten(SynchronizedRef.modify(cell, (current) =>
        Option.isSome(current) && current.value === managed
          ? [managed.disposeEffect, Option.none()]
          : [Effect.void, current]))
    return {
      runtime: Effect.flatMap(current, (managed) =>
        // the build runs in a fiber of its own: an interrupted wait leaves it
        Effect.catchAllCause(managed.runtimeEffect, (cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause as Cause.Cause<never>)
            : Effect.zipRight(forget(managed), Effect.fail(new LayerUnavailable({ cause: Cause.squash(cause) }))))),
      dispose: SynchronizedRef.updateEffect(
        cell,
        (current) =>
          Option.isSome(current) ? Effect.as(current.value.disposeEffect, Option.none()) : Effect.succeed(current)
      )
    }
  })
