/**
 * The record a store keeps per scoped key, and its methods' data (README.md#records-leases-and-fencing).
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Schema from "effect/Schema"
import type { IdempotencyKey } from "./IdempotencyKey.js"
import { SEPARATOR } from "./IdempotencyKey.js"

/**
 * The identity of a record: operation, optional scope and key.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordId {
  readonly operation: string
  readonly scope: string | undefined
  readonly key: IdempotencyKey
  /** `operation#key` or `operation#scope#key`, the operation and the scope percent-encoded. */
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
 * A recorded outcome, as the store keeps it: JSON text of the encoded value or error, `Timeout`
 * (unknown, `markUnknown`), or `Omitted` (not kept, with a bounded `reason`).
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
 * A record as a store returns it; times are epoch milliseconds of the store's clock.
 *
 * @since 0.1.0
 * @category models
 */
export interface IdempotencyRecord {
  readonly status: Status
  readonly token: string
  readonly fingerprint: string
  /** 1, plus one per takeover. */
  readonly attempt: number
  readonly leaseUntil: number
  readonly expiresAt: number
  readonly outcome: StoredOutcome | undefined
}

/**
 * The result of a reservation: `Reserved` or `Existing`, data, not an error.
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
 * Whether a record exists for the clock reading `now`.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isLive = (record: Pick<IdempotencyRecord, "expiresAt">, now: number): boolean => record.expiresAt > now

/**
 * Whether a reservation with `fingerprint` may take over a live record at `now` (README.md#records-leases-and-fencing).
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
