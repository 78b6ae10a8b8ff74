import { WarmRuntime } from "@effect-idempotency/http"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import type { LambdaContext } from "../LambdaInvocation.js"
import { Invocation } from "../LambdaInvocation.js"

/**
 * A Lambda handler, with a way to release its execution environment's runtime (tests, local runs).
 *
 * @internal
 */
export interface Handler<Event, Result> {
  (event: Event, context: LambdaContext): Promise<Result>
  readonly dispose: () => Promise<void>
}

/**
 * What Lambda gets when an invocation fails: the error itself when it is an `Error` (tagged errors
 * are), so its name and message show in Lambda's error report; a defect is not shown.
 */
const thrown = (cause: Cause.Cause<unknown>): unknown => {
  if (Cause.isInterruptedOnly(cause)) return new Error("The invocation was interrupted")
  const failure = Cause.failureOption(cause)
  if (failure._tag === "None") return new Error("The function failed")
  const error = failure.value
  return error instanceof Error
    ? error
    : new Error(`The function failed: ${String((error as { _tag?: unknown })?._tag)}`)
}

/**
 * Runs invocations at the edge: one runtime per execution environment, the invocation in the
 * context, the result or the error handed to Lambda.
 *
 * @internal
 */
export const serve = <R, LE, Event, Result>(
  name: string,
  layer: Layer.Layer<R, LE>,
  handle: (event: Event) => Effect.Effect<Result, unknown, R | Invocation>
): Handler<Event, Result> => {
  const instance = Effect.runSync(WarmRuntime.make(layer))
  const invoke = (event: Event, context: LambdaContext) =>
    Effect.gen(function*() {
      // the remaining time is read with the clock, before the runtime is built: a cold start counts
      // against the invocation's time once, not twice
      const startedAt = yield* Clock.currentTimeMillis
      const deadline = startedAt + Math.max(0, context.getRemainingTimeInMillis())
      const runtime = yield* instance.runtime
      return yield* handle(event).pipe(
        Effect.provideService(Invocation, { context, startedAt, deadline }),
        Effect.withSpan("LambdaHandler.invoke", {
          attributes: { "faas.name": context.functionName ?? name },
          captureStackTrace: false
        }),
        Effect.provide(runtime)
      )
    }).pipe(
      Effect.tapErrorCause((cause) =>
        Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logWarning("the invocation failed", cause)
      ),
      Effect.annotateLogs({ function: name, requestId: context.awsRequestId })
    )
  const handler = (event: Event, context: LambdaContext): Promise<Result> =>
    Effect.runPromiseExit(invoke(event, context)).then((exit) =>
      Exit.isSuccess(exit) ? exit.value : Promise.reject(thrown(exit.cause))
    )
  return Object.assign(handler, { dispose: () => Effect.runPromise(instance.dispose) })
}
