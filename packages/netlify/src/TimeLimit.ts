/**
 * Netlify's time limits: the default and the largest limit of a synchronous function, and the limit
 * of a background function. A function's `timeLimit` is one of them.
 *
 * How a limit is split between the handler, the margin that records the outcome, and the lease is
 * `@effect-idempotency/http`'s `TimeLimit`, which every HTTP integration shares; its functions and
 * constants are re-exported here, so `TimeLimit.defaultMargin` reads the same from either package.
 *
 * @example
 * ```ts
 * import { TimeLimit } from "@effect-idempotency/netlify"
 * import * as Duration from "effect/Duration"
 *
 * // a synchronous function at its largest limit records its outcome in the last second
 * console.log(Duration.format(TimeLimit.defaultMargin(TimeLimit.synchronousMax)))
 * ```
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

/**
 * The arithmetic of `@effect-idempotency/http`'s `TimeLimit`: `MAX_DEFAULT_MARGIN`, `defaultMargin`,
 * `downstreamTimeout` and `answerAllowance`.
 *
 * @since 0.1.0
 * @category re-exports
 */
export * from "@effect-idempotency/http/TimeLimit"
