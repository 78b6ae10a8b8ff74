/**
 * What the stores and the admin service share, apart from the service (which needs the store's
 * tag): the primitives a store implements for the admin (`AdminStore`, kept under `AdminTypeId`)
 * and the helpers it reads records with. The public names are `IdempotencyAdmin`'s, which
 * re-exports them.
 */
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { StoreFailure } from "../IdempotencyError.js"
import { SEPARATOR } from "../IdempotencyKey.js"
import type { IdempotencyRecord } from "../IdempotencyRecord.js"

/**
 * Where a store keeps its admin primitives.
 *
 * @since 0.1.0
 * @category symbols
 */
export const AdminTypeId: unique symbol = Symbol.for("@effect-idempotency/core/IdempotencyAdmin/AdminStore")

/**
 * What a record is doing, as an operator sees it.
 *
 * @since 0.1.0
 * @category models
 */
export type State = "running" | "stuck" | "completed" | "unknown" | "omitted" | "failed"

/**
 * The state of `record` at `now` (the store's clock).
 *
 * @since 0.1.0
 * @category utils
 */
export const stateOf = (record: Pick<IdempotencyRecord, "status" | "leaseUntil" | "outcome">, now: number): State => {
  switch (record.status) {
    case "IN_PROGRESS":
      return record.leaseUntil <= now ? "stuck" : "running"
    case "FAILED":
      return "failed"
    case "COMPLETED":
      return record.outcome?._tag === "Timeout"
        ? "unknown"
        : record.outcome?._tag === "Omitted"
        ? "omitted"
        : "completed"
  }
}

/**
 * The states `unblock` deletes: nothing runs for them, and no outcome a retry could replay is lost.
 *
 * @since 0.1.0
 * @category utils
 */
export const unblockable: ReadonlySet<State> = new Set<State>(["stuck", "unknown", "failed"])

/**
 * The parts of a store id: `operation#key` or `operation#scope#key`, the operation and the scope
 * percent-encoded (see `IdempotencyRecord.RecordId`).
 *
 * @since 0.1.0
 * @category utils
 */
export const parseRecordId = (
  recordId: string
): { readonly operation: string; readonly scope: string | undefined; readonly key: string } => {
  const parts = recordId.split(SEPARATOR)
  const decode = (part: string) => {
    try {
      return decodeURIComponent(part)
    } catch {
      return part
    }
  }
  return parts.length >= 3
    ? { operation: decode(parts[0]!), scope: decode(parts[1]!), key: parts.slice(2).join(SEPARATOR) }
    : { operation: decode(parts[0]!), scope: undefined, key: parts.slice(1).join(SEPARATOR) }
}

/**
 * Why `unblock` left a record alone (`UnblockRefused`'s `reason`).
 *
 * @since 0.1.0
 * @category models
 */
export const Refusal = Schema.Literal("absent", "changed", "running", "completed", "omitted")

/**
 * The count of records of an operation in a state.
 *
 * @since 0.1.0
 * @category models
 */
export interface Count {
  readonly operation: string
  readonly state: State
  readonly count: number
}

/**
 * A listed record: its store id and the record.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoredRecord {
  readonly recordId: string
  readonly record: IdempotencyRecord
}

/**
 * What a store's `unblock` did.
 *
 * @since 0.1.0
 * @category models
 */
export type UnblockResult =
  | { readonly _tag: "Unblocked" }
  | { readonly _tag: "Refused"; readonly reason: typeof Refusal.Type; readonly attempt?: number | undefined }

/**
 * What a store implements for the admin service. Times are the store's clock.
 *
 * @since 0.1.0
 * @category models
 */
export interface AdminStore {
  /**
   * A page of records in the order of their ids, after `cursor` (an id), filtered: by state, by
   * operation, by a lease that ended at or before `leaseEndedBy` (`now - olderThan`). A store that
   * cannot filter on its side filters what it reads; a page may then hold fewer than `limit`
   * records while `cursor` is not at the end.
   */
  readonly list: (query: {
    readonly state: State | undefined
    readonly operation: string | undefined
    readonly olderThanMillis: number | undefined
    readonly limit: number
    readonly cursor: string | undefined
  }) => Effect.Effect<
    { readonly records: ReadonlyArray<StoredRecord>; readonly now: number; readonly cursor: string | undefined },
    StoreFailure
  >
  /** Reads a record with the store's clock. */
  readonly read: (
    recordId: string
  ) => Effect.Effect<{ readonly record: Option.Option<IdempotencyRecord>; readonly now: number }, StoreFailure>
  /**
   * Deletes the record in one atomic conditional write, only while its attempt is `attempt` and its
   * state is one of `unblockable`; otherwise says why not.
   */
  readonly unblock: (
    request: { readonly recordId: string; readonly attempt: number }
  ) => Effect.Effect<UnblockResult, StoreFailure>
  /** Counts of live records by operation and state. */
  readonly stats: Effect.Effect<ReadonlyArray<Count>, StoreFailure>
}
