/**
 * One runtime per warm instance of a serverless function (a Lambda execution environment, a
 * Netlify function instance, an isolate): the layer (a store's connections, the handler's
 * services) is built once and reused by the next requests; a build that fails answers
 * `LayerUnavailable` and is tried again on the next request. Every adapter of this repository runs
 * on it.
 *
 * The build runs in a fiber of its own: a request that stops waiting for it (its time ran out)
 * leaves it running for the next one, so a cold start longer than one request's time is paid once.
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
 * The runtime of a warm instance (a serverless function, an isolate): built from the layer on first
 * use, then reused. A build that fails is disposed and forgotten, so the next request builds again
 * (a store that was unreachable at a cold start does not disable the instance for good).
 * Interrupting `runtime` stops the wait, not the build.
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
    // a failed build is forgotten (unless a newer one replaced it already) and its resources released
    const forget = (managed: ManagedRuntime.ManagedRuntime<R, E>) =>
      Effect.flatten(SynchronizedRef.modify(cell, (current) =>
        Option.isSome(current) && current.value === managed
          ? [managed.disposeEffect, Option.none()]
          : [Effect.void, current]))
    return {
      runtime: Effect.flatMap(current, (managed) =>
        // `runtimeEffect` awaits a build running in a fiber of its own: an interrupted wait leaves it
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
