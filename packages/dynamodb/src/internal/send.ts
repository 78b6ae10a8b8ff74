import type { DynamoDBClient } from "@aws-sdk/client-dynamodb"
import { IdempotencyError } from "@effect-idempotency/core"
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
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

/** @internal */
export interface Sender {
  readonly client: DynamoDBClient
  /** Retries of throttled requests and of transient failures (network errors, timeouts, 5xx). */
  readonly retry: Schedule.Schedule<unknown, unknown>
  /** The most one request may take; `undefined` for no limit. */
  readonly timeout: Duration.DurationInput | undefined
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

const classify = (
  method: string,
  error: unknown,
  afterUncertainAttempt: boolean
): ConditionFailed | IdempotencyError.StoreFailure => {
  if (stringProperty(error, "name") === "ConditionalCheckFailedException") {
    const item = Predicate.hasProperty(error, "Item") && Predicate.isRecord(error.Item)
      ? error.Item as Item
      : undefined
    return new ConditionFailed({ item, afterUncertainAttempt })
  }
  return isRetryable(error)
    ? new IdempotencyError.StoreUnavailable({ method, cause: error })
    : new IdempotencyError.StoreError({ method, cause: error })
}

/**
 * Sends one request. Interruption aborts it (the SDK cancels the HTTP request through the
 * `AbortSignal`). Throttling and transient failures (network errors, timeouts, 5xx) are retried
 * with the sender's schedule, so every request must be safe to send again: a later attempt whose
 * condition fails says so (`afterUncertainAttempt`) when an earlier one may have been applied.
 * Every failure is typed: `ConditionFailed` for a failed condition, `StoreUnavailable` for
 * throttling and transient failures past the retries, `StoreError` for anything else.
 *
 * The common case, one attempt that succeeds or fails for good (a failed condition is a failure
 * for good), costs one `tryPromise`: the schedule is started only after a retryable failure.
 *
 * @internal
 */
export const send = <A>(
  sender: Sender,
  method: string,
  request: (client: DynamoDBClient, signal: AbortSignal) => Promise<A>
): Effect.Effect<A, ConditionFailed | IdempotencyError.StoreFailure> => {
  const once = Effect.tryPromise({
    try: (signal) => request(sender.client, signal),
    catch: (error) => error
  })
  const attempt = sender.timeout === undefined ? once : Effect.timeout(once, sender.timeout)
  return Effect.catchAll(
    attempt,
    (error) => isRetryable(error) ? retry(sender, method, attempt, error) : Effect.fail(classify(method, error, false))
  )
}

/**
 * The attempts after a first one that failed with `first`, a retryable failure: as
 * `Effect.retry({ schedule: sender.retry, while: isRetryable })` would make them. Each failure is
 * offered to the schedule, which decides whether (and after how long) to send again; the last
 * failure is classified, knowing whether any attempt may have been applied.
 */
const retry = <A>(
  sender: Sender,
  method: string,
  attempt: Effect.Effect<A, unknown>,
  first: unknown
): Effect.Effect<A, ConditionFailed | IdempotencyError.StoreFailure> =>
  Effect.flatMap(Schedule.driver(Schedule.whileInput(sender.retry, isRetryable)), (driver) => {
    const next = (
      error: unknown,
      uncertain: boolean
    ): Effect.Effect<A, ConditionFailed | IdempotencyError.StoreFailure> =>
      Effect.matchEffect(driver.next(error), {
        onFailure: () => Effect.fail(classify(method, error, uncertain)),
        onSuccess: () => Effect.catchAll(attempt, (failure) => next(failure, uncertain || mayHaveBeenApplied(failure)))
      })
    return next(first, mayHaveBeenApplied(first))
  })
