/**
 * The transactional mode on PostgreSQL: see the package's README, "Transactional mode".
 *
 * @example
 * ```ts
 * import { PgTransactional } from "@effect-idempotency/sql-pg"
 * import * as SqlClient from "@effect/sql/SqlClient"
 * import { Effect, Schema } from "effect"
 *
 * const Order = Schema.Struct({ orderId: Schema.String })
 *
 * const createOrder = PgTransactional.make({
 *   name: "create-order",
 *   payload: Schema.Struct({ sku: Schema.String, quantity: Schema.Int }),
 *   success: Order,
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
import * as SqlStoreKit from "@effect-idempotency/sql/SqlStoreKit"
import * as Effect from "effect/Effect"
import * as Statements from "./internal/statements.js"
import * as PgIdempotencyTable from "./PgIdempotencyTable.js"

/**
 * The definition of a transactional operation: `SqlStoreKit.TransactionalOptions` and the table.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<P, IP, A, IA, E, R, EF, IEF>
  extends SqlStoreKit.TransactionalOptions<P, IP, A, IA, E, R, EF, IEF>
{
  readonly table?: PgIdempotencyTable.IdempotencyTable | undefined
}

/**
 * A transactional operation: `run` and `runDetailed`, on the `SqlClient` of the context.
 *
 * @since 0.1.0
 * @category models
 */
export interface Operation<P, A, E, R> extends SqlStoreKit.TransactionalOperation<P, A, E, R> {}

/**
 * Defines a transactional operation: `execute`'s statements commit with the record, or roll back with it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <P, IP, A, IA, E, R, EF = never, IEF = never>(
  options: Options<P, IP, A, IA, E, R, EF, IEF>
): Operation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>> => {
  const statements = Effect.succeed(
    Statements.transactional(options.table ?? PgIdempotencyTable.defaultTable)
  )
  return SqlStoreKit.makeTransactional(options, () => statements)
}
