/**
 * How a request splits a platform's time limit between the handler, the margin and the answer.
 *
 * ```
 *   request received                    handler timeout            platform cuts off
 *   │◀──────────── remaining − margin ─────────▶│◀──── margin ────▶│
 *   │ reserve ─ handler ──────────────────────── │ record outcome   │
 *   │◀──────────────────────── lease (≥ time limit) ──────────────────────▶│
 * ```
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"

/**
 * The largest default margin: a few store round trips and the retries of a completion.
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
 * The handler's timeout with `remaining` left: `remaining` less the margin, or zero.
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
 * The part of a margin kept for the answer after the last store call: a quarter, at most 100 ms.
 *
 * @since 0.1.0
 * @category utils
 */
export const answerAllowance = (margin: Duration.DurationInput): Duration.Duration =>
  Duration.min(Duration.millis(100), Duration.unsafeDivide(Duration.decode(margin), 4))
