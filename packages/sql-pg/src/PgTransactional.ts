/**
 * The transactional mode: exactly once, with no in-progress window, for a downstream whose writes
 * go to the database that holds the idempotency records.
 *
 * An operation of this mode runs each attempt as one transaction on the `SqlClient` of the
 * context (`sql.withTransaction`): the reservation, the downstream's statements (it uses the same
 * `SqlClient`, which `@effect/sql` routes into the transaction) and the recorded outcome commit
 * together, or not at all. Other attempts never see the record IN_PROGRESS: a concurrent attempt on
 * the same key waits on the row until the transaction ends (bounded by the attempt's timeout or
 * deadline, through `lock_timeout`), then replays the committed outcome, or executes if it rolled
 * back. No lease is needed, and a crash leaves nothing behind.
 *
 * Every exit has a known outcome:
 *
 * | exit of the downstream | committed | the run fails or returns |
 * | --- | --- | --- |
 * | success | its writes and COMPLETED(success) | the value (the recorded one, decoded) |
 * | success that does not encode | its writes and COMPLETED(omitted) | `OutcomeNotReplayable` |
 * | failure, policy `store` | COMPLETED(failure), without its writes | the failure, replayed to retries |
 * | failure, policy `markFailed` | FAILED, without its writes | the failure; a retry takes over |
 * | failure, policy `release` | nothing | the failure; a retry executes |
 * | defect, interruption | nothing | the defect, the interruption |
 * | timeout (or its recording not done by the attempt's end) | nothing | `DownstreamTimeout` with `rolledBack: true` |
 * | COMMIT unanswered at the attempt's end | all or nothing, unknown here | `StoreUnavailable` (method `commit`) |
 * | the process dies | nothing (or all, if COMMIT was applied) | a retry executes once, or replays |
 *
 * The attempt answers by its end: the request's `deadline` when it has one (the downstream then
 * stops `LEASE_MARGIN` before it, to record and commit), or the timeout plus `LEASE_MARGIN`. Past
 * it, the transaction is interrupted without waiting for its ROLLBACK, or for a COMMIT already sent,
 * which finish on the connection; after an unknown answer a retry replays or executes once. Inside
 * a transaction of the caller's, the caller commits, and the attempt is not cut.
 *
 * A failure is recorded without the downstream's writes through a savepoint around the downstream,
 * taken only when the operation has a `failure` schema or an `onFailure` policy (one more round
 * trip). A first execution costs BEGIN, `lock_timeout`, the reservation, the downstream's
 * statements, the recording and COMMIT; a replay the same without the downstream.
 *
 * The records are the store's (`PgIdempotencyStore`, same table, same format): a record written by
 * one mode replays in the other, and a normal-mode attempt in progress (a live lease) gives a
 * transactional attempt `IdempotencyConflict`, or a wait under `IdempotencyPolicy.waitOnConflict`.
 * Lease and expiry follow the database's clock: use the store's default `clock: "server"` next to it.
 *
 * Only the statements on this database are covered. A call to another system inside the
 * transaction may happen and then be rolled back here (a retry calls it again): forward
 * `IdempotencyContext.stepKey` to it, or write an outbox row in the transaction and send it after
 * the commit (see the package's README).
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
 * The definition of a transactional operation: `Idempotency.Options` without the lease settings
 * and the timeout and defect policies (a transaction that does not commit leaves nothing, so there
 * is no lease to keep and no unknown outcome to record), plus `onTimeout` (see
 * `SqlStoreKit.TransactionalOptions`) and the table.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<P, IP, A, IA, E, R, EF, IEF>
  extends SqlStoreKit.TransactionalOptions<P, IP, A, IA, E, R, EF, IEF>
{
  /** The records table (the store's). Default `PgIdempotencyTable.defaultTable`. */
  readonly table?: PgIdempotencyTable.IdempotencyTable | undefined
}

/**
 * A transactional operation: the surface of `Idempotency.Operation`, on the `SqlClient` of the
 * context instead of an `IdempotencyStore`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Operation<P, A, E, R> extends SqlStoreKit.TransactionalOperation<P, A, E, R> {}

/**
 * Defines a transactional operation. The `execute` effect runs inside the attempt's transaction:
 * its statements on the context's `SqlClient` commit with the record, or roll back with it.
 *
 * Run inside a transaction of the caller's, the attempt is a savepoint of it, and its record
 * commits (or rolls back) with the caller's transaction.
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
