/**
 * The record a store keeps per scoped key, and the data its methods return.
 *
 * ```
 *   absent ──reserve──▶ IN_PROGRESS(token, leaseUntil) ──complete(token)──▶ COMPLETED(outcome)
 *     ▲                    │  │                                            replayed until expiresAt
 *     └──release(token)────┘  └──markFailed(token)──▶ FAILED (a retry with the same fingerprint
 *                                                     takes it over)
 * ```
 *
 * An IN_PROGRESS record whose lease ended is taken over by the next reservation with the same
 * fingerprint (a new token fences the old owner out). Any record whose `expiresAt` has passed is
 * treated as absent.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Schema from "effect/Schema"
import type { IdempotencyKey } from "./IdempotencyKey.js"
import { SEPARATOR } from "./IdempotencyKey.js"

/**
 * The identity of a record: the operation's name, an optional scope (a tenant or user id) and the
 * key. The same key under two scopes or two operations never touches the same record.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordId {
  readonly operation: string
  readonly scope: string | undefined
  readonly key: IdempotencyKey
  /**
   * The single string stores use as the primary key: `operation#key`, or `operation#scope#key`
   * when scoped. The operation and the scope are percent-encoded, so neither contains `#`, and keys
   * never contain `#`: the encoding is unambiguous.
   */
  readonly value: string
}

// the operation most recently encoded: an operation's every run builds an id with the same name
let lastOperation: string | undefined
let lastEncodedOperation = ""

/**
 * Builds a record id.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeRecordId = (options: {
  readonly operation: string
  readonly key: IdempotencyKey
  readonly scope?: string | undefined
}): RecordId => {
  if (options.operation !== lastOperation) {
    lastEncodedOperation = encodeURIComponent(options.operation)
    lastOperation = options.operation
  }
  const operation = lastEncodedOperation
  // joined once, so the id is one flat string (a store keeps it as a key), not a tree of concatenations
  const value = options.scope === undefined
    ? [operation, SEPARATOR, options.key].join("")
    : [operation, SEPARATOR, encodeURIComponent(options.scope), SEPARATOR, options.key].join("")
  return { operation: options.operation, scope: options.scope, key: options.key, value }
}

/**
 * The status of a record.
 *
 * @since 0.1.0
 * @category models
 */
export const Status = Schema.Literal("IN_PROGRESS", "COMPLETED", "FAILED")

/**
 * @since 0.1.0
 * @category models
 */
export type Status = typeof Status.Type

/**
 * A recorded outcome, as the store keeps it. The value and the error are JSON text of the
 * schema-encoded value; `Timeout` records that the outcome is unknown (the `markUnknown` policy);
 * `Omitted` records that the attempt finished but its outcome could not be kept (it does not encode
 * with the operation's schemas, or it exceeded the store's item size limit): the key is still never
 * executed again before it expires, and a replay fails with `OutcomeNotReplayable` carrying `reason`
 * (bounded text that never holds the value).
 *
 * @since 0.1.0
 * @category models
 */
export type StoredOutcome = Data.TaggedEnum<{
  Success: { readonly value: string }
  Failure: { readonly error: string }
  Timeout: {}
  Omitted: { readonly reason: string }
}>

/**
 * Constructors and matchers of `StoredOutcome`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const StoredOutcome = Data.taggedEnum<StoredOutcome>()

/**
 * The kind of a stored outcome, for stores that keep it in its own column.
 *
 * @since 0.1.0
 * @category models
 */
export type OutcomeKind = StoredOutcome["_tag"]

/**
 * The kind and the body of an outcome, for stores that keep them in two columns.
 *
 * @since 0.1.0
 * @category utils
 */
export const outcomeToColumns = (outcome: StoredOutcome): { readonly kind: OutcomeKind; readonly body: string } => {
  switch (outcome._tag) {
    case "Success":
      return { kind: "Success", body: outcome.value }
    case "Failure":
      return { kind: "Failure", body: outcome.error }
    case "Timeout":
      return { kind: "Timeout", body: "" }
    case "Omitted":
      return { kind: "Omitted", body: outcome.reason }
  }
}

/**
 * Rebuilds an outcome from its two columns; `undefined` when the kind is unknown.
 *
 * @since 0.1.0
 * @category utils
 */
export const outcomeFromColumns = (kind: string, body: string): StoredOutcome | undefined => {
  switch (kind) {
    case "Success":
      return StoredOutcome.Success({ value: body })
    case "Failure":
      return StoredOutcome.Failure({ error: body })
    case "Timeout":
      return StoredOutcome.Timeout()
    case "Omitted":
      return StoredOutcome.Omitted({ reason: body })
    default:
      return undefined
  }
}

/**
 * A record as a store returns it. Times are epoch milliseconds of the clock the store uses.
 *
 * @since 0.1.0
 * @category models
 */
export interface IdempotencyRecord {
  readonly status: Status
  /** The fencing token of the attempt that holds (or last held) the reservation. */
  readonly token: string
  /** The fingerprint of the request that created the record. */
  readonly fingerprint: string
  /** 1 for the first reservation, incremented by every takeover. */
  readonly attempt: number
  /** Until when an IN_PROGRESS record blocks other attempts. */
  readonly leaseUntil: number
  /** When the record stops existing (treated as absent, then purged). */
  readonly expiresAt: number
  /** The recorded outcome of a COMPLETED record. */
  readonly outcome: StoredOutcome | undefined
}

/**
 * The result of a reservation: data, not an error.
 *
 * - `Reserved`: this attempt holds the record with `token`; it may call the downstream.
 * - `Existing`: a live record blocks the reservation. `now` is the store's clock at the decision.
 *
 * @since 0.1.0
 * @category models
 */
export type ReserveResult = Data.TaggedEnum<{
  Reserved: {
    readonly token: string
    readonly attempt: number
    readonly leaseUntil: number
    readonly expiresAt: number
  }
  Existing: { readonly record: IdempotencyRecord; readonly now: number }
}>

/**
 * Constructors and matchers of `ReserveResult`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const ReserveResult = Data.taggedEnum<ReserveResult>()

/**
 * Whether a record exists for the clock reading `now` (its `expiresAt` is still ahead).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isLive = (record: Pick<IdempotencyRecord, "expiresAt">, now: number): boolean => record.expiresAt > now

/**
 * Whether a reservation with `fingerprint` may take over a live record at `now`: a FAILED record,
 * or an IN_PROGRESS record whose lease ended (when `takeover` allows it), created by the same
 * request. Stores implement this same rule in their conditional write.
 *
 * @since 0.1.0
 * @category predicates
 */
export const canTakeOver = (
  record: Pick<IdempotencyRecord, "status" | "fingerprint" | "leaseUntil">,
  request: { readonly fingerprint: string; readonly takeover: boolean },
  now: number
): boolean =>
  record.fingerprint === request.fingerprint &&
  (record.status === "FAILED" || (record.status === "IN_PROGRESS" && request.takeover && record.leaseUntil <= now))
