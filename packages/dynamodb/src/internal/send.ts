import type { DynamoDBClient } from "@aws-sdk/client-dynamodb"
import { IdempotencyError } from "@effect-idempotency/core"
import type * as Deadlines from "@effect-idempotency/core/StoreDeadlines"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Schedule from "effect/Schedule"
import type { Item } from "./item.js"

/**
 * Data, not an `Error`: met on every replay and conflict, where a stack trace would cost the most.
 *
 * @internal
 */
export class ConditionFailed extends Data.TaggedClass("ConditionFailed")<{
  readonly item: Item | undefined
  /** An earlier attempt of this call may have been applied (its response was lost). */
  readonly afterUncertainAttempt: boolean
}> {}

/** @internal */
export type RequestSignal = NonNullable<NonNullable<Parameters<DynamoDBClient["send"]>[1]>["abortSignal"]>

/** @internal */
export interface Sender {
  readonly client: DynamoDBClient
  readonly plainSignals?: boolean | undefined
  readonly retry: Schedule.Schedule<unknown, unknown>
  readonly requestTimeout: Duration.Duration
  readonly deadlines: Deadlines.Deadlines
}

const THROTTLING = new Set([
  "ProvisionedThroughputExceededException",
  "ThrottlingException",
  "RequestLimitExceeded",
  "Throttling",
  "ThrottledException",
  "TooManyRequestsException"
])

const NETWORK_CODES: ReadonlySet<string> = new Set([...IdempotencyError.networkErrorCodes, "ERR_HTTP2_STREAM_ERROR"])

/** Failures before a request is sent: it cannot have been applied. */
const NOT_SENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "EADDRNOTAVAIL"
])

const TRANSIENT_NAMES = new Set([
  "TimeoutError",
  "RequestTimeout",
  "RequestTimeoutException",
  "NetworkingError",
  "InternalServerError",
  "ServiceUnavailable"
])

const stringProperty = (u: unknown, key: string): string | undefined =>
  Predicate.hasProperty(u, key) && typeof u[key] === "string" ? u[key] : undefined

const httpStatus = (u: unknown): number | undefined => {
  if (!Predicate.hasProperty(u, "$metadata") || !Predicate.hasProperty(u.$metadata, "httpStatusCode")) return undefined
  const status = u.$metadata.httpStatusCode
  return typeof status === "number" ? status : undefined
}

/** @internal */
export const isThrottling = (u: unknown): boolean => {
  const name = stringProperty(u, "name")
  if (name !== undefined && THROTTLING.has(name)) return true
  return Predicate.hasProperty(u, "$retryable") && Predicate.hasProperty(u.$retryable, "throttling") &&
    u.$retryable.throttling === true
}

/** @internal */
export const isUnavailable = (u: unknown): boolean => {
  if (Cause.isTimeoutException(u)) return true
  const code = stringProperty(u, "code")
  if (code !== undefined && NETWORK_CODES.has(code)) return true
  const name = stringProperty(u, "name")
  if (name !== undefined && TRANSIENT_NAMES.has(name)) return true
  const status = httpStatus(u)
  return status !== undefined && status >= 500
}

/** @internal */
export const isItemTooLarge = (u: unknown): boolean =>
  stringProperty(u, "name") === "ValidationException" &&
  /item size/i.test(stringProperty(u, "message") ?? "")

/** @internal */
export const mayHaveBeenApplied = (u: unknown): boolean =>
  isUnavailable(u) && !NOT_SENT_CODES.has(stringProperty(u, "code") ?? "")

/** @internal */
export const isRetryable = (u: unknown): boolean => isThrottling(u) || isUnavailable(u)

/**
 * One allocation per request, where an `AbortController` costs an `EventTarget` and a listener.
 *
 * @internal
 */
export class PlainSignal {
  aborted = false
  reason: unknown = undefined
  onabort: ((this: unknown) => unknown) | null = null
  get signal(): RequestSignal {
    return this
  }
  abort(reason?: unknown): void {
    if (this.aborted) return
    this.aborted = true
    this.reason = reason
    this.onabort?.()
  }
}

/** @internal */
export const acceptsPlainSignals = (client: DynamoDBClient): boolean => {
  const handler: unknown = (client as { readonly config?: { readonly requestHandler?: unknown } }).config
    ?.requestHandler
  const name = Predicate.isObject(handler) ? handler.constructor.name : undefined
  return name === "NodeHttpHandler" || name === "NodeHttp2Handler"
}

const isConditionFailure = (error: unknown): boolean =>
  stringProperty(error, "name") === "ConditionalCheckFailedException"

