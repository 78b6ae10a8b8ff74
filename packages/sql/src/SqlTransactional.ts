/**
 * The transactional mode on MariaDB and SQLite (better-sqlite3, libSQL): exactly once, with no
 * in-progress window, for a downstream whose writes go to the database that holds the idempotency
 * records.
 *
 * Each attempt is one transaction on the `SqlClient` of the context (`sql.withTransaction`): the
 * reservation, the downstream's statements (on the same `SqlClient`, which `@effect/sql` routes into
 * the transaction) and the recorded outcome commit together, or not at all. Other attempts never see
 * the record IN_PROGRESS. On MariaDB a concurrent attempt on the same key waits on the row lock
 * (bounded by the attempt's time left, through the reservation's own `max_statement_time`) and then
 * replays; on SQLite transactions run one at a time (the reservation takes the database's write
 * lock), so a concurrent attempt waits for the file (bounded by the connection's busy timeout), then
 * replays. A crash leaves nothing behind.
 *
 * The exits, the policies and the answers are those of `PgTransactional` of
 * `@effect-idempotency/sql-pg` (one runner: `SqlStoreKit.makeTransactional`), and the records are
 * the store's (`SqlIdempotencyStore`: same table, same format): a record of either mode replays in
 * the other. Cloudflare D1 and Durable Objects have no interactive transactions: a run there fails
 * with `TransactionsUnsupported` (a `StoreError`) before anything is sent.
 *
 * Only the statements on this database are covered: a call to another system inside the transaction
 * may happen and then be rolled back here. Forward `IdempotencyContext.stepKey` to it, or write an
 * outbox row in the transaction and send it after the commit.
 *
 * @example
 * ```ts
 * import { SqlTransactional } from "@effect-idempotency/sql"
 * import * as SqlClient from "@effect/sql/SqlClient"
 * import { Effect, Schema } from "effect"
 *
 * const createOrder = SqlTransactional.make({
 *   name: "create-order",
 *   payload: Schema.Struct({ sku: Schema.String, quantity: Schema.Int }),
 *   success: Schema.Struct({ orderId: Schema.String }),
 *   execute: ({ quantity, sku }) =>
 *     Effect.gen(function*() {
 *       const sql = yield* SqlClient.SqlClient
 *       const orderId = crypto.randomUUID()
 *       yield* sql`INSERT INTO orders (id, sku, quantity) VALUES (${orderId}, ${sku}, ${quantity})`
 *       return { orderId }
 *     })
 * })
 *
 * // Effect<{ orderId: string }, SqlError | IdempotencyError, SqlClient>
 * const program = createOrder.run({ key: "3f0c5c9e-client-key", payload: { sku: "A-1", quantity: 2 } })
 * ```
 *
 * @since 0.1.0
 */
import type * as IdempotencyContext from "@effect-idempotency/core/IdempotencyContext"
import { StoreError } from "@effect-idempotency/core/IdempotencyError"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as errors from "./internal/errors.js"
import * as Statements from "./internal/statements.js"
import * as SqlIdempotencyMigration from "./SqlIdempotencyMigration.js"
import * as SqlIdempotencyTable from "./SqlIdempotencyTable.js"
import * as SqlStoreKit from "./SqlStoreKit.js"

/**
 * The definition of a transactional operation: `Idempotency.Options` without the lease settings and
 * the timeout and defect policies, plus `onTimeout` and the table.
 *
 * @example
 * ```ts
 * import type { SqlTransactional } from "@effect-idempotency/sql"
 * import { Effect } from "effect"
 * import * as Schema from "effect/Schema"
 *
 * const Payload = Schema.Struct({ sku: Schema.String })
 * const Order = Schema.Struct({ orderId: Schema.String })
 *
 * const options: SqlTransactional.Options<
 *   typeof Payload.Type, typeof Payload.Encoded, typeof Order.Type, typeof Order.Encoded, never, never, never, never
 * > = {
 *   name: "create-order",
 *   table: "idempotency_records",
 *   payload: Payload,
 *   success: Order,
 *   onTimeout: "markUnknown",
 *   execute: () => Effect.succeed({ orderId: "o-1" })
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<P, IP, A, IA, E, R, EF, IEF>
  extends SqlStoreKit.TransactionalOptions<P, IP, A, IA, E, R, EF, IEF>
{
  /**
   * The records table (the store's). Default `idempotency_records`. An invalid name throws
   * `InvalidTableName` at `make`.
   */
  readonly table?: string | undefined
}

