/**
 * The transactional mode's runner: its guarantees are in the READMEs' "Transactional mode" sections.
 */
import * as Attempt from "@effect-idempotency/core/Attempt"
import type { Request, Result } from "@effect-idempotency/core/Idempotency"
import { fingerprintOf, instrumented, retryOnConflict } from "@effect-idempotency/core/Idempotency"
import * as IdempotencyContext from "@effect-idempotency/core/IdempotencyContext"
import type { IdempotencyError, InvalidPayload } from "@effect-idempotency/core/IdempotencyError"
import {
  DownstreamTimeout,
  IdempotencyConflict,
  LeaseLost,
  OutcomeNotReplayable,
  StoreError,
  StoreUnavailable
} from "@effect-idempotency/core/IdempotencyError"
import type { StoreFailure } from "@effect-idempotency/core/IdempotencyError"
import * as IdempotencyKey from "@effect-idempotency/core/IdempotencyKey"
import type { FailurePolicy, InProgressPolicy, TimeoutPolicy } from "@effect-idempotency/core/IdempotencyPolicy"
import type { IdempotencyRecord, StoredOutcome } from "@effect-idempotency/core/IdempotencyRecord"
import { makeRecordId, outcomeToColumns } from "@effect-idempotency/core/IdempotencyRecord"
import * as OutcomeCodec from "@effect-idempotency/core/OutcomeCodec"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { SqlErrorTypeId } from "@effect/sql/SqlError"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import type {
  Reserve,
  Statement,
  TransactionalOperation,
  TransactionalOptions,
  TransactionalStatements
} from "../SqlStoreKit.js"
import { isNoTransactions, toStoreFailure, TransactionsUnsupported } from "./errors.js"
import type { ReserveRow } from "./rows.js"
import { millis, nowAndRecordOf as readRowOf, ownedRowsOf, reserveRowOf, RowInvalid } from "./rows.js"
import { sendOn } from "./store.js"

/** @internal */
export interface Definition<P, A, E, R> {
  readonly name: string
  readonly statements: (sql: SqlClient.SqlClient) => Effect.Effect<TransactionalStatements, StoreFailure>
  readonly fingerprint: (payload: P) => Effect.Effect<string, InvalidPayload>
  readonly codec: OutcomeCodec.OutcomeCodec<A, unknown>
  readonly failurePolicy: (error: E) => FailurePolicy
  /** A failure may be recorded: the downstream runs in a savepoint, so the record commits without its writes. */
  readonly savepoint: boolean
  readonly ttl: Duration.Duration
  readonly timeout: Duration.Duration
  readonly margin: Duration.Duration
  readonly inProgress: InProgressPolicy | undefined
  readonly onTimeout: TimeoutPolicy
  readonly key: IdempotencyKey.Options | undefined
  readonly execute: (payload: P) => Effect.Effect<A, E, R>
}

// a name of the library's own: the downstream's `sql.withTransaction` nests `effect_sql_<n>` beside it
const SAVEPOINT: Statement = { text: "SAVEPOINT effect_idempotency_downstream" }

const ROLLBACK_TO_SAVEPOINT: Statement = { text: "ROLLBACK TO SAVEPOINT effect_idempotency_downstream" }

const DEADLINE_PASSED = "no answer before the attempt's deadline"

const deadlinePassed = (method: string) => new StoreUnavailable({ method, cause: DEADLINE_PASSED })

const isSqlError = (u: unknown): u is SqlError => Predicate.hasProperty(u, SqlErrorTypeId)

const hasCode = (codes: ReadonlySet<string>) => (error: unknown): boolean => {
  const cause = Predicate.hasProperty(error, "cause") ? error.cause : undefined
  return Predicate.hasProperty(cause, "code") && typeof cause.code === "string" && codes.has(cause.code)
}

const hasErrno = (errnos: ReadonlySet<number>) => (error: unknown): boolean => {
  const cause = Predicate.hasProperty(error, "cause") ? error.cause : undefined
  return Predicate.hasProperty(cause, "errno") && typeof cause.errno === "number" && errnos.has(cause.errno)
}

