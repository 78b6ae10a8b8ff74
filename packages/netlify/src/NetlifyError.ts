/**
 * The failures the Netlify adapter adds to those of an idempotent operation, and the HTTP status
 * of every failure a function can end with.
 *
 * @since 0.1.0
 */
import { IdempotencyError } from "@effect-idempotency/core"
import * as Schema from "effect/Schema"

/**
 * The route requires an idempotency key and the request carries none. No store was touched.
 *
 * @since 0.1.0
 * @category errors
 */
export class MissingIdempotencyKey extends Schema.TaggedError<MissingIdempotencyKey>(
  "@effect-idempotency/netlify/MissingIdempotencyKey"
)("MissingIdempotencyKey", {
  /** Where the key was looked for, e.g. `the Idempotency-Key header`. */
  source: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `This function requires an idempotency key (${this.source})`
  }
}

/**
 * The request body is not the function's payload (not JSON, or rejected by the payload schema).
 * No store was touched. `detail` says where the body broke the schema, bounded and escaped, and
 * never holds any of the body's values.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidRequestBody extends Schema.TaggedError<InvalidRequestBody>(
  "@effect-idempotency/netlify/InvalidRequestBody"
)("InvalidRequestBody", {
  reason: Schema.Literal("Unreadable", "NotJson", "Schema"),
  detail: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Invalid request body: ${this.detail}`
  }
}

/**
 * The request body is larger than the function accepts (`maxBodyBytes`). It was not read past the
 * limit; no store was touched.
 *
 * @since 0.1.0
 * @category errors
 */
export class RequestBodyTooLarge extends Schema.TaggedError<RequestBodyTooLarge>(
  "@effect-idempotency/netlify/RequestBodyTooLarge"
)("RequestBodyTooLarge", {
  limitBytes: Schema.Number
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `The request body is larger than the ${this.limitBytes} bytes this function accepts`
  }
}

/**
 * Too little of the function's time limit is left to call the downstream and still record the
 * outcome (a slow cold start, for example). No store was touched; a retry may succeed.
 *
 * @since 0.1.0
 * @category errors
 */
export class InsufficientTime extends Schema.TaggedError<InsufficientTime>(
  "@effect-idempotency/netlify/InsufficientTime"
)("InsufficientTime", {
  remainingMillis: Schema.Number,
  marginMillis: Schema.Number
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Only ${this.remainingMillis} ms of the time limit left, less than the ${this.marginMillis} ms margin`
  }
}

/**
 * The function's layer (the store, the downstream clients) could not be built. The downstream was
 * not called; the next invocation builds it again.
 *
 * @since 0.1.0
 * @category errors
 */
export class LayerUnavailable extends Schema.TaggedError<LayerUnavailable>(
  "@effect-idempotency/netlify/LayerUnavailable"
)("LayerUnavailable", {
  cause: Schema.Defect
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return "The function's services could not be started"
  }
}

/**
 * Every failure the adapter itself produces.
 *
 * @since 0.1.0
 * @category models
 */
export type NetlifyError =
  | MissingIdempotencyKey
  | InvalidRequestBody
  | RequestBodyTooLarge
  | InsufficientTime
  | LayerUnavailable

/**
 * Whether a value is one of the adapter's failures.
 *
 * @since 0.1.0
 * @category refinements
 */
export const isNetlifyError = (u: unknown): u is NetlifyError =>
  u instanceof MissingIdempotencyKey || u instanceof InvalidRequestBody || u instanceof RequestBodyTooLarge ||
  u instanceof InsufficientTime || u instanceof LayerUnavailable

/**
 * The HTTP status of an adapter or library failure.
 *
 * | failure | status |
 * | --- | --- |
 * | `MissingIdempotencyKey`, `InvalidRequestBody`, `InvalidIdempotencyKey`, `InvalidPayload` | 400 |
 * | `IdempotencyConflict` (with `Retry-After`), `LeaseLost` | 409 |
 * | `RequestBodyTooLarge` | 413 |
 * | `KeyReused` | 422 |
 * | `StoredOutcomeInvalid`, `OutcomeNotReplayable` | 500 |
 * | `InsufficientTime`, `LayerUnavailable`, `CleanupFailed`, `StoreUnavailable`, `StoreError` | 503 |
 * | `DownstreamTimeout` | 504 |
 *
 * @since 0.1.0
 * @category mapping
 */
export const httpStatus = (error: NetlifyError | IdempotencyError.IdempotencyError): number => {
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
