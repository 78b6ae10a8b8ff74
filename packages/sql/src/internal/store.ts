import type { AdminStore, State, UnblockResult } from "@effect-idempotency/core/IdempotencyAdmin"
import { AdminTypeId, stateOf, unblockable } from "@effect-idempotency/core/IdempotencyAdmin"
import { LeaseLost, StoreError } from "@effect-idempotency/core/IdempotencyError"
import type { StoreFailure } from "@effect-idempotency/core/IdempotencyError"
import { SEPARATOR } from "@effect-idempotency/core/IdempotencyKey"
import type { IdempotencyRecord, RecordId } from "@effect-idempotency/core/IdempotencyRecord"
import { canTakeOver, outcomeToColumns, ReserveResult } from "@effect-idempotency/core/IdempotencyRecord"
import type { IdempotencyStore, ReserveRequest, TokenRequest } from "@effect-idempotency/core/IdempotencyStore"
import * as Tracing from "@effect-idempotency/core/Tracing"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Options, Statement, Statements } from "../SqlStoreKit.js"
import * as Detach from "./detach.js"
import { breaksLibsqlConnection, toStoreFailure } from "./errors.js"
import type { Decoded, ReserveRow } from "./rows.js"
import {
  isRow,
  listRowsOf,
  millis,
  nowAndRecordOf,
  ownedRowsOf,
  purgedRowsOf,
  purgeLimit,
  recordRowsOf,
  reserveRowOf,
  RowInvalid,
  statsRowsOf,
  unblockRowOf,
  wholeMillis
} from "./rows.js"

const BROKEN_CONNECTION = "the libSQL connection met SQLITE_BUSY, after which @libsql/client 0.12 answers writes " +
  "that never reach the file: every call of this store fails until the process opens a new client"

/** @internal */
export const DEFAULT_CALL_TIMEOUT: Duration.Duration = Duration.seconds(5)

const refusalOf = (state: State): "running" | "completed" | "omitted" =>
  state === "running" ? "running" : state === "omitted" ? "omitted" : "completed"

/** A concurrent write the DELETE waited for leaves its snapshot behind: the next run reads it. */
const UNBLOCK_ROUNDS = 3

const RESERVE_ROUNDS = 5

const slotted = (slots: ReadonlyArray<number>, args: ReadonlyArray<unknown>): Array<unknown> =>
  slots.map((index) => {
    const value = args[index]
    return typeof value === "boolean" ? (value ? 1 : 0) : value
  })

const affectedOf = (raw: unknown): number | RowInvalid => {
  if (isRow(raw)) {
    for (const field of ["affectedRows", "changes", "rowsAffected"]) {
      const n = raw[field]
      if (typeof n === "number" && Number.isSafeInteger(n)) return n
      if (typeof n === "bigint") return Number(n)
    }
  }
  return new RowInvalid("the driver did not report how many rows the statement changed")
}

const countRows = (column: string, n: number): ReadonlyArray<unknown> => n === 0 ? [] : [{ [column]: n }]

/** @internal */
export const sendOn = (sql: SqlClient.SqlClient, statement: Statement, args: ReadonlyArray<unknown>) => {
  const query = sql.unsafe(statement.text, statement.slots === undefined ? args : slotted(statement.slots, args))
  const affected = statement.affected
  if (affected !== undefined) {
    return Effect.map(query.raw, (raw) => {
      const n = affectedOf(raw)
      return n instanceof RowInvalid ? n : countRows(affected, n)
    })
  }
  const counted = statement.counted
  return counted === undefined
    ? query.withoutTransform
    : Effect.map(query.withoutTransform, (rows) => countRows(counted, rows.length))
}

interface Unblocking {
  readonly unblocked: boolean
  readonly now: number
  readonly record: Option.Option<IdempotencyRecord>
}

