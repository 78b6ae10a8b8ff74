/**
 * What the stores and the admin service share, apart from the service (which needs the store's tag).
 *
 * @internal
 */
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