/** @internal */
export const isLockWaitEnded = {
  pg: hasCode(new Set(["55P03", "57014"])),
  // lock wait timeout, deadlock, max_statement_time: by number, as older mysql2 does not name 1969
  mariadb: hasErrno(new Set([1205, 1213, 1969])),
  sqlite: hasCode(new Set(["SQLITE_BUSY", "SQLITE_BUSY_SNAPSHOT", "SQLITE_BUSY_TIMEOUT"]))
} as const

type Committed<A> =
  | { readonly _tag: "Existing"; readonly record: IdempotencyRecord; readonly now: number }
  | { readonly _tag: "Done"; readonly result: Result<A> }
  | { readonly _tag: "Failed"; readonly cause: Cause.Cause<unknown> }

/** The downstream's exit, carried as data through the rollback: never taken for the connection's. */
class RolledBack {
  readonly _tag = "RolledBack"
  constructor(readonly cause: Cause.Cause<unknown>) {}
}

/** @internal */
export const makeRunner = <P, A, E, R>(def: Definition<P, A, E, R>) => {
  const name = def.name
  const ttlMs = millis(def.ttl)
  // read first: a completed record never changes until it expires, as the transaction would see it
  let metExisting = 0
  const noted = (existing: boolean) => {
    metExisting = metExisting * (7 / 8) + (existing ? 1 / 8 : 0)
  }

  const runDetailed = (
    request: Request<P>
  ): Effect.Effect<Result<A>, E | IdempotencyError, R | SqlClient.SqlClient> =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const statements = yield* def.statements(sql)
      const key = yield* IdempotencyKey.decode(request.key, def.key)
      const fingerprint = yield* def.fingerprint(request.payload)
      const id = makeRecordId({ operation: name, key, scope: request.scope })
      const start = yield* Clock.currentTimeMillis
      const { end, timeoutMillis: timeoutMs, until } = yield* Attempt.window({
        operation: name,
        request,
        timeout: def.timeout,
        margin: def.margin,
        now: start
      })
      if (timeoutMs <= 0) {
        return yield* Effect.fail(
          new DownstreamTimeout({ operation: name, key, timeoutMillis: 0, policy: "release", replayed: false })
        )
      }
      const timedOut = () =>
        new DownstreamTimeout({
          operation: name,
          key: id.key,
          timeoutMillis: timeoutMs,
          policy: "release",
          replayed: false,
          rolledBack: true
        })

      const conflict = (retryAfterMillis: number) =>
        new IdempotencyConflict({ operation: name, key, retryAfterMillis: Math.max(0, retryAfterMillis) })

      const statement = <F = StoreFailure>(
        method: string,
        text: Statement,
        params: ReadonlyArray<unknown>,
        onError: (error: unknown) => F | StoreFailure = toStoreFailure(method)
      ): Effect.Effect<ReadonlyArray<unknown>, F | StoreFailure> =>
        Effect.flatMap(
          Effect.mapError(sendOn(sql, text, params), onError),
          (rows) =>
            rows instanceof RowInvalid
              ? Effect.fail(new StoreError({ method, cause: rows.message }))
              : Effect.succeed(rows)
        )

      const reserve = (
        how: Reserve,
        args: ReadonlyArray<unknown>
      ): Effect.Effect<ReserveRow, IdempotencyConflict | StoreFailure> => {
        const sent = (text: Statement, params: ReadonlyArray<unknown>) =>
          statement(
            "reserve",
            text,
            params,
            (error) => statements.isLockWaitEnded(error) ? conflict(0) : toStoreFailure("reserve")(error)
          )
        const decoded = <A>(row: A | RowInvalid) =>
          row instanceof RowInvalid
            ? Effect.fail(new StoreError({ method: "reserve", cause: row.message }))
            : Effect.succeed(row)
        if (how._tag === "Row") {
          return Effect.flatMap(sent(how.statement, args), (rows) => decoded(reserveRowOf(rows[0])))
        }
        // the insert takes the write lock even when it writes nothing: the read sees what stopped it
        return Effect.flatMap(sent(how.insert, args), (rows) =>
          rows.length > 0
            ? decoded(reserveRowOf(rows[0]))
            : Effect.flatMap(sent(how.read, [null, args[1]]), (rows) =>
              Effect.flatMap(
                decoded(readRowOf(rows[0])),
                (read): Effect.Effect<ReserveRow, IdempotencyConflict> =>
                  Option.isSome(read.record)
                    ? Effect.succeed({ reserved: false, record: read.record.value, now: read.now })
                    // deleted since the insert: another attempt's to decide
                    : Effect.fail(conflict(0))
              )))
      }

      const owned = (
        method: LeaseLost["method"],
        text: Statement,
        token: string,
        params: ReadonlyArray<unknown>
      ): Effect.Effect<void, LeaseLost | StoreFailure> =>
        Effect.flatMap(statement(method, text, [null, id.value, token, ...params]), (rows): Effect.Effect<
          void,
          LeaseLost | StoreFailure
        > => {
          const matched = ownedRowsOf(rows)
          return matched instanceof RowInvalid
            ? Effect.fail(new StoreError({ method, cause: matched.message }))
            : matched
            ? Effect.void
            : Effect.fail(new LeaseLost({ method, recordId: id.value }))
        })

      const complete = (token: string, outcome: StoredOutcome) => {
        const { body, kind } = outcomeToColumns(outcome)
        return owned("complete", statements.complete, token, [kind, body, ttlMs])
      }

      const record = (
        token: string,
        attempt: number,
        exit: Exit.Exit<A, E>
      ): Effect.Effect<Committed<A>, RolledBack | OutcomeNotReplayable | LeaseLost | StoreFailure> => {
        if (Exit.isSuccess(exit)) {
          return Effect.flatMap(def.codec.encodeSuccess(exit.value), (encoded) =>
            encoded._tag === "Encoded"
              ? Effect.as(complete(token, encoded.outcome), {
                _tag: "Done" as const,
                result: { value: encoded.value, replayed: false, attempt, recorded: true }
              })
              : Effect.zipRight(
                complete(token, encoded.outcome),
                Effect.fail(
                  new OutcomeNotReplayable({ operation: name, key: id.key, reason: encoded.reason, replayed: false })
                )
              ))
        }
        const failure = Cause.failureOption(exit.cause)
        if (Option.isNone(failure) || !def.savepoint) return Effect.fail(new RolledBack(exit.cause))
        const policy = Effect.try({ try: () => def.failurePolicy(failure.value), catch: Cause.die })
        return Effect.flatMap(
          Effect.catchAll(policy, (cause) => Effect.fail(new RolledBack(Cause.sequential(exit.cause, cause)))),
          (policy): Effect.Effect<Committed<A>, RolledBack | LeaseLost | StoreFailure> => {
            const failed = { _tag: "Failed" as const, cause: exit.cause }
            const rollBackWrites = statement("rollback", ROLLBACK_TO_SAVEPOINT, [])
            switch (policy) {
              case "release":
                return Effect.fail(new RolledBack(exit.cause))
              case "markFailed":
                return rollBackWrites.pipe(
                  Effect.zipRight(owned("markFailed", statements.markFailed, token, [ttlMs])),
                  Effect.as(failed)
                )
              case "store": {
                return def.codec.encodeFailure(failure.value).pipe(
                  Effect.zipLeft(rollBackWrites),
                  Effect.flatMap((outcome) => complete(token, outcome)),
                  Effect.as(failed)
                )
              }
            }
          }
        )
      }

      // answers by `end`, unless a savepoint: see sql-pg's README, "An answer by the deadline"
      const transaction: Effect.Effect<
        Committed<A>,
        E | IdempotencyError | RolledBack,
        R
      > = Effect.suspend(() => {
        const token = globalThis.crypto.randomUUID()
        let phase: "reserve" | "downstream" | "committing" = "reserve"
        let bodyFailure: Cause.Cause<unknown> | undefined
        const body = Effect.gen(function*() {
          const left = until - (yield* Clock.currentTimeMillis)
          if (left <= 0) return yield* Effect.fail(conflict(0))
          if (statements.lockTimeout !== undefined) {
            yield* statement("reserve", statements.lockTimeout, [Math.ceil(left)])
          }
          const row = yield* reserve(statements.reserve(Math.ceil(left)), [
            null,
            id.value,
            id.operation,
            id.scope ?? null,
            id.key,
            token,
            fingerprint,
            Math.ceil(left),
            ttlMs,
            def.onTimeout !== "markUnknown"
          ])
          if (!row.reserved) return { _tag: "Existing", record: row.record, now: row.now } as const

          const context = IdempotencyContext.make({ id, token, attempt: row.attempt })
          const downstream = Effect.suspend(() => def.execute(request.payload)).pipe(
            Effect.provideService(IdempotencyContext.IdempotencyContext, context)
          )
          if (def.savepoint) yield* statement("savepoint", SAVEPOINT, [])
          phase = "downstream"
          const remaining = until - (yield* Clock.currentTimeMillis)
          const exit = yield* Effect.timeoutOption(Effect.exit(downstream), Duration.millis(Math.max(0, remaining)))
          if (Option.isNone(exit)) return yield* Effect.fail(timedOut())
          return yield* record(token, row.attempt, exit.value)
        }).pipe(
          Effect.tapErrorCause((cause) => Effect.sync(() => (bodyFailure = cause))),
          // the body's last step: after it, COMMIT is sent even if the attempt is interrupted
          Effect.tap(() => Effect.sync(() => (phase = "committing")))
        )
        const run = sql.withTransaction(body).pipe(
          // the downstream's exits are data: an `SqlError` is BEGIN's, a defect COMMIT's or ROLLBACK's
          Effect.catchIf(isSqlError, (error) =>
            Effect.fail(
              isNoTransactions(error)
                ? new TransactionsUnsupported({ method: "transaction", cause: error })
                : toStoreFailure("transaction")(error)
            )),
          Effect.catchAllDefect((defect) =>
            bodyFailure === undefined
              ? Effect.fail(toStoreFailure("transaction")(defect))
              : Effect.zipRight(
                Effect.logWarning("idempotency: the transaction's ROLLBACK failed", defect),
                Effect.failCause(bodyFailure) as Effect.Effect<never, E | IdempotencyError | RolledBack>
              )
          )
        )
        return Effect.flatMap(
          Effect.all([Clock.currentTimeMillis, Effect.serviceOption(SqlClient.TransactionConnection)]),
          ([now, outer]) =>
            Option.isSome(outer) ? run : Effect.flatMap(
              Effect.timeoutOption(Effect.disconnect(run), Duration.millis(Math.max(0, end - now))),
              (committed) =>
                Option.isSome(committed)
                  ? Effect.succeed(committed.value)
                  : Effect.fail(
                    // read after the interruption was sent: the body can no longer move on
                    phase === "reserve"
                      ? deadlinePassed("reserve")
                      : phase === "downstream"
                      ? timedOut()
                      : deadlinePassed("commit")
                  )
            )
        )
      })

      const settled: Effect.Effect<Option.Option<Result<A>>, E | IdempotencyError> = Effect.flatMap(
        Clock.currentTimeMillis,
        (now) =>
          statement("reserve", statements.read, [null, id.value]).pipe(
            Effect.disconnect,
            Effect.timeoutFail({
              duration: Duration.millis(Math.max(0, end - now)),
              onTimeout: () => deadlinePassed("reserve")
            }),
            Effect.flatMap((rows): Effect.Effect<Option.Option<Result<A>>, E | IdempotencyError> => {
              const read = readRowOf(rows[0])
              if (read instanceof RowInvalid) {
                return Effect.fail(new StoreError({ method: "reserve", cause: read.message }))
              }
              if (Option.isNone(read.record) || read.record.value.status !== "COMPLETED") {
                return Effect.succeedNone
              }
              const found = Attempt.found({
                operation: name,
                key,
                fingerprint,
                record: read.record.value,
                now: read.now,
                onTimeout: def.onTimeout,
                timeoutMillis: timeoutMs
              })
              switch (found._tag) {
                case "KeyReused":
                case "Unknown":
                  noted(true)
                  return Effect.fail(found.error)
                case "Replay":
                  noted(true)
                  return Effect.asSome(
                    def.codec.replay(found.record, { key: id.key, timeoutMillis: timeoutMs }) as Effect.Effect<
                      Result<A>,
                      E | IdempotencyError
                    >
                  )
                case "Conflict":
                case "Free":
                  return Effect.succeedNone
              }
            })
          )
      )

      const attempt: Effect.Effect<Result<A>, E | IdempotencyError | RolledBack, R> = Effect.flatMap(
        transaction,
        (committed): Effect.Effect<Result<A>, E | IdempotencyError> => {
          noted(committed._tag === "Existing")
          switch (committed._tag) {
            case "Done":
              return Effect.succeed(committed.result)
            case "Failed":
              return Effect.failCause(committed.cause) as Effect.Effect<never, E>
            case "Existing": {
              // the reservation takes over a record whose lease ended: one found free changed meanwhile
              const found = Attempt.found({
                operation: name,
                key,
                fingerprint,
                record: committed.record,
                now: committed.now,
                onTimeout: def.onTimeout,
                timeoutMillis: timeoutMs
              })
              switch (found._tag) {
                case "KeyReused":
                case "Conflict":
                case "Unknown":
                  return Effect.fail(found.error)
                case "Replay":
                  return def.codec.replay(found.record, { key: id.key, timeoutMillis: timeoutMs }) as Effect.Effect<
                    Result<A>,
                    E
                  >
                case "Free":
                  return Effect.fail(conflict(0))
              }
            }
          }
        }
      )

      const inProgress = def.inProgress
      const first = Effect.suspend(() =>
        metExisting > 0.5
          ? Effect.flatMap(settled, Option.match({ onNone: () => attempt, onSome: Effect.succeed }))
          : attempt
      )
      const attempts = inProgress === undefined || inProgress._tag === "Fail"
        ? first
        : retryOnConflict(first, inProgress.schedule, until)
      return yield* Effect.catchIf(
        attempts,
        (error): error is RolledBack => error instanceof RolledBack,
        (rolledBack) => Effect.failCause(rolledBack.cause) as Effect.Effect<never, E>
      )
    }).pipe(instrumented(name, request.key))

  return { runDetailed }
}

