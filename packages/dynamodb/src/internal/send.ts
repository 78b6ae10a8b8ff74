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
 * A conditional write's condition evaluated to false: data for the caller, never an error that
 * leaves the store. `item` is the item as it was, when the service returned it (DynamoDB does
 * for `ReturnValuesOnConditionCheckFailure: ALL_OLD` when the item exists; some emulators never
 * do). A plain tagged value, not an `Error`: it is met on every replay and conflict, and capturing
 * a stack trace for it would cost more than everything else the store does with it.
 *
 * @internal
 */
export class ConditionFailed extends Data.TaggedClass("ConditionFailed")<{
  readonly item: Item | undefined
  /**
   * An earlier attempt of the same call failed in a way that leaves open whether it was applied
   * (its response was lost): the condition may have failed on this call's own earlier write.
   */
  readonly afterUncertainAttempt: boolean
}> {}

/**
 * The abort signal handed to the SDK with each request.
 *
 * @internal
 */
export type RequestSignal = NonNullable<NonNullable<Parameters<DynamoDBClient["send"]>[1]>["abortSignal"]>

/** @internal */
export interface Sender {
  readonly client: DynamoDBClient
  /**
   * Whether the client's HTTP handler accepts a plain signal (see `PlainSignal`): true for the
   * SDK's Node handlers. Default false: a platform `AbortController` per request.
   */
  readonly plainSignals?: boolean | undefined
  /** Retries of throttled requests and of transient failures (network errors, timeouts, 5xx). */
  readonly retry: Schedule.Schedule<unknown, unknown>
  /** The most one attempt of a request may take (infinite: no limit). */
  readonly requestTimeout: Duration.Duration
  /** Where the deadlines of attempts are watched. */
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

/** The network error codes of every store, and the HTTP/2 stream error of the SDK's HTTP handler. */
const NETWORK_CODES: ReadonlySet<string> = new Set([...IdempotencyError.networkErrorCodes, "ERR_HTTP2_STREAM_ERROR"])

/** Connection failures that happen before a request is sent: it cannot have been applied. */
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

/**
 * Whether a failure is throttling: the request was refused before it was applied, so it is
 * always safe to send again.
 *
 * @internal
 */
export const isThrottling = (u: unknown): boolean => {
  const name = stringProperty(u, "name")
  if (name !== undefined && THROTTLING.has(name)) return true
  return Predicate.hasProperty(u, "$retryable") && Predicate.hasProperty(u.$retryable, "throttling") &&
    u.$retryable.throttling === true
}

/**
 * Whether a failure means the service could not be reached or could not answer: a network
 * error, a timeout, a 5xx.
 *
 * @internal
 */
export const isUnavailable = (u: unknown): boolean => {
  if (Cause.isTimeoutException(u)) return true
  const code = stringProperty(u, "code")
  if (code !== undefined && NETWORK_CODES.has(code)) return true
  const name = stringProperty(u, "name")
  if (name !== undefined && TRANSIENT_NAMES.has(name)) return true
  const status = httpStatus(u)
  return status !== undefined && status >= 500
}

/**
 * Whether DynamoDB refused a write because the item would exceed its size limit.
 *
 * @internal
 */
export const isItemTooLarge = (u: unknown): boolean =>
  stringProperty(u, "name") === "ValidationException" &&
  /item size/i.test(stringProperty(u, "message") ?? "")

/**
 * Whether a failed request may nevertheless have been applied: its response was lost (a reset
 * connection, a timeout, a 5xx), unlike a refused connection or throttling.
 *
 * @internal
 */
export const mayHaveBeenApplied = (u: unknown): boolean =>
  isUnavailable(u) && !NOT_SENT_CODES.has(stringProperty(u, "code") ?? "")

/**
 * Whether a failure is retried by the sender's schedule: throttling, or a transient failure.
 *
 * @internal
 */
export const isRetryable = (u: unknown): boolean => isThrottling(u) || isUnavailable(u)

/**
 * The signal of one request as a plain object, for the SDK's Node HTTP handlers: they accept any
 * object with `aborted` and `onabort` (the SDK's own `AbortSignal` interface) and destroy the
 * request's connection when `onabort` is called. It costs one allocation, where an
 * `AbortController` costs an `EventTarget`, a listener and its removal on every request. The
 * fetch handler needs a platform `AbortSignal`.
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

/**
 * Whether a client's HTTP handler is one of the SDK's Node handlers, which accept a `PlainSignal`.
 *
 * @internal
 */
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
 * Sends one request, and fails with a `TimeoutException` when it has not answered by `deadline`
 * (the end of the store call, epoch milliseconds of the fiber's `Clock`; `Infinity` for none).
 * Interruption aborts it (the SDK destroys its connection through the `AbortSignal`), and so does
 * the end of the attempt (`requestTimeout`) or of the call.
 *
 * Throttling and transient failures (network errors, timeouts, 5xx) are retried with the sender's
 * schedule while the deadline allows, so every request must be safe to send again: a later
 * attempt whose condition fails says so (`afterUncertainAttempt`) when an earlier one may have
 * been applied. A failed condition is data, not a failure: it succeeds with `ConditionFailed`, taken
 * from the SDK's exception at this boundary, so the hot paths that meet one (a replay, a conflict)
 * never fail inside the caller's fiber. Every failure is typed: `StoreUnavailable` for throttling
 * and transient failures past the retries or the deadline, `StoreError` for anything else.
 *
 * The common case, one attempt that succeeds or fails for good, costs no timer and no fiber: the
 * attempt's deadline is watched by `Deadlines`, and the schedule, and the bound of the retries,
 * are started only after a retryable failure.
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

/**
 * One attempt, aborted when it outlives `requestTimeout` or the call's deadline: then it fails
 * with a `TimeoutException`. A failed condition succeeds with `ConditionFailed`.
 */
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

/**
 * The attempts after a first one that failed with `first`, a retryable failure: as
 * `Effect.retry({ schedule: sender.retry, while: isRetryable })` would make them, and no later than
 * the deadline. Each failure is offered to the schedule, which decides whether (and after how
 * long) to send again; the last failure is classified, knowing whether any attempt may have been
 * applied. The call's deadline bounds the schedule's waits too.
 */
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
