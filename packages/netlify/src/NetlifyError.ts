/**
 * The failures the Netlify adapter adds to those of an idempotent operation (those of
 * `@effect-idempotency/http`, which every HTTP integration shares), and the HTTP status of every
 * failure a function can end with.
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
export const httpStatus: (error: NetlifyError | IdempotencyError.IdempotencyError) => number =
  HttpIdempotencyError.httpStatus
