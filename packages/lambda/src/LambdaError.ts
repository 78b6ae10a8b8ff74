/**
 * The failures the Lambda adapter adds to those of an idempotent operation.
 *
 * @since 0.1.0
 */
import { HttpIdempotencyError } from "@effect-idempotency/http"
import * as Schema from "effect/Schema"

/**
 * The event is not the function's event: it does not decode with the event schema, or its decoded
 * value does not encode back with it (for its fingerprint). No store was touched. `detail` says
 * where it broke the schema, bounded, without any of its values.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidEvent extends Schema.TaggedError<InvalidEvent>("@effect-idempotency/lambda/InvalidEvent")(
  "InvalidEvent",
  { detail: Schema.String }
) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Invalid event: ${this.detail}`
  }
}

/**
 * The key function found no key in the event. No store was touched.
 *
 * @since 0.1.0
 * @category errors
 */
export class MissingKey extends Schema.TaggedError<MissingKey>("@effect-idempotency/lambda/MissingKey")(
  "MissingKey",
  {}
) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return "The event carries no idempotency key"
  }
}

/**
 * Too little of the invocation's time is left to call the downstream and still record the outcome
 * before Lambda stops the function (a slow cold start, for example). No store was touched; a retry
 * may succeed.
 *
 * @since 0.1.0
 * @category errors
 */
export class InsufficientTime extends Schema.TaggedError<InsufficientTime>(
  "@effect-idempotency/lambda/InsufficientTime"
)("InsufficientTime", {
  remainingMillis: Schema.Number,
  marginMillis: Schema.Number
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Only ${this.remainingMillis} ms of the invocation left, less than the ${this.marginMillis} ms margin`
  }
}

/**
 * The function's layer (the store, the downstream clients) could not be built. The downstream was
 * not called; the next invocation builds it again. The same error as every adapter's (from
 * `@effect-idempotency/http`'s `WarmRuntime`).
 *
 * @since 0.1.0
 * @category errors
 */
export const LayerUnavailable = HttpIdempotencyError.LayerUnavailable

/**
 * @since 0.1.0
 * @category errors
 */
export type LayerUnavailable = HttpIdempotencyError.LayerUnavailable

/**
 * Every failure the adapter itself produces.
 *
 * @since 0.1.0
 * @category models
 */
export type LambdaError = InvalidEvent | MissingKey | InsufficientTime | LayerUnavailable
