/**
 * The adapter's failures (those of `@effect-idempotency/http`) and their HTTP statuses.
 *
 * @since 0.1.0
 */
import type { IdempotencyError } from "@effect-idempotency/core"
import { HttpIdempotencyError } from "@effect-idempotency/http"

export {
  /**
   * @since 0.1.0
   * @category errors
   */
  InsufficientTime,
  /**
   * @since 0.1.0
   * @category errors
   */
  InvalidRequestBody,
  /**
   * @since 0.1.0
   * @category errors
   */
  LayerUnavailable,
  /**
   * @since 0.1.0
   * @category errors
   */
  MissingIdempotencyKey,
  /**
   * @since 0.1.0
   * @category errors
   */
  RequestBodyTooLarge
} from "@effect-idempotency/http/HttpIdempotencyError"

/**
 * Every failure the adapter itself produces.
 *
 * @since 0.1.0
 * @category models
 */
export type NetlifyError = HttpIdempotencyError.HttpIdempotencyError

/**
 * Whether a value is one of the adapter's failures.
 *
 * @since 0.1.0
 * @category refinements
 */
export const isNetlifyError: (u: unknown) => u is NetlifyError = HttpIdempotencyError.isHttpIdempotencyError

/**
 * The HTTP status of a failure: the table in README.md#per-invocation.
 *
 * @since 0.1.0
 * @category mapping
 */
export const httpStatus: (error: NetlifyError | IdempotencyError.IdempotencyError) => number =
  HttpIdempotencyError.httpStatus
