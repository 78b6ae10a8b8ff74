/**
 * What an attempt's machine reads that never changes while it runs.
 *
 * @internal
 */
import type { TimeoutPolicy } from "../../IdempotencyPolicy.js"

export interface Fixed {
  readonly operation: string
  readonly key: string
  readonly recordId: string
  readonly fingerprint: string
  /** The time the downstream gets, counted from the reservation's request. */
  readonly timeoutMs: number
  readonly leaseMs: number
  readonly marginMs: number
  readonly heartbeatMs: number | undefined
  /** The longest the attempt holds the key, from the reservation's request; `Infinity` without a cap. */
  readonly maxHoldMs: number
  readonly onTimeout: TimeoutPolicy
  readonly onDefect: TimeoutPolicy
  readonly waits: boolean
  /** After when no reservation is sent or waited for; `Infinity` without a deadline. */
  readonly until: number
  /** The attempt's deadline; `Infinity` without one. */
  readonly deadline: number
}
