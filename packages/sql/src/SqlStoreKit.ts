/**
 * The kit that turns a dialect's statements into an `IdempotencyStore`, for store packages on
 * `@effect/sql`: every method of the store (and its admin primitives) over one dialect's statements.
 * The stores of `SqlIdempotencyStore` (MariaDB, SQLite, libSQL) and `PgIdempotencyStore` of
 * `@effect-idempotency/sql-pg` are this kit with their own statements: the methods, the row
 * decoding, the call timeout, the typed failures and the spans are the same for every database.
 *
 * A statement reads its arguments by position. The arguments of each statement are fixed (see
 * `Statements`); the first is always the caller's clock in epoch milliseconds, or `null` when the
 * database's clock decides.
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
 * One statement.
 *
 * - `text` is the SQL. Its placeholders are numbered (`$1` is the first argument) when `slots` is
 *   absent; otherwise they are `?`, and `slots` gives the index of the argument each `?` reads, in
 *   order (booleans are then sent as 1 and 0).
 * - The statement's answer is its rows, unless `affected` or `counted` names a column: the answer
 *   is then one row whose column holds the number of rows the statement changed (`affected`, as
 *   the driver reports it) or returned (`counted`), and no row when that number is 0.
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
 * How a dialect reserves:
 *
 * - `Row`: one statement that answers with one row: `reserved` (a boolean, or 1 and 0), the
 *   record's columns after the statement, and `now`, the instant its decisions used.
 * - `Rounds`: `insert` reserves (it creates the record, or overwrites one that is expired or that
 *   the takeover rule gives to the request) and answers with the record's row, or with no row when
 *   it wrote nothing; then `read` (the arguments of `get`) answers with one row, `now` and the live
 *   record's columns (NULL when there is none). A record that the read shows absent, or that the
 *   request may take over, was changed between the two statements: the next round runs. While
 *   most recent reservations of the store met a record they could not take (replays, conflicts:
 *   a client resending, a retry storm), the store reads first and answers those in one statement,
 *   a first execution then in two; otherwise it inserts first. Both orders give the same answers,
 *   and neither writes on a replay.
 *
 * @since 0.1.0
 * @category models
 */
export type Reserve =
  | { readonly _tag: "Row"; readonly statement: Statement }
  | { readonly _tag: "Rounds"; readonly insert: Statement; readonly read: Statement }

/**
 * The statements of a store. Arguments, by index:
 *
 * - `reserve`: 0 now, 1 id, 2 operation, 3 scope (or null), 4 key, 5 token, 6 fingerprint, 7
 *   lease ms, 8 ttl ms, 9 takeover.
 * - `complete`: 0 now, 1 id, 2 token, 3 outcome kind, 4 outcome body, 5 ttl ms.
 * - `release`: 0 now, 1 id, 2 token.
 * - `markFailed`: 0 now, 1 id, 2 token, 3 ttl ms.
 * - `extend`: 0 now, 1 id, 2 token, 3 lease ms.
 *
 * The four token-checked writes answer with one row, `owned` = 1, when they changed the live
 * IN_PROGRESS record of that token, and with no row otherwise.
 *
 * - `get`: 0 now, 1 id. The live record's columns, or no row.
 * - `purgeExpired`: 0 now, 1 limit. One row, `purged`.
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
 * The statements of the admin primitives (see `IdempotencyAdmin`). Arguments, by index:
 *
 * - `list`: 0 now, 1 cursor (the last id of the previous page) or null, 2 the prefix of an
 *   operation's ids or null, 3 a state or null, 4 the least time since the lease ended in ms or
 *   null, 5 the limit. One row per record (`id` and its columns, and `now`), or one row of NULLs
 *   but `now` when there is none.
 * - `read`: 0 now, 1 id. One row: `now` and the live record's columns, NULL when there is none.
 * - `unblock`: 0 now, 1 id, 2 attempt. `Row`: one row, `unblocked`, `now` and the record's columns
 *   as the statement found them. `Delete`: a conditional DELETE answering with one row, `owned` =
 *   1, when it deleted the record, and none otherwise; `read` then says why.
 * - `stats`: 0 now. One row per operation and state of the live records: `operation`, `state`,
 *   `count`.
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
  /** The store's name, the prefix of its spans (`<name>.reserve`, ...). */
  readonly name: string
  /** Which clock decides lease and TTL expiry: `"server"` sends `null` as the clock argument. */
  readonly clock: ClockSource
  /** The most one statement may take before its caller gets `StoreUnavailable`. */
  readonly callTimeout: Duration.Duration
}

/**
 * The number of records one `purgeExpired` deletes at most, unless told otherwise.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_PURGE_LIMIT: number = rows.DEFAULT_PURGE_LIMIT

/**
 * The most a store call may take unless told otherwise: 5 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_CALL_TIMEOUT: Duration.Duration = internal.DEFAULT_CALL_TIMEOUT

/**
 * Builds a store over the `SqlClient` of the context, resolved once: the store's methods have no
 * requirements. It carries the admin primitives when `statements.admin` is given.
 *
 * Every statement runs in a fiber of its own and the caller waits for it at most `callTimeout`,
 * or until it is interrupted: then the caller returns at once and the statement finishes in the
 * background (no statement is cancelled under another caller's feet). Failures are typed:
 * `StoreUnavailable` for a server that cannot be reached, dropped the connection or did not
 * answer in time, `StoreError` otherwise (a row that does not have the promised shape among them).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (
  statements: Statements,
  options: Options
) => Effect.Effect<IdempotencyStore["Type"], never, SqlClient.SqlClient> = internal.make

/**
 * Maps any failure of a statement to `StoreUnavailable` (the server could not be reached, dropped
 * the connection or did not answer in time: PostgreSQL's SQLSTATE class 08, MariaDB's connection
 * errors, SQLite's `SQLITE_BUSY`, Node's network errors) or `StoreError`: a
 * `SqlIdempotencyMigration.NotMigrated` when the table or reservation function does not exist
 * (PostgreSQL's `42P01` and `42883`, MariaDB's `ER_NO_SUCH_TABLE`, SQLite's "no such table").
 *
 * @since 0.1.0
 * @category errors
 */
