import type { AdminStore, Count, State, StoredRecord, UnblockResult } from "@effect-idempotency/core/IdempotencyAdmin"
import { AdminTypeId, stateOf, unblockable } from "@effect-idempotency/core/IdempotencyAdmin"
import { LeaseLost, StoreError } from "@effect-idempotency/core/IdempotencyError"
import type { StoreFailure } from "@effect-idempotency/core/IdempotencyError"
import { SEPARATOR } from "@effect-idempotency/core/IdempotencyKey"
import type { IdempotencyRecord, RecordId } from "@effect-idempotency/core/IdempotencyRecord"
import type { Status } from "@effect-idempotency/core/IdempotencyRecord"
import { outcomeFromColumns, outcomeToColumns, ReserveResult } from "@effect-idempotency/core/IdempotencyRecord"
import type { ClockSource, IdempotencyStore, TokenRequest } from "@effect-idempotency/core/IdempotencyStore"
import * as Tracing from "@effect-idempotency/core/Tracing"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { IdempotencyTable } from "../PgIdempotencyTable.js"
import * as Detach from "./detach.js"
import { toStoreFailure } from "./errors.js"
import * as Statements from "./statements.js"

/** @internal */
export interface StoreOptions {
  readonly clock: ClockSource
  /** The most one statement may take before its caller gets `StoreUnavailable`. */
  readonly callTimeout: Duration.Duration
}

/** @internal */
export const DEFAULT_PURGE_LIMIT = 1000

/** @internal */
export const DEFAULT_CALL_TIMEOUT: Duration.Duration = Duration.seconds(5)

/**
 * Rows decoded by hand: each statement's columns are few and fixed, and a generic decoder (a
 * Schema over the row array) costs more per call than the statement's round trip on a fast
 * server. A row that does not have the promised shape yields a message, which becomes a
 * `StoreError`.
 */
/** @internal */
export type Decoded<A> = A | RowInvalid

/**
 * Why a row did not decode.
 *
 * @internal
 */
export class RowInvalid {
  constructor(readonly message: string) {}
}

const INTEGER = /^-?\d+$/

