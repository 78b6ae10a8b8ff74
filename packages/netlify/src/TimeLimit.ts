/**
 * Netlify's time limits, with the arithmetic of `@effect-idempotency/http`'s `TimeLimit` re-exported.
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
 * The largest limit of a synchronous function.
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
 * @since 0.1.0
 * @category re-exports
 */
export * from "@effect-idempotency/http/TimeLimit"
