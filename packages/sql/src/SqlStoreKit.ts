/**
 * A dialect's statements into an `IdempotencyStore` or a transactional operation (the package's README).
 *
 * @since 0.1.0
 */
import type * as Idempotency from "@effect-idempotency/core/Idempotency"
import type * as IdempotencyContext from "@effect-idempotency/core/IdempotencyContext"
import type { IdempotencyError, StoreFailure } from "@effect-idempotency/core/IdempotencyError"
import type * as IdempotencyPolicy from "@effect-idempotency/core/IdempotencyPolicy"
import type { IdempotencyRecord } from "@effect-idempotency/core/IdempotencyRecord"
import type { ClockSource, IdempotencyStore } from "@effect-idempotency/core/IdempotencyStore"
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as errors from "./internal/errors.js"
import * as rows from "./internal/rows.js"
import * as internal from "./internal/store.js"
import * as transactional from "./internal/transactional.js"

/**
 * One statement: its text, and how its placeholders and its answer read (see the README).
 *
 * @since 0.1.0
 * @category models
 */
export interface Statement {
  readonly text: string
  readonly slots?: ReadonlyArray<number> | undefined
  readonly affected?: string | undefined
  readonly counted?: string | undefined
}

/**
 * How a dialect reserves: one statement answering one row, or rounds of an insert and a read.
 *
 * @since 0.1.0
 * @category models
 */
export type Reserve =
  | { readonly _tag: "Row"; readonly statement: Statement }
  | { readonly _tag: "Rounds"; readonly insert: Statement; readonly read: Statement }

/**
 * The statements of a store, each reading its arguments by position (see the README's table).
 *
 * @since 0.1.0
 * @category models
 */
export interface Statements {
  readonly reserve: Reserve
  readonly complete: Statement
  readonly release: Statement
  readonly markFailed: Statement
  readonly extend: Statement
  readonly get: Statement
  readonly purgeExpired: Statement
  readonly admin?: AdminStatements | undefined
}

/**
 * The statements of the admin primitives (see `IdempotencyAdmin`, and the README's table).
 *
 * @since 0.1.0
 * @category models
 */
export interface AdminStatements {
  readonly list: Statement
  readonly read: Statement
  readonly unblock:
    | { readonly _tag: "Row"; readonly statement: Statement }
    | { readonly _tag: "Delete"; readonly statement: Statement }
  readonly stats: Statement
}

/**
 * Options of a store built by `make`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The prefix of the store's spans. */
  readonly name: string
  readonly clock: ClockSource
  readonly callTimeout: Duration.Duration
}

/**
 * The most records one `purgeExpired` deletes, unless told otherwise.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_PURGE_LIMIT: number = rows.DEFAULT_PURGE_LIMIT

/**
 * The default call timeout: 5 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_CALL_TIMEOUT: Duration.Duration = internal.DEFAULT_CALL_TIMEOUT

/**
 * Builds a store over the `SqlClient` of the context, with admin primitives when `statements.admin` is given.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (
  statements: Statements,
  options: Options
) => Effect.Effect<IdempotencyStore["Type"], never, SqlClient.SqlClient> = internal.make

/**
 * Maps any failure of a statement to `StoreUnavailable`, `NotMigrated` or `StoreError`.
 *
 * @since 0.1.0
 * @category errors
 */
export const toStoreFailure: (method: string) => (cause: unknown) => StoreFailure = errors.toStoreFailure

/**
 * A duration as whole milliseconds, rounded up, for the statements' arguments.
 *
 * @since 0.1.0
 * @category utils
 */
export const millis: (duration: Duration.Duration) => number = rows.millis

/**
 * Why a row did not decode: the message of the `StoreError` it becomes.
 *
 * @since 0.1.0
 * @category models
 */
export const RowInvalid: typeof rows.RowInvalid = rows.RowInvalid

/**
 * Why a row did not decode: the message of the `StoreError` it becomes.
 *
 * @since 0.1.0
 * @category models
 */
export type RowInvalid = rows.RowInvalid

/**
 * A decoded row, or why it did not decode.
 *
 * @since 0.1.0
 * @category decoding
 */
export type Decoded<A> = rows.Decoded<A>

/**
 * A reservation's row: reserved, or the existing record and the instant of the decision.
 *
 * @since 0.1.0
 * @category decoding
 */
export type ReserveRow = rows.ReserveRow

/**
 * Decodes the row of a `Row` reservation.
 *
 * @since 0.1.0
 * @category decoding
 */
export const reserveRowOf: (row: unknown) => Decoded<ReserveRow> = rows.reserveRowOf

