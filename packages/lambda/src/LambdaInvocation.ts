/**
 * The current invocation of a Lambda function: its context, when it was entered, and its deadline.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

/**
 * The part of Lambda's context the adapter reads; `Context` of `@types/aws-lambda` is assignable to it.
 *
 * @since 0.1.0
 * @category models
 */
export interface LambdaContext {
  readonly awsRequestId: string
  readonly functionName?: string | undefined
  /** The invocation's tenant, under Lambda's tenant isolation mode: the default scope (README.md#tenants). */
  readonly tenantId?: string | undefined
  readonly getRemainingTimeInMillis: () => number
}

/**
 * The context of a durable function's handler (`DurableContext` of `@aws/durable-execution-sdk-js`),
 * as far as the adapter reads it: a handler wrapped by `withDurableExecution` gets it in place of
 * Lambda's context.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableContext {
  readonly lambdaContext: LambdaContext
}

/**
 * Whether a handler's second argument is a durable function's context.
 *
 * @since 0.1.0
 * @category guards
 */
export const isDurableContext = (context: LambdaContext | DurableContext): context is DurableContext =>
  typeof (context as Partial<DurableContext>).lambdaContext === "object" &&
  (context as Partial<DurableContext>).lambdaContext !== null

/**
 * Whether a durable function's invocation replays its execution: the SDK's `durableExecutionMode` is
 * `ReplayMode` when the handler is entered (README.md#durable-functions).
 *
 * @since 0.1.0
 * @category guards
 */
export const isReplay = (context: LambdaContext | DurableContext): boolean =>
  isDurableContext(context) &&
  (context as { readonly durableExecutionMode?: unknown }).durableExecutionMode === "ReplayMode"

/**
 * The current invocation.
 *
 * @since 0.1.0
 * @category tags
 */
export class Invocation extends Context.Tag("@effect-idempotency/lambda/Invocation")<
  Invocation,
  {
    readonly context: LambdaContext
    /** Epoch milliseconds, `Clock`, as `deadline`. */
    readonly startedAt: number
    readonly deadline: number
    /** A durable function's context, for its steps; `undefined` for any other function. */
    readonly durable?: DurableContext | undefined
    /** A durable function's invocation that replays its execution (README.md#durable-functions). */
    readonly replay?: boolean | undefined
  }
>() {}

/**
 * The largest default margin: a few store round trips and the retries of a completion.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_DEFAULT_MARGIN: Duration.Duration = Duration.seconds(1)

/**
 * The default margin of an invocation with `remaining` time: a quarter of it, at most 1 second.
 *
 * @since 0.1.0
 * @category utils
 */
export const defaultMargin = (remaining: Duration.DurationInput): Duration.Duration =>
  Duration.min(MAX_DEFAULT_MARGIN, Duration.unsafeDivide(Duration.decode(remaining), 4))

/**
 * The part of a margin kept for the answer after the last store call: a quarter, at most 100 ms.
 *
 * @since 0.1.0
 * @category utils
 */
export const answerAllowance = (margin: Duration.DurationInput): Duration.Duration =>
  Duration.min(Duration.millis(100), Duration.unsafeDivide(Duration.decode(margin), 4))

/**
 * The time left before Lambda stops the current invocation.
 *
 * @since 0.1.0
 * @category accessors
 */
export const remaining: Effect.Effect<Duration.Duration, never, Invocation> = Effect.zipWith(
  Invocation,
  Clock.currentTimeMillis,
  (self, now) => Duration.millis(Math.max(0, self.deadline - now))
)