/** @internal */
export const make = (
  statements: Statements,
  options: Options
): Effect.Effect<IdempotencyStore["Type"], never, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const detach = Detach.make(options.callTimeout)
    // a libSQL connection that met SQLITE_BUSY: see the README's "libSQL files and other processes"
    let broken: StoreError | undefined
    const breaks = (method: string, error: unknown): Effect.Effect<void> => {
      if (broken !== undefined || !breaksLibsqlConnection(error)) return Effect.void
      broken = new StoreError({ method, cause: BROKEN_CONNECTION })
      return Effect.logError(`idempotency: ${BROKEN_CONNECTION}`)
    }

    const send = (statement: Statement, args: ReadonlyArray<unknown>) => sendOn(sql, statement, args)

    const query = <A>(
      method: string,
      decode: (rows: ReadonlyArray<unknown>) => Decoded<A>,
      statement: Statement,
      args: (now: number | null) => ReadonlyArray<unknown>
    ): Effect.Effect<A, StoreFailure> => {
      const sent = (now: number | null): Effect.Effect<A, StoreFailure> =>
        broken !== undefined ? Effect.fail(new StoreError({ method, cause: BROKEN_CONNECTION })) : Effect.matchEffect(
          detach(send(statement, args(now))),
          {
            onFailure: (error) => Effect.zipRight(breaks(method, error), Effect.fail(toStoreFailure(method)(error))),
            onSuccess: (rows) => {
              const decoded = rows instanceof RowInvalid ? rows : decode(rows)
              return decoded instanceof RowInvalid
                ? Effect.fail(new StoreError({ method, cause: decoded.message }))
                : Effect.succeed(decoded)
            }
          }
        )
      return options.clock === "effect" ? Effect.flatMap(Clock.currentTimeMillis, sent) : sent(null)
    }

    const method = <A, E>(name: string, effect: Effect.Effect<A, E>, id?: RecordId): Effect.Effect<A, E | StoreError> =>
      effect.pipe(
        Effect.catchAllDefect((cause) => Effect.fail(new StoreError({ method: name, cause }))),
        Tracing.withSpan(
          `${options.name}.${name}`,
          id === undefined
            ? { captureStackTrace: false }
            : { attributes: { "idempotency.operation": id.operation }, captureStackTrace: false }
        )
      )

    const owned = (
      name: LeaseLost["method"],
      statement: Statement,
      request: TokenRequest,
      args: ReadonlyArray<unknown>
    ): Effect.Effect<void, LeaseLost | StoreFailure> =>
      method(
        name,
        query(name, ownedRowsOf, statement, (now) => [now, request.id.value, request.token, ...args]).pipe(
          Effect.flatMap((owned) =>
            owned ? Effect.void : Effect.fail(new LeaseLost({ method: name, recordId: request.id.value }))
          )
        ),
        request.id
      )

    const reserveArgs = (request: ReserveRequest) => {
      const lease = millis(request.lease)
      const ttl = millis(request.ttl)
      return (now: number | null) => [
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
      ]
    }

    const reserveRow = (statement: Statement, request: ReserveRequest): Effect.Effect<ReserveResult, StoreFailure> =>
      query("reserve", (rows) => reserveRowOf(rows[0]), statement, reserveArgs(request)).pipe(
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

    const insertedRowsOf = (rows: ReadonlyArray<unknown>): Decoded<Option.Option<ReserveRow & { reserved: true }>> => {
      if (rows.length === 0) return Option.none()
      const row = reserveRowOf(rows[0])
      if (row instanceof RowInvalid) return row
      return row.reserved ? Option.some(row) : new RowInvalid("column reserved is not true")
    }

    const reserveRounds = (
      insert: Statement,
      read: Statement,
      request: ReserveRequest,
      round: number
    ): Effect.Effect<ReserveResult, StoreFailure> =>
      Effect.flatMap(
        query("reserve", insertedRowsOf, insert, reserveArgs(request)),
        (inserted): Effect.Effect<ReserveResult, StoreFailure> =>
          Option.isSome(inserted)
            ? Effect.succeed(ReserveResult.Reserved({
              token: request.token,
              attempt: inserted.value.attempt,
              leaseUntil: inserted.value.leaseUntil,
              expiresAt: inserted.value.expiresAt
            }))
            : Effect.flatMap(
              query("reserve", (rows) => nowAndRecordOf(rows[0]), read, (now) => [now, request.id.value]),
              ({ now, record }): Effect.Effect<ReserveResult, StoreFailure> => {
                if (Option.isSome(record) && !canTakeOver(record.value, request, now)) {
                  return Effect.succeed(ReserveResult.Existing({ record: record.value, now }))
                }
                return round < RESERVE_ROUNDS
                  ? reserveRounds(insert, read, request, round + 1)
                  : Effect.fail(
                    new StoreError({
                      method: "reserve",
                      cause:
                        `the reservation did not settle: the record changed during each of ${RESERVE_ROUNDS} rounds`
                    })
                  )
              }
            )
      )

    // the read-first choice: see the README's "SqlStoreKit"
    let metExisting = 0
    const reserveAdaptive = (insert: Statement, read: Statement, request: ReserveRequest) => {
      const result = metExisting > 0.5
        ? Effect.flatMap(
          query("reserve", (rows) => nowAndRecordOf(rows[0]), read, (now) => [now, request.id.value]),
          ({ now, record }): Effect.Effect<ReserveResult, StoreFailure> =>
            Option.isSome(record) && !canTakeOver(record.value, request, now)
              ? Effect.succeed(ReserveResult.Existing({ record: record.value, now }))
              : reserveRounds(insert, read, request, 1)
        )
        : reserveRounds(insert, read, request, 1)
      return Effect.tap(result, (reserved) => {
        metExisting = metExisting * (7 / 8) + (reserved._tag === "Existing" ? 1 / 8 : 0)
      })
    }

    const store: IdempotencyStore["Type"] = {
      reserve: (request) => {
        const reserve = statements.reserve
        return method(
          "reserve",
          reserve._tag === "Row"
            ? reserveRow(reserve.statement, request)
            : reserveAdaptive(reserve.insert, reserve.read, request),
          request.id
        )
      },

      complete: (request) => {
        const { body, kind } = outcomeToColumns(request.outcome)
        return owned("complete", statements.complete, request, [kind, body, millis(request.ttl)])
      },

      release: (request) => owned("release", statements.release, request, []),

      markFailed: (request) => owned("markFailed", statements.markFailed, request, [millis(request.ttl)]),

      extend: (request) => owned("extend", statements.extend, request, [millis(request.lease)]),

      get: (id) => method("get", query("get", recordRowsOf, statements.get, (now) => [now, id.value]), id),

      purgeExpired: (purgeOptions) => {
        const limit = purgeLimit(purgeOptions?.limit)
        return method(
          "purgeExpired",
          query("purgeExpired", purgedRowsOf, statements.purgeExpired, (now) => [now, limit])
        )
      }
    }

    const adminStatements = statements.admin
    if (adminStatements === undefined) return store

    const read = (recordId: string) =>
      query("read", (rows) => nowAndRecordOf(rows[0]), adminStatements.read, (now) => [now, recordId])

    const refusal = (
      request: { readonly recordId: string; readonly attempt: number },
      now: number,
      found: Option.Option<IdempotencyRecord>
    ): UnblockResult | undefined => {
      if (Option.isNone(found)) return { _tag: "Refused", reason: "absent" }
      const record = found.value
      if (record.attempt !== request.attempt) return { _tag: "Refused", reason: "changed", attempt: record.attempt }
      const state = stateOf(record, now)
      return unblockable.has(state) ? undefined : { _tag: "Refused", reason: refusalOf(state), attempt: record.attempt }
    }

    const unblockRound = (
      request: { readonly recordId: string; readonly attempt: number },
      round: number
    ): Effect.Effect<UnblockResult, StoreFailure> => {
      const unblock = adminStatements.unblock
      const args = (now: number | null) => [now, request.recordId, request.attempt]
      const answered: Effect.Effect<Unblocking, StoreFailure> = unblock._tag === "Row"
        ? query("unblock", unblockRowOf, unblock.statement, args)
        : Effect.flatMap(
          query("unblock", ownedRowsOf, unblock.statement, args),
          (unblocked): Effect.Effect<Unblocking, StoreFailure> =>
            unblocked
              ? Effect.succeed({ unblocked: true, now: 0, record: Option.none<IdempotencyRecord>() })
              : Effect.map(read(request.recordId), (row) => ({ unblocked: false, ...row }))
        )
      return Effect.flatMap(answered, (row): Effect.Effect<UnblockResult, StoreFailure> => {
        if (row.unblocked) return Effect.succeed({ _tag: "Unblocked" })
        const refused = refusal(request, row.now, row.record)
        if (refused !== undefined) return Effect.succeed(refused)
        return round < UNBLOCK_ROUNDS
          ? unblockRound(request, round + 1)
          : Effect.fail(
            new StoreError({ method: "unblock", cause: `the record changed during each of ${UNBLOCK_ROUNDS} rounds` })
          )
      })
    }

    const admin: AdminStore = {
      list: (request) => {
        const limit = Math.min(Math.max(1, Math.floor(request.limit)), 2 ** 31 - 2)
        return method(
          "list",
          query("list", listRowsOf, adminStatements.list, (now) => [
            now,
            request.cursor ?? null,
            request.operation === undefined ? null : encodeURIComponent(request.operation) + SEPARATOR,
            request.state ?? null,
            request.olderThanMillis === undefined ? null : wholeMillis(request.olderThanMillis),
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
      read: (recordId) => method("read", read(recordId)),
      unblock: (request) => method("unblock", unblockRound(request, 1)),
      stats: method("stats", query("stats", statsRowsOf, adminStatements.stats, (now) => [now]))
    }
    return Object.assign(store, { [AdminTypeId]: admin })
  })
