/**
 * The policies of an idempotent operation: values chosen per operation.
 *
 * @since 0.1.0
 */
import type * as Schedule from "effect/Schedule"
import type { IdempotencyConflict } from "./IdempotencyError.js"

/**
 * What a domain failure of the downstream does to the record.
 *
 * - `release`: delete the record, so a retry executes again (for transient errors).
 * - `store`: record the failure (encoded with the operation's `failure` schema) and replay it (for
 *   deterministic rejections).
 * - `markFailed`: keep a FAILED record that a retry with the same request takes over.
 *
 * @since 0.1.0
 * @category models
 */
export type FailurePolicy = "release" | "store" | "markFailed"

/**
 * What a downstream timeout (outcome unknown) does to the record.
 *
 * - `keepLease`: leave it IN_PROGRESS; retries get `IdempotencyConflict` until the lease ends, then
 *   take over. Safe when the downstream deduplicates by the forwarded key.
 * - `release`: delete it, so a retry executes at once: at-least-once.
 * - `markUnknown`: record that the outcome is unknown and block the key until it expires (for
 *   reconciliation): at-most-once. Under this policy an expired lease (a crashed attempt) is never
 *   taken over either.
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
 * Fail at once with `IdempotencyConflict` (HTTP 409 with `Retry-After`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const failOnConflict: InProgressPolicy = { _tag: "Fail" }

/**
 * Wait for the other attempt: retry the reservation on the schedule (each retry is one store round
 * trip) and replay its outcome once recorded. Give the schedule a bound (`Schedule.recurs`,
 * `Schedule.upTo`); when it ends, the attempt fails with `IdempotencyConflict`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const waitOnConflict = (schedule: Schedule.Schedule<unknown, IdempotencyConflict>): InProgressPolicy => ({
  _tag: "Wait",
  schedule
})