const conditionFailed = (error: unknown, afterUncertainAttempt: boolean): ConditionFailed =>
  new ConditionFailed({
    item: Predicate.hasProperty(error, "Item") && Predicate.isRecord(error.Item) ? error.Item as Item : undefined,
    afterUncertainAttempt
  })

const classify = (method: string, error: unknown): IdempotencyError.StoreFailure =>
  isRetryable(error)
    ? new IdempotencyError.StoreUnavailable({ method, cause: error })
    : new IdempotencyError.StoreError({ method, cause: error })

/**
 * See README.md#time-limits and README.md#failures-and-retries.
 *
 * @internal
 */
export const send = <A>(
  sender: Sender,
  method: string,
  deadline: number,
  request: (client: DynamoDBClient, signal: RequestSignal) => Promise<A>
): Effect.Effect<A | ConditionFailed, IdempotencyError.StoreFailure> => {
  const attempt = attemptUntil(sender, deadline, request)
  return Effect.catchAll(
    attempt,
    (error) =>
      isRetryable(error) ? retry(sender, method, deadline, attempt, error) : Effect.fail(classify(method, error))
  )
}

const requestTimedOut = (timeout: Duration.Duration) =>
  new Cause.TimeoutException(`DynamoDB did not answer within ${Duration.format(timeout)}`)

const callTimedOut = () => new Cause.TimeoutException("the store call did not finish before its deadline")

const attemptUntil = <A>(
  sender: Sender,
  deadline: number,
  request: (client: DynamoDBClient, signal: RequestSignal) => Promise<A>
): Effect.Effect<A | ConditionFailed, unknown> =>
  Effect.clockWith((clock) =>
    Effect.async<A | ConditionFailed, unknown>((resume) => {
      const now = clock.unsafeCurrentTimeMillis()
      const ends = Math.min(now + Duration.toMillis(sender.requestTimeout), deadline)
      if (ends <= now) return resume(Effect.fail(callTimedOut()))
      const controller = sender.plainSignals === true ? new PlainSignal() : new AbortController()
      let cause: Cause.TimeoutException | undefined = undefined
      const unregister = ends === Infinity ? () => {} : sender.deadlines.register(clock, ends, () => {
        cause = ends < deadline ? requestTimedOut(sender.requestTimeout) : callTimedOut()
        controller.abort(cause)
      })
      // the Promise constructor turns a synchronous throw of the request into a rejection
      new Promise<A>((resolve) => resolve(request(sender.client, controller.signal))).then(
        (value) => {
          unregister()
          resume(Effect.succeed(value))
        },
        (error) => {
          unregister()
          resume(
            cause === undefined && isConditionFailure(error)
              ? Effect.succeed(conditionFailed(error, false))
              : Effect.fail(cause ?? error)
          )
        }
      )
      return Effect.sync(() => {
        unregister()
        controller.abort()
      })
    })
  )

// as `Effect.retry({ schedule, while: isRetryable })`, bounded by the deadline, started only after a failure
const retry = <A>(
  sender: Sender,
  method: string,
  deadline: number,
  attempt: Effect.Effect<A | ConditionFailed, unknown>,
  first: unknown
): Effect.Effect<A | ConditionFailed, IdempotencyError.StoreFailure> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    if (deadline <= now) return Effect.fail(classify(method, callTimedOut()))
    const retries = Effect.flatMap(Schedule.driver(Schedule.whileInput(sender.retry, isRetryable)), (driver) => {
      const next = (
        error: unknown,
        uncertain: boolean
      ): Effect.Effect<A | ConditionFailed, IdempotencyError.StoreFailure> =>
        Effect.matchEffect(driver.next(error), {
          onFailure: () => Effect.fail(classify(method, error)),
          onSuccess: () =>
            Effect.matchEffect(attempt, {
              onFailure: (failure) => next(failure, uncertain || mayHaveBeenApplied(failure)),
              // a failed condition after an attempt that may have been applied may be this call's own write
              onSuccess: (result) =>
                Effect.succeed(
                  uncertain && result instanceof ConditionFailed
                    ? new ConditionFailed({ item: result.item, afterUncertainAttempt: true })
                    : result
                )
            })
        })
      return next(first, mayHaveBeenApplied(first))
    })
    return deadline === Infinity ? retries : Effect.timeoutFail(retries, {
      duration: Duration.millis(deadline - now),
      onTimeout: () => new IdempotencyError.StoreUnavailable({ method, cause: callTimedOut() })
    })
  })
