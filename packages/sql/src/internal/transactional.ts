/**
 * The transactional mode's runner, for every SQL database: one attempt is one transaction on the
 * `SqlClient` of the context, holding the reservation, the downstream's statements and the recorded
 * outcome. The dialect gives its statements (`TransactionalStatements`): how a wait for a
 * concurrent attempt's row is bounded, the reservation, the recording, and the read of a replay.
 *
 * ```
 * BEGIN
 *   [bound the lock waits]              -- PostgreSQL's lock_timeout; MariaDB bounds the reservation itself
 *   reserve                             -- waits while another transaction holds the row
 *   [SAVEPOINT]                         -- when a failure may be recorded without the writes
 *   the downstream's statements         -- on the same SqlClient: routed into this transaction
 *   complete / markFailed (the record)
 * COMMIT                                -- or ROLLBACK: nothing of the attempt is left
 * ```
 *
 * The record is never visible IN_PROGRESS: other attempts see it absent, or see it as committed.
 * A failure the policy does not record, a defect, an interruption, a timeout or a crash rolls the
 * whole transaction back, so the outcome of every exit is known.
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

/**
 * An operation of the transactional mode, resolved: every option decoded once.
 *
 * @internal
 */
export interface Definition<P, A, E, R> {
  readonly name: string
  /**
   * The statements of the context's database, resolved at each run (the client's dialect; a
   * database without interactive transactions fails here, or at BEGIN, with `TransactionsUnsupported`).
   */
  readonly statements: (sql: SqlClient.SqlClient) => Effect.Effect<TransactionalStatements, StoreFailure>
  /** The payload's fingerprint (`Idempotency.fingerprintOf`). */
  readonly fingerprint: (payload: P) => Effect.Effect<string, InvalidPayload>
  /** How outcomes are recorded and replayed: as `Idempotency.make` does. */
  readonly codec: OutcomeCodec.OutcomeCodec<A, unknown>
  readonly failurePolicy: (error: E) => FailurePolicy
  /**
   * Whether a failure may be recorded (a failure schema or a failure policy was given): the
   * downstream then runs inside a savepoint, so that its writes can be rolled back and the record
   * committed without them.
   */
  readonly savepoint: boolean
  readonly ttl: Duration.Duration
  readonly timeout: Duration.Duration
  /** The time kept before the attempt's deadline (or after its timeout) to record and commit. */
  readonly margin: Duration.Duration
  readonly inProgress: InProgressPolicy | undefined
  /** How a record another mode left in progress past its lease is treated (`markUnknown`: not taken over). */
  readonly onTimeout: TimeoutPolicy
  readonly key: IdempotencyKey.Options | undefined
  readonly execute: (payload: P) => Effect.Effect<A, E, R>
}

/**
 * The savepoint around the downstream, when a failure may be recorded without its writes. Its name
 * is the library's: a transaction of the downstream's own (`sql.withTransaction`) nests as
 * `effect_sql_<n>` savepoints beside it.
 */
const SAVEPOINT: Statement = { text: "SAVEPOINT effect_idempotency_downstream" }

const ROLLBACK_TO_SAVEPOINT: Statement = { text: "ROLLBACK TO SAVEPOINT effect_idempotency_downstream" }

/** The cause of a store call cut off at the attempt's end. */
const DEADLINE_PASSED = "no answer before the attempt's deadline"

const deadlinePassed = (method: string) => new StoreUnavailable({ method, cause: DEADLINE_PASSED })

const isSqlError = (u: unknown): u is SqlError => Predicate.hasProperty(u, SqlErrorTypeId)

/** Whether the driver's failure under an `SqlError` has one of `codes` (PostgreSQL, mysql2 and SQLite's codes). */
const hasCode = (codes: ReadonlySet<string>) => (error: unknown): boolean => {
  const cause = Predicate.hasProperty(error, "cause") ? error.cause : undefined
  return Predicate.hasProperty(cause, "code") && typeof cause.code === "string" && codes.has(cause.code)
}

/** Whether the driver's failure under an `SqlError` has one of `errnos` (MariaDB's error numbers, as mysql2 gives them). */
const hasErrno = (errnos: ReadonlySet<number>) => (error: unknown): boolean => {
  const cause = Predicate.hasProperty(error, "cause") ? error.cause : undefined
  return Predicate.hasProperty(cause, "errno") && typeof cause.errno === "number" && errnos.has(cause.errno)
}

/**
 * The codes of a statement whose wait for a lock ended, per database: PostgreSQL's `lock_timeout`
 * (55P03) or a cancel (57014); MariaDB's `innodb_lock_wait_timeout` (1205), `max_statement_time`
 * (1969) and a deadlock (1213: the transaction is rolled back); SQLite's busy timeout.
 *
 * @internal
 */
export const isLockWaitEnded = {
  pg: hasCode(new Set(["55P03", "57014"])),
  // by number: mysql2 names 1969 (ER_STATEMENT_TIMEOUT) only in its newer code tables
  mariadb: hasErrno(new Set([1205, 1213, 1969])),
  sqlite: hasCode(new Set(["SQLITE_BUSY", "SQLITE_BUSY_SNAPSHOT", "SQLITE_BUSY_TIMEOUT"]))
} as const

/**
 * How the transaction ended, when it committed: the record it found (nothing written), or the
 * answer of an execution whose record is committed.
 */
type Committed<A> =
  | { readonly _tag: "Existing"; readonly record: IdempotencyRecord; readonly now: number }
  | { readonly _tag: "Done"; readonly result: Result<A> }
  | { readonly _tag: "Failed"; readonly cause: Cause.Cause<unknown> }

