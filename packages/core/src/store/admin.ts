// The admin primitives a store implements, and the helpers it reads records with; `IdempotencyAdmin` re-exports them.
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { StoreFailure } from "../IdempotencyError.js"
import { SEPARATOR } from "../IdempotencyKey.js"
import type { IdempotencyRecord } from "../IdempotencyRecord.js"

/**
 * @since 0.1.0
 * @category symbols
 */
export const AdminTypeId: unique symbol = Symbol.for("@effect-idempotency/core/IdempotencyAdmin/AdminStore")

/**
 * @since 0.1.0
 * @category models
 */
export type State = "running" | "stuck" | "completed" | "unknown" | "omitted" | "failed"

/**
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
 * @since 0.1.0
 * @category utils
 */
export const unblockable: ReadonlySet<State> = new Set<State>(["stuck", "unknown", "failed"])

/**
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
 * @since 0.1.0
 * @category models
 */
export interface Count {
  readonly operation: string
  readonly state: State
  readonly count: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface StoredRecord {
  readonly recordId: string
  readonly record: IdempotencyRecord
}

/**
 * @since 0.1.0
 * @category models
 */
export type UnblockResult =
  | { readonly _tag: "Unblocked" }
  | { readonly _tag: "Refused"; readonly reason: typeof Refusal.Type; readonly attempt?: number | undefined }

/**
 * @since 0.1.0
 * @category models
 */
export interface AdminStore {
  /** A store that cannot filter on its side may return fewer than `limit` records before the end. */
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
  readonly read: (
    recordId: string
  ) => Effect.Effect<{ readonly record: Option.Option<IdempotencyRecord>; readonly now: number }, StoreFailure>
  /** One atomic conditional write (README.md#admin). */
  readonly unblock: (
    request: { readonly recordId: string; readonly attempt: number }
  ) => Effect.Effect<UnblockResult, StoreFailure>
  readonly stats: Effect.Effect<ReadonlyArray<Count>, StoreFailure>
}
