/**
 * The failures the HTTP layer adds to those of an idempotent operation, and their HTTP statuses.
 *
 * @since 0.1.0
 */
import { IdempotencyError } from "@effect-idempotency/core"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"

/**
 * A registered symbol: two installed copies of this package recognise each other's errors.
 *
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@effect-idempotency/http/HttpIdempotencyError")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * The route requires an idempotency key and the request carries none.
 *
 * @since 0.1.0
 * @category errors
 */
export class MissingIdempotencyKey extends Schema.TaggedError<MissingIdempotencyKey>(
  "@effect-idempotency/http/MissingIdempotencyKey"
)("MissingIdempotencyKey", {
  source: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `This operation requires an idempotency key (${this.source})`
  }
}

/**
 * The request body could not be read, is not JSON, or the payload schema rejects it.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidRequestBody extends Schema.TaggedError<InvalidRequestBody>(
  "@effect-idempotency/http/InvalidRequestBody"
)("InvalidRequestBody", {
  reason: Schema.Literal("Unreadable", "NotJson", "Schema"),
  detail: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Invalid request body: ${this.detail}`
  }
}

/**
 * The request body is larger than `maxBodyBytes`; it was not read past the limit.
 *
 * @since 0.1.0
 * @category errors
 */
export class RequestBodyTooLarge extends Schema.TaggedError<RequestBodyTooLarge>(
  "@effect-idempotency/http/RequestBodyTooLarge"
)("RequestBodyTooLarge", {
  limitBytes: Schema.Number
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The request body is larger than the ${this.limitBytes} bytes this operation accepts`
  }
}

/**
 * Too little of the request's time limit is left to run the handler and record its outcome.
 *
 * @since 0.1.0
 * @category errors
 */
export class InsufficientTime extends Schema.TaggedError<InsufficientTime>(
  "@effect-idempotency/http/InsufficientTime"
)("InsufficientTime", {
  remainingMillis: Schema.Number,
  marginMillis: Schema.Number
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Only ${this.remainingMillis} ms of the time limit left, less than the ${this.marginMillis} ms margin`
  }
}

/**
 * The handler's services could not be built; the next request builds them again.
 *
 * @since 0.1.0
 * @category errors
 */
export class LayerUnavailable extends Schema.TaggedError<LayerUnavailable>(
  "@effect-idempotency/http/LayerUnavailable"
)("LayerUnavailable", {
  cause: Schema.Defect
}) {
  /**
   * @since 0.1.0
   */
  declare readonly [TypeId]: TypeId
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return "The handler's services could not be started"
  }
}

/**
 * Every failure the HTTP layer itself produces.
 *
 * @since 0.1.0
 * @category models
 */
export type HttpIdempotencyError =
  | MissingIdempotencyKey
  | InvalidRequestBody
  | RequestBodyTooLarge
  | InsufficientTime
  | LayerUnavailable

for (
  const error of [MissingIdempotencyKey, InvalidRequestBody, RequestBodyTooLarge, InsufficientTime, LayerUnavailable]
) {
  Object.defineProperty(error.prototype, TypeId, { value: TypeId })
}

/**
 * Whether a value is one of the HTTP layer's failures, by type id.
 *
 * @since 0.1.0
 * @category refinements
 */
export const isHttpIdempotencyError = (u: unknown): u is HttpIdempotencyError =>
  Predicate.hasProperty(u, TypeId) && Predicate.hasProperty(u, "_tag") && typeof u._tag === "string"

/**
 * Any failure a request can end with that is not the handler's own.
 *
 * @since 0.1.0
 * @category models
 */
export type RequestFailure = HttpIdempotencyError | IdempotencyError.IdempotencyError

/**
 * Whether a value is a `RequestFailure`.
 *
 * @since 0.1.0
 * @category refinements
 */
export const isRequestFailure = (u: unknown): u is RequestFailure =>
  isHttpIdempotencyError(u) || IdempotencyError.isIdempotencyError(u)

/**
 * The HTTP status of a failure: the table in README.md#what-a-request-gets.
 *
 * @since 0.1.0
 * @category mapping
 */
export const httpStatus = (error: RequestFailure): number => {
  switch (error._tag) {
    case "MissingIdempotencyKey":
    case "InvalidRequestBody":
      return 400
    case "RequestBodyTooLarge":
      return 413
    case "InsufficientTime":
    case "LayerUnavailable":
      return 503
    default:
      return IdempotencyError.httpStatus(error)
  }
}
