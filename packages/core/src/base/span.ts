import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as Tracer from "effect/Tracer"

const noTime = BigInt(0)

/**
 * `self` inside a span named `name`, as `Effect.withSpan` runs it: the span is the parent of the
 * spans started inside, and it ends with `self`'s exit. In fewer steps: the span is made, set as
 * the parent in the fiber's context, and the context put back when `self` ends, in one
 * uninterruptible region around `self`, where `Effect.withParentSpan` would scope the context with
 * an acquire-use-release of its own on every call. `onEnd` sees the span and the exit before the
 * span ends (to set attributes).
 *
 * The span captures no stack trace: callers pass `captureStackTrace: false` or use
 * `Effect.withSpan`.
 *
 * @internal
 */
export const inSpan = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  name: string,
  options: Tracer.SpanOptions,
  onEnd?: (span: Tracer.Span, exit: Exit.Exit<A, E>) => void
): Effect.Effect<A, E, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(Effect.makeSpan(name, options), (span) =>
      Effect.flatMap(
        FiberRef.getAndUpdate(FiberRef.currentContext, (context) => Context.add(context, Tracer.ParentSpan, span)),
        (context) => {
          const end = (exit: Exit.Exit<A, E>): Effect.Effect<A, E> =>
            Effect.withFiberRuntime((fiber) => {
              if (onEnd !== undefined) onEnd(span, exit)
              const endTime = fiber.getFiberRef(FiberRef.currentTracerTimingEnabled)
                ? Context.get(fiber.getFiberRef(DefaultServices.currentServices), Clock.Clock).unsafeCurrentTimeNanos()
                : noTime
              span.end(endTime, exit)
              return Effect.zipRight(FiberRef.set(FiberRef.currentContext, context), exit)
            })
          return Effect.matchCauseEffect(restore(self), {
            onFailure: (cause) => end(Exit.failCause(cause)),
            onSuccess: (value) => end(Exit.succeed(value))
          })
        }
      ))
  )
