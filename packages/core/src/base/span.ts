import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as Tracer from "effect/Tracer"

const noTime = BigInt(0)

/**
 * `self` inside a span, as `Effect.withSpan` runs it, in fewer steps: the context is set and put
 * back in one uninterruptible region, where `withParentSpan` scopes it per call. No stack trace.
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