/** bigint columns arrive as strings from `pg` (as numbers or bigints with custom type parsers). */
const int = (row: Readonly<Record<string, unknown>>, column: string): number | RowInvalid => {
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

const isRow = (u: unknown): u is Readonly<Record<string, unknown>> => typeof u === "object" && u !== null

/** The record of a row with the record's columns. */
const recordOf = (row: Readonly<Record<string, unknown>>): Decoded<IdempotencyRecord> => {
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

/**
 * The answer of the reservation function: reserved, or the existing record and the instant of the decision.
 *
 * @internal
 */
export type ReserveRow =
  | { readonly reserved: true; readonly attempt: number; readonly leaseUntil: number; readonly expiresAt: number }
  | { readonly reserved: false; readonly record: IdempotencyRecord; readonly now: number }

/** @internal */
export const reserveRowOf = (row: unknown): Decoded<ReserveRow> => {
  if (!isRow(row)) return new RowInvalid("the reservation returned no row")
  if (row.reserved === true) {
    const attempt = int(row, "attempt")
    if (attempt instanceof RowInvalid) return attempt
    const leaseUntil = int(row, "lease_until")
    if (leaseUntil instanceof RowInvalid) return leaseUntil
    const expiresAt = int(row, "expires_at")
    if (expiresAt instanceof RowInvalid) return expiresAt
    return { reserved: true, attempt, leaseUntil, expiresAt }
  }
  if (row.reserved !== false) return new RowInvalid("column reserved is not a boolean")
  const record = recordOf(row)
  if (record instanceof RowInvalid) return record
  const now = int(row, "now")
  if (now instanceof RowInvalid) return now
  return { reserved: false, record, now }
}

/** At most one record, read by `get`. */
const recordRowsOf = (rows: ReadonlyArray<unknown>): Decoded<Option.Option<IdempotencyRecord>> => {
  const row = rows[0]
  if (row === undefined) return Option.none()
  if (!isRow(row)) return new RowInvalid("a row is not an object")
  const record = recordOf(row)
  return record instanceof RowInvalid ? record : Option.some(record)
}

/**
 * Whether a token-checked write matched its record: one row `owned = 1`, or none.
 *
 * @internal
 */
export const ownedRowsOf = (rows: ReadonlyArray<unknown>): Decoded<boolean> => {
  const row = rows[0]
  if (row === undefined) return false
  return isRow(row) && row.owned === 1 ? true : new RowInvalid("column owned is not 1")
}

const purgedRowsOf = (rows: ReadonlyArray<unknown>): Decoded<number> => {
  const row = rows[0]
  if (row === undefined) return 0
  return isRow(row) ? int(row, "purged") : new RowInvalid("a row is not an object")
}

/** A row of the admin's statements: `now`, and the record's columns, NULL when there is no record. */
const nowAndRecordOf = (
  row: unknown
): Decoded<{ readonly now: number; readonly record: Option.Option<IdempotencyRecord> }> => {
  if (!isRow(row)) return new RowInvalid("the statement returned no row")
  const now = int(row, "now")
  if (now instanceof RowInvalid) return now
  if (row.status === null) return { now, record: Option.none() }
  const record = recordOf(row)
  return record instanceof RowInvalid ? record : { now, record: Option.some(record) }
}

const listRowsOf = (
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

const unblockRowOf = (
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

const statsRowsOf = (rows: ReadonlyArray<unknown>): Decoded<ReadonlyArray<Count>> => {
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

/** Why `unblock` did not delete a record in `state`. */
const refusalOf = (state: State): "running" | "completed" | "omitted" =>
  state === "running" ? "running" : state === "omitted" ? "omitted" : "completed"

/**
 * How many times `unblock` runs its statement when the record it read does not explain why the
 * DELETE left it: a concurrent write changed the record while the DELETE waited for it, so the
 * statement's snapshot is behind; the next run reads that write.
 */
const UNBLOCK_ROUNDS = 3

/** The longest duration kept (about 142,000 years): `now + d` stays a safe integer. */
const MAX_MILLIS = 2 ** 52

/**
 * Durations as whole milliseconds, rounded up; an infinite duration is the far future.
 *
 * @internal
 */
export const millis = (duration: Duration.Duration): number =>
  Math.min(Math.ceil(Duration.toMillis(duration)), MAX_MILLIS)

/** Milliseconds as a whole number for `now - ms`, rounded up, at most `MAX_MILLIS`. */
const wholeMillis = (ms: number): number => Math.min(Math.ceil(ms), MAX_MILLIS)

/** A batch size for `LIMIT`: a whole number from 0 to 2^31 - 1. */
const purgeLimit = (limit: number | undefined): number =>
  limit === undefined || Number.isNaN(limit)
    ? DEFAULT_PURGE_LIMIT
    : Math.min(Math.max(0, Math.floor(limit)), 2 ** 31 - 1)

/**
 * Builds a store over a validated table.
 *
 * @internal
 */
export const make = (
  table: IdempotencyTable,
  options: StoreOptions
): Effect.Effect<IdempotencyStore["Type"], never, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const statements = Statements.make(table)
    const detach = Detach.make(options.callTimeout)

    /**
     * A statement and its rows decoded, every failure typed: one step of the runtime for the
     * statement's answer, whichever way it ends. `$1` of every statement is the fiber's clock, or
     * NULL for the database's clock.
     */
    const query = <A>(
      method: string,
      decode: (rows: ReadonlyArray<unknown>) => Decoded<A>,
      text: string,
      params: (now: number | null) => ReadonlyArray<unknown>
    ): Effect.Effect<A, StoreFailure> => {
      const sent = (now: number | null) =>
        Effect.matchEffect(detach(sql.unsafe(text, params(now)).withoutTransform), {
          onFailure: (error) => Effect.fail(toStoreFailure(method)(error)),
          onSuccess: (rows) => {
            const decoded = decode(rows)
            return decoded instanceof RowInvalid
              ? Effect.fail(new StoreError({ method, cause: decoded.message }))
              : Effect.succeed(decoded)
          }
        })
      return options.clock === "effect" ? Effect.flatMap(Clock.currentTimeMillis, sent) : sent(null)
    }

    /**
     * Every method: failures typed, defects of the driver turned into `StoreError`, one span
     * (without a stack trace: capturing one costs more than the rest of the span).
     */
    const method = <A, E>(name: string, effect: Effect.Effect<A, E>, id?: RecordId): Effect.Effect<A, E | StoreError> =>
      effect.pipe(
        Effect.catchAllDefect((cause) => Effect.fail(new StoreError({ method: name, cause }))),
        Tracing.withSpan(
          `PgIdempotencyStore.${name}`,
          id === undefined
            ? { captureStackTrace: false }
            : { attributes: { "idempotency.operation": id.operation }, captureStackTrace: false }
        )
      )

    const owned = (
      name: LeaseLost["method"],
      text: string,
      request: TokenRequest,
      params: ReadonlyArray<unknown>
    ): Effect.Effect<void, LeaseLost | StoreFailure> =>
      method(
        name,
        query(name, ownedRowsOf, text, (now) => [now, request.id.value, request.token, ...params]).pipe(
          Effect.flatMap((owned) =>
            owned ? Effect.void : Effect.fail(new LeaseLost({ method: name, recordId: request.id.value }))
          )
        ),
        request.id
      )

    const store: IdempotencyStore["Type"] = {
      reserve: (request) => {
        const lease = millis(request.lease)
        const ttl = millis(request.ttl)
        // the function answers with exactly one row
        const reserve = query("reserve", (rows) => reserveRowOf(rows[0]), statements.reserve, (now) => [
          now,
          request.id.value,
          request.id.operation,
          request.id.scope ?? null,
          request.id.key,
          request.token,
          request.fingerprint,
          lease,
          ttl,
          request.takeover
        ]).pipe(
          Effect.map((row) =>
            row.reserved
              ? ReserveResult.Reserved({
                token: request.token,
                attempt: row.attempt,
                leaseUntil: row.leaseUntil,
                expiresAt: row.expiresAt
              })
              : ReserveResult.Existing({ record: row.record, now: row.now })
          )
        )
        return method("reserve", reserve, request.id)
      },

      complete: (request) => {
        const { body, kind } = outcomeToColumns(request.outcome)
        return owned("complete", statements.complete, request, [kind, body, millis(request.ttl)])
      },

      release: (request) => owned("release", statements.release, request, []),

      markFailed: (request) => owned("markFailed", statements.markFailed, request, [millis(request.ttl)]),

      extend: (request) => owned("extend", statements.extend, request, [millis(request.lease)]),

      get: (id) =>
        method(
          "get",
          query("get", recordRowsOf, statements.get, (now) => [now, id.value]),
          id
        ),

      purgeExpired: (purgeOptions) => {
        const limit = purgeLimit(purgeOptions?.limit)
        return method(
          "purgeExpired",
          query("purgeExpired", purgedRowsOf, statements.purgeExpired, (now) => [now, limit])
        )
      }
    }

    const unblockRound = (
      request: { readonly recordId: string; readonly attempt: number },
      round: number
    ): Effect.Effect<UnblockResult, StoreFailure> =>
      Effect.flatMap(
        query("unblock", unblockRowOf, statements.unblock, (now) => [now, request.recordId, request.attempt]),
        (row): Effect.Effect<UnblockResult, StoreFailure> => {
          if (row.unblocked) return Effect.succeed({ _tag: "Unblocked" })
          if (Option.isNone(row.record)) return Effect.succeed({ _tag: "Refused", reason: "absent" })
          const record = row.record.value
          if (record.attempt !== request.attempt) {
            return Effect.succeed({ _tag: "Refused", reason: "changed", attempt: record.attempt })
          }
          const state = stateOf(record, row.now)
          if (!unblockable.has(state)) {
            return Effect.succeed({ _tag: "Refused", reason: refusalOf(state), attempt: record.attempt })
          }
          return round < UNBLOCK_ROUNDS
            ? unblockRound(request, round + 1)
            : Effect.fail(
              new StoreError({ method: "unblock", cause: `the record changed during each of ${UNBLOCK_ROUNDS} rounds` })
            )
        }
      )

    const admin: AdminStore = {
      list: (request) => {
        const limit = Math.min(Math.max(1, Math.floor(request.limit)), 2 ** 31 - 2)
        return method(
          "list",
          query("list", listRowsOf, statements.list, (now) => [
            now,
            request.cursor ?? null,
            request.operation === undefined ? null : encodeURIComponent(request.operation) + SEPARATOR,
            request.state ?? null,
            request.olderThanMillis === undefined ? null : wholeMillis(request.olderThanMillis),
            // one more than the page: whether the listing goes on
            limit + 1
          ]).pipe(
            Effect.map(({ now, records }) =>
              records.length > limit
                ? { now, records: records.slice(0, limit), cursor: records[limit - 1]!.recordId }
                : { now, records, cursor: undefined }
            )
          )
        )
      },
      read: (recordId) =>
        method("read", query("read", (rows) => nowAndRecordOf(rows[0]), statements.read, (now) => [now, recordId])),
      unblock: (request) => method("unblock", unblockRound(request, 1)),
      stats: method("stats", query("stats", statsRowsOf, statements.stats, (now) => [now]))
    }
    return Object.assign(store, { [AdminTypeId]: admin })
  })