/** @internal */
export const make = <P, IP, A, IA, E, R, EF = never, IEF = never>(
  options: TransactionalOptions<P, IP, A, IA, E, R, EF, IEF>,
  statements: Definition<P, A, E, R>["statements"]
): TransactionalOperation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>> => {
  const settings = Attempt.resolve(options.name, { ttl: options.ttl, timeout: options.timeout })
  const failureSchema = options.failure
  const isStorableFailure = failureSchema === undefined ? () => false : Schema.is(failureSchema)
  const onFailure = options.onFailure
  const { runDetailed } = makeRunner<P, A, E, Exclude<R, IdempotencyContext.IdempotencyContext>>({
    name: options.name,
    statements,
    fingerprint: fingerprintOf(options.name, options.payload),
    codec: OutcomeCodec.make<A, IA, unknown, unknown>({
      name: options.name,
      success: options.success,
      failure: failureSchema as Schema.Schema<unknown, unknown> | undefined
    }),
    failurePolicy: (error) =>
      onFailure !== undefined ? onFailure(error) : isStorableFailure(error) ? "store" : "release",
    savepoint: failureSchema !== undefined || onFailure !== undefined,
    ttl: settings.ttl,
    timeout: settings.timeout,
    margin: settings.leaseMargin,
    inProgress: options.inProgress,
    onTimeout: options.onTimeout ?? "keepLease",
    key: options.key,
    execute: options.execute as (payload: P) => Effect.Effect<A, E, Exclude<R, IdempotencyContext.IdempotencyContext>>
  })
  const run = runDetailed as TransactionalOperation<
    P,
    A,
    E | EF,
    Exclude<R, IdempotencyContext.IdempotencyContext>
  >["runDetailed"]
  return {
    name: options.name,
    runDetailed: run,
    run: (request) => Effect.map(run(request), (result) => result.value)
  }
}
