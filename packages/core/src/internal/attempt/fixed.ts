/**
 * The fixed data of one attempt: everything its machine reads that does not change while it runs.
 *
 * @internal
 */
import type { TimeoutPolicy } from "../../IdempotencyPolicy.js"

export interface Fixed {
  readonly operation: string
  /** The validated key. */
  readonly key: string
  /** The record's id, as `LeaseLost` names it. */
  readonly recordId: string
  readonly fingerprint: string
  /** The time the downstream gets, counted from the reservation's request. */
  readonly timeoutMs: number
  readonly leaseMs: number
  readonly marginMs: number
  readonly heartbeatMs: number | undefined
  readonly onTimeout: TimeoutPolicy
  readonly onDefect: TimeoutPolicy
  /** Whether a live conflict is waited on (`waitOnConflict`). */
  readonly waits: boolean
  /** After when no reservation is sent or waited for: the downstream's deadline; `Infinity` without a deadline. */
  readonly until: number
  /** The attempt's deadline; `Infinity` without one. */
  readonly deadline: number
}