/**
 * A transactional operation: `run` and `runDetailed`, on the `SqlClient` of the context.
 *
 * @example
 * ```ts
 * import { SqlTransactional } from "@effect-idempotency/sql"
 * import { Effect, Schema } from "effect"
 *
 * const operation: SqlTransactional.Operation<{ readonly sku: string }, { readonly orderId: string }, never, never> =
 *   SqlTransactional.make({
 *     name: "create-order",
 *     payload: Schema.Struct({ sku: Schema.String }),
 *     success: Schema.Struct({ orderId: Schema.String }),
 *     execute: () => Effect.succeed({ orderId: "o-1" })
 *   })
 *
 * // Effect<Result<{ orderId: string }>, IdempotencyError, SqlClient>: `replayed`, `attempt`, `value`
 * const program = operation.runDetailed({ key: "client-key", payload: { sku: "A-1" } })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Operation<P, A, E, R> extends SqlStoreKit.TransactionalOperation<P, A, E, R> {}

/**
 * The `StoreError` of a run on a `SqlClient` without interactive transactions (Cloudflare D1, a
 * Durable Object's storage): `withTransaction` failed before anything was sent. Use the normal mode
 * (`Idempotency.make` on `SqlIdempotencyStore`) there.
 *
 * @example
 * ```ts
 * import { SqlTransactional } from "@effect-idempotency/sql"
 * import { Effect } from "effect"
 *
 * const run: Effect.Effect<string, SqlTransactional.TransactionsUnsupported> = Effect.fail(
 *   new SqlTransactional.TransactionsUnsupported({ method: "transaction", cause: "D1" })
 * )
 *
 * const answer = Effect.catchIf(run, SqlTransactional.isTransactionsUnsupported, () => Effect.succeed("normal mode"))
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export const TransactionsUnsupported: typeof errors.TransactionsUnsupported = errors.TransactionsUnsupported

/**
 * @since 0.1.0
 * @category errors
 */
export type TransactionsUnsupported = errors.TransactionsUnsupported

/**
 * Whether a value is a `TransactionsUnsupported` store error (from any installed copy of this package).
 *
 * @example
 * ```ts
 * import { SqlTransactional } from "@effect-idempotency/sql"
 *
 * SqlTransactional.isTransactionsUnsupported(new Error("boom")) // false
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export const isTransactionsUnsupported: (u: unknown) => u is TransactionsUnsupported = errors.isTransactionsUnsupported

/**
 * Defines a transactional operation. The `execute` effect runs inside the attempt's transaction: its
 * statements on the context's `SqlClient` commit with the record, or roll back with it. Run inside a
 * transaction of the caller's, the attempt is a savepoint of it, and its record commits (or rolls
 * back) with the caller's transaction.
 *
 * The dialect is the client's, read at each run: MariaDB 10.5 or later, or SQLite. On another
 * dialect a run fails with a `StoreError`; on D1 or a Durable Object with `TransactionsUnsupported`.
 *
 * @example
 * ```ts
 * import { SqlTransactional } from "@effect-idempotency/sql"
 * import { SqliteClient } from "@effect/sql-sqlite-node"
 * import * as SqlClient from "@effect/sql/SqlClient"
 * import { Effect, Schema } from "effect"
 *
 * const transfer = SqlTransactional.make({
 *   name: "transfer",
 *   payload: Schema.Struct({ from: Schema.String, to: Schema.String, amount: Schema.Int }),
 *   success: Schema.Struct({ transferred: Schema.Int }),
 *   execute: ({ amount, from, to }) =>
 *     Effect.gen(function*() {
 *       const sql = yield* SqlClient.SqlClient
 *       yield* sql`UPDATE accounts SET balance = balance - ${amount} WHERE id = ${from}`
 *       yield* sql`UPDATE accounts SET balance = balance + ${amount} WHERE id = ${to}`
 *       return { transferred: amount }
 *     })
 * })
 *
 * const program = transfer.run({ key: "client-key", payload: { from: "a", to: "b", amount: 5 } }).pipe(
 *   Effect.provide(SqliteClient.layer({ filename: "app.db" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <P, IP, A, IA, E, R, EF = never, IEF = never>(
  options: Options<P, IP, A, IA, E, R, EF, IEF>
): Operation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>> => {
  const table = Either.getOrThrow(SqlIdempotencyTable.make(options.table))
  const statements = {
    mariadb: Statements.transactionalStatements("mariadb", table),
    sqlite: Statements.transactionalStatements("sqlite", table)
  }
  return SqlStoreKit.makeTransactional(options, (sql) =>
    SqlIdempotencyMigration.dialect.pipe(
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.mapBoth({
        onFailure: (error) => new StoreError({ method: "transaction", cause: error.message }),
        onSuccess: (dialect) => statements[dialect]
      })
    ))
}