/**
 * The failure that rolls the transaction back and then ends the run with `cause`: the downstream's
 * own failure, defect or interruption, carried as data through the rollback (so that a defect of
 * the downstream is never taken for one of the connection).
 */
class RolledBack {
  readonly _tag = "RolledBack"
  constructor(readonly cause: Cause.Cause<unknown>) {}
}

/**
 * Builds the runner of a transactional operation.
 *
 * @internal
 */
export const makeRunner = <P, A, E, R>(def: Definition<P, A, E, R>) => {
  const name = def.name
  const ttlMs = millis(def.ttl)
  // How often an attempt found a record (a replay, a reused key, a conflict), averaged over about
  // the last 8 attempts: above one half, an attempt reads the record first, outside a transaction,
  // and answers a replay in that one round trip (a first execution then costs one more). A
  // completed record never changes until it expires, so the read answers as the transaction would.
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
      // the downstream ends a margin before the attempt's deadline, to record and commit
      const { end, timeoutMillis: timeoutMs, until } = yield* Attempt.window({
        operation: name,
        request,
        timeout: def.timeout,
        margin: def.margin,
        now: start
      })
      if (timeoutMs <= 0) {
        // nothing can run in the time left: no statement is sent
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

      /**
       * A statement of the store's own, its failures typed (by `onError`, `toStoreFailure` unless
       * told otherwise); an answer that does not decode is a `StoreError`.
       */
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

      /** The reservation's row, from the dialect's statements: one statement, or an insert and a read. */
      const reserve = (
        how: Reserve,
        args: ReadonlyArray<unknown>
      ): Effect.Effect<ReserveRow, IdempotencyConflict | StoreFailure> => {
        const sent = (text: Statement, params: ReadonlyArray<unknown>) =>
          statement(
            "reserve",
            text,
            params,
            // waited for a concurrent attempt's transaction until the time was up
            (error) => statements.isLockWaitEnded(error) ? conflict(0) : toStoreFailure("reserve")(error)
          )
        const decoded = <A>(row: A | RowInvalid) =>
          row instanceof RowInvalid
            ? Effect.fail(new StoreError({ method: "reserve", cause: row.message }))
            : Effect.succeed(row)
        if (how._tag === "Row") {
          return Effect.flatMap(sent(how.statement, args), (rows) => decoded(reserveRowOf(rows[0])))
        }
        // the insert writes only when it reserves, and takes the database's write lock either way: the
        // read that follows in the same transaction sees the record that stopped it
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

      /** A token-checked write of the record, in the transaction. */
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

      /** The outcome of the downstream, recorded in the transaction (or the transaction rolled back). */
      const record = (
        token: string,
        attempt: number,
        exit: Exit.Exit<A, E>
      ): Effect.Effect<Committed<A>, RolledBack | OutcomeNotReplayable | LeaseLost | StoreFailure> => {
        if (Exit.isSuccess(exit)) {
          // the caller gets the value a replay would get; a success that does not encode is kept as
          // omitted with the downstream's writes, and never run again
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
        // a defect or an interruption: the transaction holds everything the downstream wrote
        if (Option.isNone(failure) || !def.savepoint) return Effect.fail(new RolledBack(exit.cause))
        const policy = Effect.try({ try: () => def.failurePolicy(failure.value), catch: Cause.die })
        return Effect.flatMap(
          Effect.catchAll(policy, (cause) => Effect.fail(new RolledBack(Cause.sequential(exit.cause, cause)))),
          (policy): Effect.Effect<Committed<A>, RolledBack | LeaseLost | StoreFailure> => {
            const failed = { _tag: "Failed" as const, cause: exit.cause }
            // the record is kept, the downstream's writes are not
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

      /**
       * One transaction: reserve, then execute and record, or give back the record found. It answers
       * by `end`. Past it, the transaction is interrupted without waiting for its end (its ROLLBACK, or
       * a COMMIT already sent, finishes on its connection), and the answer says what is known: a
       * transaction interrupted before its body returned never commits; once the body has returned,
       * COMMIT follows whatever happens, and its outcome is unknown to this attempt. Inside a
       * transaction of the caller's, the attempt is a savepoint that the caller commits: it is not cut.
       */
      const transaction: Effect.Effect<
        Committed<A>,
        E | IdempotencyError | RolledBack,
        R
      > = Effect.suspend(() => {
        const token = globalThis.crypto.randomUUID()
        // how far the body got: read when `end` passes
        let phase: "reserve" | "downstream" | "committing" = "reserve"
        // the body's failure, kept for when its ROLLBACK fails too
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
          // the downstream's exits are carried as data: an `SqlError` here is BEGIN's, and a defect
          // the connection's (COMMIT or ROLLBACK failed). A failed COMMIT leaves the outcome unknown
          // to this attempt: the next one replays it or executes once. A failed ROLLBACK leaves the
          // transaction uncommitted all the same: the run ends as its body did.
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

      /**
       * The answer of a completed record read outside a transaction (a replay, a reused key, an
       * outcome recorded unknown), or none: no record, or one the transaction must decide on.
       */
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

      /** One attempt: a transaction, and what its answer means. */
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
              // what the record means, by the rules every mode shares; the reservation takes over a
              // record whose lease ended, so one found free changed meanwhile: a conflict over now
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

/**
 * A transactional operation from its options, on the statements `statements` gives for the context's
 * client: the options decoded once, as `Idempotency.make` decodes them.
 *
 * @internal
 */
export const make = <P, IP, A, IA, E, R, EF = never, IEF = never>(
  options: TransactionalOptions<P, IP, A, IA, E, R, EF, IEF>,
  statements: Definition<P, A, E, R>["statements"]
): TransactionalOperation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>> => {
  // the defaults and checks every mode shares (a timeout or TTL that is not a positive duration throws)
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
    // the context is provided by the attempt
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
