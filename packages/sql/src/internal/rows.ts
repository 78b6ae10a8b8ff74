import type { Count, State, StoredRecord } from "@effect-idempotency/core/IdempotencyAdmin"
import type { IdempotencyRecord, Status } from "@effect-idempotency/core/IdempotencyRecord"
import { outcomeFromColumns } from "@effect-idempotency/core/IdempotencyRecord"
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"

/** @internal */
export const DEFAULT_PURGE_LIMIT = 1000

/** Rows are decoded by hand: see the README's "SqlStoreKit", "Calls". */
export type Decoded<A> = A | RowInvalid

export class RowInvalid {
  constructor(readonly message: string) {}
}

const INTEGER = /^-?\d+$/

/** @internal */
export const int = (row: Readonly<Record<string, unknown>>, column: string): number | RowInvalid => {
  const value = row[column]
  const n = typeof value === "number"
    ? value
    : typeof value === "string" && INTEGER.test(value)
    ? Number(value)
    : typeof value === "bigint"
    ? Number(value)
    : Number.NaN
  return Number.isSafeInteger(n) ? n : new RowInvalid(`column ${column} is not a safe integer: ${String(value)}`)
}

const string = (row: Readonly<Record<string, unknown>>, column: string): string | RowInvalid => {
  const value = row[column]
  return typeof value === "string" ? value : new RowInvalid(`column ${column} is not text`)
}

const nullableString = (row: Readonly<Record<string, unknown>>, column: string): string | null | RowInvalid => {
  const value = row[column]
  return value === null || typeof value === "string" ? value : new RowInvalid(`column ${column} is not text`)
}

const STATUSES: ReadonlySet<unknown> = new Set<Status>(["IN_PROGRESS", "COMPLETED", "FAILED"])
const OUTCOME_KINDS: ReadonlySet<unknown> = new Set(["Success", "Failure", "Timeout", "Omitted"])

// libSQL's `intMode` may give numbers as strings
const isOne = (u: unknown): boolean => u === 1 || u === 1n || u === "1"

const isZero = (u: unknown): boolean => u === 0 || u === 0n || u === "0"

/** @internal */
export const isRow = (u: unknown): u is Readonly<Record<string, unknown>> => typeof u === "object" && u !== null

/** @internal */
export const recordOf = (row: Readonly<Record<string, unknown>>): Decoded<IdempotencyRecord> => {
  const status = row.status
  if (!STATUSES.has(status)) return new RowInvalid(`column status is not a status: ${String(status)}`)
  const token = string(row, "token")
  if (token instanceof RowInvalid) return token
  const fingerprint = string(row, "fingerprint")
  if (fingerprint instanceof RowInvalid) return fingerprint
  const attempt = int(row, "attempt")
  if (attempt instanceof RowInvalid) return attempt
  const leaseUntil = int(row, "lease_until")
  if (leaseUntil instanceof RowInvalid) return leaseUntil
  const expiresAt = int(row, "expires_at")
  if (expiresAt instanceof RowInvalid) return expiresAt
  const kind = row.outcome_kind
  if (kind !== null && !OUTCOME_KINDS.has(kind)) return new RowInvalid(`column outcome_kind is invalid`)
  const outcome = nullableString(row, "outcome")
  if (outcome instanceof RowInvalid) return outcome
  return {
    status: status as Status,
    token,
    fingerprint,
    attempt,
    leaseUntil,
    expiresAt,
    outcome: kind === null
      ? undefined
      : outcomeFromColumns(kind as "Success" | "Failure" | "Timeout" | "Omitted", outcome ?? "")
  }
}

export type ReserveRow =
  | { readonly reserved: true; readonly attempt: number; readonly leaseUntil: number; readonly expiresAt: number }
  | { readonly reserved: false; readonly record: IdempotencyRecord; readonly now: number }

/** @internal */
export const reserveRowOf = (row: unknown): Decoded<ReserveRow> => {
  if (!isRow(row)) return new RowInvalid("the reservation returned no row")
  if (row.reserved === true || isOne(row.reserved)) {
    const attempt = int(row, "attempt")
    if (attempt instanceof RowInvalid) return attempt
    const leaseUntil = int(row, "lease_until")
    if (leaseUntil instanceof RowInvalid) return leaseUntil
    const expiresAt = int(row, "expires_at")
    if (expiresAt instanceof RowInvalid) return expiresAt
    return { reserved: true, attempt, leaseUntil, expiresAt }
  }
  if (row.reserved !== false && !isZero(row.reserved)) return new RowInvalid("column reserved is not a boolean")
  const record = recordOf(row)
  if (record instanceof RowInvalid) return record
  const now = int(row, "now")
  if (now instanceof RowInvalid) return now
  return { reserved: false, record, now }
}

