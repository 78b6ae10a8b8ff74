/**
 * The policies of an idempotent operation: values chosen per operation (README.md#policies).
 *
 * @since 0.1.0
 */
import type * as Schedule from "effect/Schedule"
import type { IdempotencyConflict } from "./IdempotencyError.js"

/**
 * What a domain failure of the downstream does to the record.
 *
 * @since 0.1.0
 * @category models
 */
export type FailurePolicy = "release" | "store" | "markFailed"

/**
 * What a downstream timeout (outcome unknown) does to the record.
 *
 * @since 0.1.0
 * @category models
 */
export type TimeoutPolicy = "keepLease" | "release" | "markUnknown"

/**
 * What an attempt does when another attempt holds a live lease on its key.
 *
 * @since 0.1.0
 * @category models
 */
export type InProgressPolicy =
  | { readonly _tag: "Fail" }
  | { readonly _tag: "Wait"; readonly schedule: Schedule.Schedule<unknown, IdempotencyConflict> }

/**
 * Fail at once with `IdempotencyConflict`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const failOnConflict: InProgressPolicy = { _tag: "Fail" }

/**
 * Retry the reservation on the (bounded) schedule, and replay the other attempt's outcome.
 *
 * @since 0.1.0
 * @category constructors
 */
export const waitOnConflict = (schedule: Schedule.Schedule<unknown, IdempotencyConflict>): InProgressPolicy => ({
  _tag: "Wait",
  schedule
})
