import { LeaseLost, StoreError } from "@effect-idempotency/core/IdempotencyError"
import type { StoreFailure } from "@effect-idempotency/core/IdempotencyError"
import type { IdempotencyRecord, RecordId } from "@effect-idempotency/core/IdempotencyRecord"
import { outcomeFromColumns, outcomeToColumns, ReserveResult, Status } from "@effect-idempotency/core/IdempotencyRecord"
import type { ClockSource, IdempotencyStore, TokenRequest } from "@effect-idempotency/core/IdempotencyStore"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
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

/** bigint columns arrive as strings from `pg` (as numbers or bigints with custom type parsers). */
const Int = Schema.Union(
  Schema.Int,
  Schema.compose(Schema.NumberFromString, Schema.Int),
  Schema.transform(Schema.BigIntFromSelf, Schema.Int, {
    strict: true,
    decode: (n) => Number(n),
    encode: (n) => BigInt(n)
  })
)

const OutcomeKind = Schema.Literal("Success", "Failure", "Timeout", "Omitted")

const recordFields = {
  status: Status,
  token: Schema.String,
  fingerprint: Schema.String,
  attempt: Int,
  lease_until: Int,
  expires_at: Int,
  outcome_kind: Schema.NullOr(OutcomeKind),
  outcome: Schema.NullOr(Schema.String)
}

const RecordRow = Schema.Struct(recordFields)

const ReserveRow = Schema.Union(
  Schema.Struct({
    reserved: Schema.Literal(true),
    attempt: Int,
    lease_until: Int,
    expires_at: Int
  }),
  Schema.Struct({ reserved: Schema.Literal(false), ...recordFields, now: Int })
)

const OwnedRow = Schema.Struct({ owned: Schema.Literal(1) })

const PurgedRow = Schema.Struct({ purged: Int })

/** A decoder of a statement's rows, compiled once: building the array schema per call costs more than the decoding. */
const rowsDecoder = <A, I>(schema: Schema.Schema<A, I>) => Schema.decodeUnknown(Schema.Array(schema))

const decodeRecordRows = rowsDecoder(RecordRow)
const decodeReserveRows = rowsDecoder(ReserveRow)
const decodeOwnedRows = rowsDecoder(OwnedRow)
const decodePurgedRows = rowsDecoder(PurgedRow)

const toRecord = (row: typeof RecordRow.Type): IdempotencyRecord => ({
  status: row.status,
  token: row.token,
  fingerprint: row.fingerprint,
  attempt: row.attempt,
  leaseUntil: row.lease_until,
  expiresAt: row.expires_at,
  outcome: row.outcome_kind === null ? undefined : outcomeFromColumns(row.outcome_kind, row.outcome ?? "")
})

/** The longest duration kept (about 142,000 years): `now + d` stays a safe integer. */
const MAX_MILLIS = 2 ** 52

/** Durations as whole milliseconds, rounded up; an infinite duration is the far future. */
const millis = (duration: Duration.Duration): number => Math.min(Math.ceil(Duration.toMillis(duration)), MAX_MILLIS)

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

    /** `$1` of every statement: the fiber's clock, or NULL for the database's clock. */
    const now: Effect.Effect<number | null> = options.clock === "effect"
      ? Clock.currentTimeMillis
      : Effect.succeed(null)

    const query = <A>(
      method: string,
      decode: (rows: unknown) => Effect.Effect<ReadonlyArray<A>, ParseResult.ParseError>,
      text: string,
      params: (now: number | null) => ReadonlyArray<unknown>
    ): Effect.Effect<ReadonlyArray<A>, StoreFailure> =>
      now.pipe(
        Effect.flatMap((now) => detach(sql.unsafe(text, params(now)).withoutTransform)),
        Effect.flatMap(decode),
        Effect.mapError(toStoreFailure(method))
      )

    /**
     * Every method: failures typed, defects of the driver turned into `StoreError`, one span
     * (without a stack trace: capturing one costs more than the rest of the span).
     */
    const method = <A, E>(name: string, effect: Effect.Effect<A, E>, id?: RecordId): Effect.Effect<A, E | StoreError> =>
      effect.pipe(
        Effect.catchAllDefect((cause) => Effect.fail(new StoreError({ method: name, cause }))),
        Effect.withSpan(
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
        query(name, decodeOwnedRows, text, (now) => [now, request.id.value, request.token, ...params]).pipe(
          Effect.flatMap((rows) =>
            rows.length === 0 ? Effect.fail(new LeaseLost({ method: name, recordId: request.id.value })) : Effect.void
          )
        ),
        request.id
      )

    const store: IdempotencyStore["Type"] = {
      reserve: (request) => {
        const lease = millis(request.lease)
        const ttl = millis(request.ttl)
        const reserve = query("reserve", decodeReserveRows, statements.reserve, (now) => [
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
          Effect.flatMap((rows) => {
            const row = rows[0]
            // the function answers with exactly one row
            if (row === undefined) {
              return Effect.fail(
                new StoreError({ method: "reserve", cause: "the reservation function returned no row" })
              )
            }
            return Effect.succeed(
              row.reserved
                ? ReserveResult.Reserved({
                  token: request.token,
                  attempt: row.attempt,
                  leaseUntil: row.lease_until,
                  expiresAt: row.expires_at
                })
                : ReserveResult.Existing({ record: toRecord(row), now: row.now })
            )
          })
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
          query("get", decodeRecordRows, statements.get, (now) => [now, id.value]).pipe(
            Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRecord))
          ),
          id
        ),

      purgeExpired: (purgeOptions) => {
        const limit = purgeLimit(purgeOptions?.limit)
        return method(
          "purgeExpired",
          query("purgeExpired", decodePurgedRows, statements.purgeExpired, (now) => [now, limit]).pipe(
            Effect.map((rows) => rows[0]?.purged ?? 0)
          )
        )
      }
    }
    return store
  })
