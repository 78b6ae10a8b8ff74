import { Idempotency } from "@effect-idempotency/core"
import { WarmRuntime } from "@effect-idempotency/http"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { InsufficientTime } from "../LambdaError.js"
import type { Handler } from "../LambdaEvent.js"
import type { DurableContext, LambdaContext } from "../LambdaInvocation.js"
import { defaultMargin, Invocation, isDurableContext, isReplay } from "../LambdaInvocation.js"

/** The error itself, so its name and message show in Lambda's error report; a defect is not shown. */
const thrown = (cause: Cause.Cause<unknown>): unknown => {
  if (Cause.isInterruptedOnly(cause)) return new Error("The invocation was interrupted")
  const failure = Cause.failureOption(cause)
  if (failure._tag === "None") return new Error("The function failed")
  const error = failure.value
  return error instanceof Error
    ? error
    : new Error(`The function failed: ${String((error as { _tag?: unknown })?._tag)}`)
}

/** @internal */
export const serve = <R, LE, Event, Result>(
  options: {
    readonly name: string
    readonly layer: Layer.Layer<R, LE>
    readonly margin?: Duration.DurationInput | undefined
  },
  handle: (event: Event) => Effect.Effect<Result, unknown, R | Invocation>
): Handler<Event, Result> => {
  const { layer, margin, name } = options
  const instance = Effect.runSync(WarmRuntime.make(layer))
  const invoke = (event: Event, given: LambdaContext | DurableContext) => {
    // a durable function's handler gets the SDK's context, which holds Lambda's
    const durable = isDurableContext(given) ? given : undefined
    const context = durable === undefined ? given as LambdaContext : durable.lambdaContext
    return Effect.gen(function*() {
      // read before the runtime is built: a cold start counts against the invocation's time once
      const startedAt = yield* Clock.currentTimeMillis
      const remaining = Math.max(0, context.getRemainingTimeInMillis())
      const deadline = startedAt + remaining
      // See README.md#per-invocation: a cold start is awaited while the invocation could still record
      const marginMillis = Duration.toMillis(margin === undefined ? defaultMargin(Duration.millis(remaining)) : margin)
      const built = yield* Effect.timeoutOption(
        instance.runtime,
        Duration.millis(Math.max(0, remaining - marginMillis))
      )
      if (Option.isNone(built)) {
        const now = yield* Clock.currentTimeMillis
        return yield* new InsufficientTime({ remainingMillis: Math.max(0, deadline - now), marginMillis })
      }
      const runtime = built.value
      return yield* handle(event).pipe(
        Effect.provideService(Invocation, { context, startedAt, deadline, durable, replay: isReplay(given) }),
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
  }
  const handler = (event: Event, context: LambdaContext | DurableContext): Promise<Result> =>
    Effect.runPromiseExit(invoke(event, context)).then((exit) =>
      Exit.isSuccess(exit) ? exit.value : Promise.reject(thrown(exit.cause))
    )
  return Object.assign(handler, {
    ready: () => Effect.runPromise(Effect.ignore(instance.runtime)),
    dispose: () => Effect.runPromise(instance.dispose)
  })
}

/** Lambda's default time limit. */
const DEFAULT_TIME_LIMIT = Duration.seconds(3)

/** @internal */
export const operation = <P, A, E, R>(
  name: string,
  run: (request: Idempotency.Request<P>) => Effect.Effect<A, E, R | Invocation>
) => ({
  name,
  runDetailed: (request: Idempotency.Request<P>): Effect.Effect<Idempotency.Result<A>, E, Exclude<R, Invocation>> =>
    Effect.flatMap(Clock.currentTimeMillis, (startedAt) => {
      const deadline = request.deadline ??
        startedAt + Duration.toMillis(Duration.decode(request.timeout ?? DEFAULT_TIME_LIMIT))
      const context: LambdaContext = {
        awsRequestId: `operation-${name}`,
        functionName: name,
        getRemainingTimeInMillis: () => Math.max(0, deadline - startedAt)
      }
      return Idempotency.result(run(request)).pipe(
        Effect.provideService(Invocation, { context, startedAt, deadline })
      )
    })
})
