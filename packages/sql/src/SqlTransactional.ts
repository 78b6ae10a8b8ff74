/**
 * The transactional mode on MariaDB and SQLite: each attempt is one transaction holding the
 * reservation, the downstream's statements and the recorded outcome (see the README's "Transactional mode").
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
 * The definition of a transactional operation: `SqlStoreKit.TransactionalOptions` and the table.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<P, IP, A, IA, E, R, EF, IEF>
  extends SqlStoreKit.TransactionalOptions<P, IP, A, IA, E, R, EF, IEF>
{
  /** The store's table. Default `idempotency_records`; an invalid name throws at `make`. */
  readonly table?: string | undefined
}

/**
 * A transactional operation: `run` and `runDetailed`, on the `SqlClient` of the context.
 *
 * @since 0.1.0
 * @category models
 */
export interface Operation<P, A, E, R> extends SqlStoreKit.TransactionalOperation<P, A, E, R> {}

/**
 * The `StoreError` of a run on a `SqlClient` without interactive transactions (D1, Durable Objects).
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
 * Whether a value is a `TransactionsUnsupported` store error, from any installed copy of this package.
 *
 * @since 0.1.0
 * @category errors
 */
export const isTransactionsUnsupported: (u: unknown) => u is TransactionsUnsupported = errors.isTransactionsUnsupported

/**
 * Defines a transactional operation: `execute`'s statements commit with the record, or roll back with it.
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
