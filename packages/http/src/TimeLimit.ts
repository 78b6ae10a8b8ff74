/**
 * How an idempotent request splits a platform's time limit (its cut-off) between the handler, the
 * margin that records the outcome, and the answer itself.
 *
 * ```
 *   request received                    handler timeout            platform cuts off
 *   │◀──────────── remaining − margin ─────────▶│◀──── margin ────▶│
 *   │ reserve ─ handler ──────────────────────── │ record outcome   │
 *   │◀──────────────────────── lease (≥ time limit) ──────────────────────▶│
 * ```
 *
 * The handler ends at the latest `margin` before the cut-off, so the outcome, or the timeout
 * policy, is recorded while the request still runs; every store call ends `answerAllowance(margin)`
 * before the cut-off, which leaves the time to answer. The lease lasts at least as long as the
 * request may run, so no retry takes the record over while it is alive.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"

/**
 * The largest default margin: enough for a few store round trips and the retries of a completion.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_DEFAULT_MARGIN: Duration.Duration = Duration.seconds(1)

/**
 * The default margin of a limit: a quarter of it, at most `MAX_DEFAULT_MARGIN`.
 *
 * @since 0.1.0
 * @category utils
 */
export const defaultMargin = (timeLimit: Duration.DurationInput): Duration.Duration =>
  Duration.min(MAX_DEFAULT_MARGIN, Duration.unsafeDivide(Duration.decode(timeLimit), 4))

/**
 * The timeout of the handler when `remaining` is left before the cut-off: `remaining` less the
 * margin, or zero.
 *
 * @since 0.1.0
 * @category utils
 */
export const downstreamTimeout = (
  remaining: Duration.DurationInput,
  margin: Duration.DurationInput
): Duration.Duration => {
  const left = Duration.toMillis(remaining) - Duration.toMillis(margin)
  return left > 0 ? Duration.millis(left) : Duration.zero
}

/**
 * The part of a margin kept for the answer itself, after the last store call: a quarter of the
 * margin, at most 100 ms. Every store call ends this long before the platform's cut-off.
 *
 * @since 0.1.0
 * @category utils
 */
export const answerAllowance = (margin: Duration.DurationInput): Duration.Duration =>
  Duration.min(Duration.millis(100), Duration.unsafeDivide(Duration.decode(margin), 4))