export const toStoreFailure: (method: string) => (cause: unknown) => StoreFailure = errors.toStoreFailure

/**
 * Durations as whole milliseconds, rounded up, for the statements' arguments; an infinite
 * duration is the far future (2^52 ms).
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
 * A reservation's row: reserved (with the record's attempt, lease and expiry), or the existing
 * record and the instant of the decision.
 *
 * @since 0.1.0
 * @category decoding
 */
export type ReserveRow = rows.ReserveRow

/**
 * The row of a reservation that answers with one row (`Reserve`'s `Row`), decoded: reserved, with
 * the record's attempt, lease and expiry, or the existing record and the instant of the decision.
 *
 * @since 0.1.0
 * @category decoding
 */
export const reserveRowOf: (row: unknown) => Decoded<ReserveRow> = rows.reserveRowOf

/**
 * The row of a read that answers with `now` and the live record's columns (NULL when there is
 * none), decoded: `Rounds`' `read`, the admin's `read`.
 *
 * @since 0.1.0
 * @category decoding
 */
export const readRowOf: (
  row: unknown
) => Decoded<{ readonly now: number; readonly record: Option.Option<IdempotencyRecord> }> = rows.nowAndRecordOf

/**
 * The rows of a token-checked write, decoded: whether it changed the record (one row, `owned` = 1).
 *
 * @since 0.1.0
 * @category decoding
 */
export const ownedRowsOf: (rows: ReadonlyArray<unknown>) => Decoded<boolean> = rows.ownedRowsOf

/**
 * The statements of a transactional mode (`SqlTransactional`, `PgTransactional`): each attempt is one
 * transaction holding them. Arguments, by index, are those of `Statements` (the clock argument is
 * always `null`: the mode decides on the database's clock).
 *
 * - `lockTimeout`: sent first, when given: bounds every lock wait of the transaction. Argument 0 is
 *   the time left in milliseconds (at least 1). PostgreSQL's `lock_timeout`.
 * - `reserve`: the reservation, given the time left in milliseconds (a dialect may bound its own wait
 *   in its text: MariaDB's `SET STATEMENT max_statement_time`). A `Rounds` reservation runs its
 *   insert, then, when it wrote nothing, its read, in the same transaction.
 * - `complete`, `markFailed`: the token-checked writes of `Statements`.
 * - `read`: the read of `Rounds` (0 now, 1 id): a replay is answered by it outside a transaction.
 * - `isLockWaitEnded`: whether a failure of the reservation is the end of its wait for a concurrent
 *   attempt's row: the attempt then answers `IdempotencyConflict`.
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
 * The definition of a transactional operation: `Idempotency.Options` without the lease settings
 * and the timeout and defect policies (a transaction that does not commit leaves nothing, so there
 * is no lease to keep and no unknown outcome to record), plus `onTimeout`.
 *
 * @since 0.1.0
 * @category transactional
 */
export interface TransactionalOptions<P, IP, A, IA, E, R, EF, IEF> extends
  Omit<
    Idempotency.Options<P, IP, A, IA, E, R, EF, IEF>,
    "lease" | "leaseMargin" | "heartbeat" | "onDefect" | "completeRetry"
  >
{
  /**
   * How a record that another attempt left in progress past its lease is treated: an attempt of an
   * operation of the same name in the normal mode (`Idempotency.make` on the store) that crashed, or
   * whose outcome is unknown. A transactional attempt leaves no such record (its transaction commits
   * or leaves nothing). Give the normal-mode operation's `onTimeout`, so both modes keep the same
   * rule: `keepLease` (the default) or `release` take it over once its lease has ended;
   * `markUnknown` does not, and answers `DownstreamTimeout` (`replayed`), as the normal mode does.
   */
  readonly onTimeout?: IdempotencyPolicy.TimeoutPolicy | undefined
}

/**
 * A transactional operation: the surface of `Idempotency.Operation`, on the `SqlClient` of the
 * context instead of an `IdempotencyStore`.
 *
 * @since 0.1.0
 * @category transactional
 */
export interface TransactionalOperation<P, A, E, R> {
  readonly name: string
  /** Runs the operation in one transaction: a fresh execution or a replay of the recorded outcome. */
  readonly run: (request: Idempotency.Request<P>) => Effect.Effect<A, E | IdempotencyError, R | SqlClient.SqlClient>
  /** Like `run`, with the `Result`. */
  readonly runDetailed: (
    request: Idempotency.Request<P>
  ) => Effect.Effect<Idempotency.Result<A>, E | IdempotencyError, R | SqlClient.SqlClient>
}

/**
 * Builds a transactional operation over a dialect's statements, for store packages: the runner of
 * `SqlTransactional` (MariaDB, SQLite, libSQL) and of `PgTransactional`. `statements` is resolved at
 * each run from the context's client.
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
 * Whether a failure of a statement is the end of its wait for a lock, per dialect: PostgreSQL's
 * `lock_timeout` or a cancel; MariaDB's lock wait timeout, `max_statement_time` or a deadlock;
 * SQLite's busy timeout. For `TransactionalStatements.isLockWaitEnded`.
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