/** @internal */
export const recordRowsOf = (rows: ReadonlyArray<unknown>): Decoded<Option.Option<IdempotencyRecord>> => {
  const row = rows[0]
  if (row === undefined) return Option.none()
  if (!isRow(row)) return new RowInvalid("a row is not an object")
  const record = recordOf(row)
  return record instanceof RowInvalid ? record : Option.some(record)
}

/** @internal */
export const ownedRowsOf = (rows: ReadonlyArray<unknown>): Decoded<boolean> => {
  const row = rows[0]
  if (row === undefined) return false
  return isRow(row) && isOne(row.owned) ? true : new RowInvalid("column owned is not 1")
}

/** @internal */
export const purgedRowsOf = (rows: ReadonlyArray<unknown>): Decoded<number> => {
  const row = rows[0]
  if (row === undefined) return 0
  return isRow(row) ? int(row, "purged") : new RowInvalid("a row is not an object")
}

/** @internal */
export const nowAndRecordOf = (
  row: unknown
): Decoded<{ readonly now: number; readonly record: Option.Option<IdempotencyRecord> }> => {
  if (!isRow(row)) return new RowInvalid("the statement returned no row")
  const now = int(row, "now")
  if (now instanceof RowInvalid) return now
  if (row.status === null) return { now, record: Option.none() }
  const record = recordOf(row)
  return record instanceof RowInvalid ? record : { now, record: Option.some(record) }
}

/** @internal */
export const listRowsOf = (
  rows: ReadonlyArray<unknown>
): Decoded<{ readonly now: number; readonly records: ReadonlyArray<StoredRecord> }> => {
  const first = rows[0]
  if (!isRow(first)) return new RowInvalid("the statement returned no row")
  const now = int(first, "now")
  if (now instanceof RowInvalid) return now
  const records: Array<StoredRecord> = []
  for (const row of rows) {
    if (!isRow(row)) return new RowInvalid("a row is not an object")
    if (row.id === null) continue
    const recordId = string(row, "id")
    if (recordId instanceof RowInvalid) return recordId
    const record = recordOf(row)
    if (record instanceof RowInvalid) return record
    records.push({ recordId, record })
  }
  return { now, records }
}

/** @internal */
export const unblockRowOf = (
  rows: ReadonlyArray<unknown>
): Decoded<
  { readonly unblocked: boolean; readonly now: number; readonly record: Option.Option<IdempotencyRecord> }
> => {
  const row = rows[0]
  if (!isRow(row) || typeof row.unblocked !== "boolean") return new RowInvalid("column unblocked is not a boolean")
  const read = nowAndRecordOf(row)
  return read instanceof RowInvalid ? read : { unblocked: row.unblocked, ...read }
}

const STATES: ReadonlySet<unknown> = new Set<State>(["running", "stuck", "completed", "unknown", "omitted", "failed"])

/** @internal */
export const statsRowsOf = (rows: ReadonlyArray<unknown>): Decoded<ReadonlyArray<Count>> => {
  const counts: Array<Count> = []
  for (const row of rows) {
    if (!isRow(row)) return new RowInvalid("a row is not an object")
    const operation = string(row, "operation")
    if (operation instanceof RowInvalid) return operation
    if (!STATES.has(row.state)) return new RowInvalid(`column state is not a state: ${String(row.state)}`)
    const count = int(row, "count")
    if (count instanceof RowInvalid) return count
    counts.push({ operation, state: row.state as State, count })
  }
  return counts
}

const MAX_MILLIS = 2 ** 52

/** @internal */
export const millis = (duration: Duration.Duration): number =>
  Math.min(Math.ceil(Duration.toMillis(duration)), MAX_MILLIS)

/** @internal */
export const wholeMillis = (ms: number): number => Math.min(Math.ceil(ms), MAX_MILLIS)

/** @internal */
export const purgeLimit = (limit: number | undefined): number =>
  limit === undefined || Number.isNaN(limit)
    ? DEFAULT_PURGE_LIMIT
    : Math.min(Math.max(0, Math.floor(limit)), 2 ** 31 - 1)
