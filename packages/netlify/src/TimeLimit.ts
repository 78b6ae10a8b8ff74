/**
 * Netlify's time limits, and how an idempotent function splits its limit between the downstream
 * call, the margin that records the outcome, and the lease that blocks concurrent attempts.
 *
 * ```
 *   handler entered                     downstream timeout          platform cuts off
 *   │◀──────────── remaining − margin ──────────▶│◀──── margin ────▶│
 *   │ reserve ─ downstream call ───────────────── │ record outcome   │
 *   │◀──────────────────────── lease (≥ time limit) ──────────────────────▶│
 * ```
 *
 * The downstream call ends at the latest `margin` before the platform's cut-off, so the outcome,
 * or the timeout policy, is recorded while the function still runs. The lease lasts at least as
 * long as the attempt may run, so no retry takes the record over while the attempt is alive. The
 * arithmetic is `@effect-idempotency/http`'s, which every HTTP integration shares.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"

/**
 * The default limit of a synchronous function.
 *
 * @since 0.1.0
 * @category constants
 */
export const synchronous: Duration.Duration = Duration.seconds(10)

/**
 * The largest limit a synchronous function can be configured with.
 *
 * @since 0.1.0
 * @category constants
 */
export const synchronousMax: Duration.Duration = Duration.seconds(26)

/**
 * The limit of a background function.
 *
 * @since 0.1.0
 * @category constants
 */
export const background: Duration.Duration = Duration.minutes(15)

export {
  /**
   * The part of a margin kept for the answer itself, after the last store call: a quarter of the
   * margin, at most 100 ms. Every store call ends this long before the platform's cut-off.
   *
   * @since 0.1.0
   * @category utils
   */
  answerAllowance,
  /**
   * The default margin of a limit: a quarter of it, at most `MAX_DEFAULT_MARGIN` (1 second).
   *
   * @since 0.1.0
   * @category utils
   */
  defaultMargin,
  /**
   * The timeout of the downstream call when `remaining` is left before the cut-off: `remaining`
   * less the margin, or zero.
   *
   * @since 0.1.0
   * @category utils
   */
  downstreamTimeout,
  /**
   * The largest default margin: enough for a few store round trips and the retries of a completion.
   *
   * @since 0.1.0
   * @category constants
   */
  MAX_DEFAULT_MARGIN
} from "@effect-idempotency/http/TimeLimit"