/**
 * Decodes the row of a read: `now` and the live record's columns, NULL when there is none.
 *
 * @since 0.1.0
 * @category decoding
 */
export const readRowOf: (
  row: unknown
) => Decoded<{ readonly now: number; readonly record: Option.Option<IdempotencyRecord> }> = rows.nowAndRecordOf

/**
 * Decodes the rows of a token-checked write: whether it changed the record.
 *
 * @since 0.1.0
 * @category decoding
 */
export const ownedRowsOf: (rows: ReadonlyArray<unknown>) => Decoded<boolean> = rows.ownedRowsOf

/**
 * The statements of a transactional mode, each attempt one transaction holding them (see the README).
 *
 * @since 0.1.0
 * @category transactional
 */
export interface TransactionalStatements {
  readonly lockTimeout?: Statement | undefined
  readonly reserve: (leftMillis: number) => Reserve
  readonly complete: Statement
  readonly markFailed: Statement
  readonly read: Statement
  readonly isLockWaitEnded: (error: unknown) => boolean
}

/**
 * `Idempotency.Options` without the lease settings and the timeout and defect policies, plus `onTimeout`.
 *
 * @since 0.1.0
 * @category transactional
 */
export interface TransactionalOptions<P, IP, A, IA, E, R, EF, IEF> extends
  Omit<
    Idempotency.Options<P, IP, A, IA, E, R, EF, IEF>,
    "lease" | "leaseMargin" | "heartbeat" | "maxHold" | "onDefect" | "completeRetry"
  >
{
  /** The normal-mode operation's `onTimeout`, for its records left in progress (see the README). */
  readonly onTimeout?: IdempotencyPolicy.TimeoutPolicy | undefined
}

/**
 * A transactional operation: `run` and `runDetailed`, on the `SqlClient` of the context.
 *
 * @since 0.1.0
 * @category transactional
 */
export interface TransactionalOperation<P, A, E, R> {
  readonly name: string
  readonly run: (request: Idempotency.Request<P>) => Effect.Effect<A, E | IdempotencyError, R | SqlClient.SqlClient>
  readonly runDetailed: (
    request: Idempotency.Request<P>
  ) => Effect.Effect<Idempotency.Result<A>, E | IdempotencyError, R | SqlClient.SqlClient>
}

/**
 * Builds a transactional operation over the statements resolved from the context's client at each run.
 *
 * @example
 * ```ts
 * import { SqlStoreKit } from "@effect-idempotency/sql"
 * import { Effect, Schema } from "effect"
 *
 * // a store package's statements (here PostgreSQL-like, abridged)
 * const statements: SqlStoreKit.TransactionalStatements = {
 *   lockTimeout: { text: "SELECT set_config('lock_timeout', $1::text, true)" },
 *   reserve: () => ({ _tag: "Row", statement: { text: "SELECT * FROM records_reserve($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)" } }),
 *   complete: { text: "UPDATE records SET status = 'COMPLETED' WHERE id = $2 AND token = $3 RETURNING 1 AS owned" },
 *   markFailed: { text: "UPDATE records SET status = 'FAILED' WHERE id = $2 AND token = $3 RETURNING 1 AS owned" },
 *   read: { text: "SELECT * FROM records_read($1, $2)" },
 *   isLockWaitEnded: SqlStoreKit.isLockWaitEnded.pg
 * }
 *
 * const operation = SqlStoreKit.makeTransactional({
 *   name: "create-order",
 *   payload: Schema.Struct({ sku: Schema.String }),
 *   success: Schema.Struct({ orderId: Schema.String }),
 *   execute: () => Effect.succeed({ orderId: "o-1" })
 * }, () => Effect.succeed(statements))
 * ```
 *
 * @since 0.1.0
 * @category transactional
 */
export const makeTransactional: <P, IP, A, IA, E, R, EF = never, IEF = never>(
  options: TransactionalOptions<P, IP, A, IA, E, R, EF, IEF>,
  statements: (sql: SqlClient.SqlClient) => Effect.Effect<TransactionalStatements, StoreFailure>
) => TransactionalOperation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>> = transactional.make

/**
 * Whether a failure of a statement is the end of its wait for a lock, per dialect.
 *
 * @since 0.1.0
 * @category transactional
 */
export const isLockWaitEnded: {
  readonly pg: (error: unknown) => boolean
  readonly mariadb: (error: unknown) => boolean
  /** @deprecated `mysql` is `mariadb` (the dialect runs on MariaDB only); removed at 1.0. */
  readonly mysql: (error: unknown) => boolean
  readonly sqlite: (error: unknown) => boolean
} = { ...transactional.isLockWaitEnded, mysql: transactional.isLockWaitEnded.mariadb }
