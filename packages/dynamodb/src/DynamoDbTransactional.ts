/**
 * The transactional mode: exactly once, with no in-progress window, for a downstream whose writes
 * are items of DynamoDB. The operation's `plan` computes its writes without performing them, and
 * one `TransactWriteItems` puts the record COMPLETED together with those writes: all or nothing.
 *
 * ```
 * GetItem (consistent)   -- COMPLETED: replay; IN_PROGRESS with a live lease: conflict
 * plan(payload)          -- { writes, value }: performs nothing
 * TransactWriteItems     -- the record, on the condition of what was read, and the writes
 * ```
 *
 * Every exit has a known outcome:
 *
 * | exit of the plan | written | the run fails or returns |
 * | --- | --- | --- |
 * | success | its writes and COMPLETED(success) | the value (the recorded one, decoded) |
 * | success that does not encode | its writes and COMPLETED(omitted) | `OutcomeNotReplayable` |
 * | a write's condition fails | nothing | `WritesRejected` (its index); a retry plans again |
 * | a write on the record's own item, or more than 99 | nothing, nothing sent | `WritesRejected` |
 * | failure, policy `store` | COMPLETED(failure), without its writes | the failure, replayed to retries |
 * | failure, policy `markFailed` | FAILED, without its writes | the failure; a retry takes over |
 * | failure, policy `release` | nothing | the failure; a retry executes |
 * | defect, interruption | nothing | the defect, the interruption |
 * | timeout | nothing | `DownstreamTimeout` with `rolledBack: true` |
 * | the transaction unanswered | all or nothing, unknown here | `StoreUnavailable`; a retry replays or executes |
 *
 * The record is never IN_PROGRESS: a crash before the transaction leaves nothing, after it
 * everything. A concurrent attempt that committed first cancels this attempt's transaction; the
 * record is then read again and replayed. A retried `TransactWriteItems` (its answer lost) carries
 * the same `ClientRequestToken`, so DynamoDB applies it once.
 *
 * The records are the store's (`DynamoDbStore`, same table, same item format): a record written by
 * one mode replays in the other, and a normal-mode attempt in progress gives `IdempotencyConflict`
 * (or a wait, under `IdempotencyPolicy.waitOnConflict`).
 *
 * Limits: at most 99 writes (DynamoDB's 100 per transaction, one is the record) and 4 MB in all; a
 * transaction costs twice the write capacity of plain writes; a write's content cannot depend on a
 * read inside the same transaction except through its condition. DynamoDB Local supports
 * transactions; dynalite does not (the transaction fails with `StoreError`).
 *
 * @example
 * ```ts
 * import { DynamoDbTransactional } from "@effect-idempotency/dynamodb"
 * import { IdempotencyContext } from "@effect-idempotency/core"
 * import { Effect, Schema } from "effect"
 *
 * const createOrder = DynamoDbTransactional.make({
 *   name: "create-order",
 *   table: { tableName: "idempotency" },
 *   payload: Schema.Struct({ sku: Schema.String, quantity: Schema.Int }),
 *   success: Schema.Struct({ orderId: Schema.String }),
 *   plan: ({ quantity, sku }) =>
 *     Effect.map(IdempotencyContext.IdempotencyContext, (context) => {
 *       const orderId = context.stepKey("order")
 *       return {
 *         writes: [{
 *           Put: {
 *             TableName: "orders",
 *             Item: { id: { S: orderId }, sku: { S: sku }, quantity: { N: String(quantity) } }
 *           }
 *         }],
 *         value: { orderId }
 *       }
 *     })
 * })
 *
 * // Effect<{ orderId: string }, IdempotencyError | WritesRejected, DynamoDbClient>
 * const program = createOrder.run({ key: "3f0c5c9e-client-key", payload: { sku: "A-1", quantity: 2 } })
 * ```
 *
 * @since 0.1.0
 */
import type { TransactWriteItem } from "@aws-sdk/client-dynamodb"
import * as Attempt from "@effect-idempotency/core/Attempt"
import type * as Idempotency from "@effect-idempotency/core/Idempotency"
import { fingerprintOf } from "@effect-idempotency/core/Idempotency"
import type * as IdempotencyContext from "@effect-idempotency/core/IdempotencyContext"
import type { IdempotencyError } from "@effect-idempotency/core/IdempotencyError"
import type * as IdempotencyPolicy from "@effect-idempotency/core/IdempotencyPolicy"
import * as OutcomeCodec from "@effect-idempotency/core/OutcomeCodec"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { DynamoDbClient } from "./DynamoDbClient.js"
import { defaultCallTimeout, defaultRequestTimeout, defaultRetrySchedule, itemSizeLimit } from "./DynamoDbStore.js"
import type * as DynamoDbStore from "./DynamoDbStore.js"
import { defaultKeyAttribute, defaultTtlAttribute } from "./DynamoDbTable.js"
import * as internal from "./internal/transactional.js"

/**
 * The writes of one execution, applied with its record or not at all, and its value.
 *
 * @since 0.1.0
 * @category models
 */
export interface Plan<A> {
  /** At most 99 (`maxWrites`): `Put`, `Update`, `Delete` or `ConditionCheck` items, with their conditions. */
  readonly writes: ReadonlyArray<TransactWriteItem>
  readonly value: A
}

/**
 * The most writes a plan may have: DynamoDB takes 100 items per transaction, one is the record.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxWrites: number = internal.MAX_WRITES

/**
 * The plan's writes were not applied, and nothing else was: the condition of the write at `index`
 * failed (`ConditionFailed`; a retry plans again), the plan had more writes than a transaction takes
 * (`TooManyWrites`), or the write at `index` is on the record's own item, the records table's item of
 * this key (`RecordKey`: DynamoDB takes one operation per item in a transaction, and the record is the
 * mode's own). The last two are refused before anything is sent.
 *
 * @since 0.1.0
 * @category errors
 */
export class WritesRejected extends Schema.TaggedError<WritesRejected>(
  "@effect-idempotency/dynamodb/WritesRejected"
)("WritesRejected", {
  operation: Schema.String,
  key: Schema.String,
  reason: Schema.Literal("ConditionFailed", "TooManyWrites", "RecordKey"),
  /** The index of the write whose condition failed or that is on the record's item, or the number of writes. */
  index: Schema.Number
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    switch (this.reason) {
      case "ConditionFailed":
        return `Operation "${this.operation}": the condition of write ${this.index} failed; nothing was written`
      case "TooManyWrites":
        return `Operation "${this.operation}": ${this.index} writes, more than a transaction takes (${internal.MAX_WRITES}); nothing was written`
      case "RecordKey":
        return `Operation "${this.operation}": write ${this.index} is on the idempotency record's own item (the records ` +
          "table's item of this key), which the transaction writes itself; nothing was written"
    }
  }
}

/**
 * The definition of an operation of the mode: `Idempotency.Options` without `execute`, the lease
 * settings and the timeout and defect policies (a transaction that is not applied leaves nothing),
 * plus `plan` and the store's table and limits.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<P, IP, A, IA, E, R, EF, IEF> extends
  Omit<
    Idempotency.Options<P, IP, A, IA, E, R, EF, IEF>,
    "execute" | "lease" | "leaseMargin" | "heartbeat" | "onDefect" | "completeRetry"
  >
{
  /** Computes the writes and the value, performing nothing: it may run again on a retry. */
  readonly plan: (payload: P) => Effect.Effect<Plan<A>, E, R>
  /** The records table (the store's) and its request limits, as `DynamoDbStore.Options` gives them. */
  readonly table: Pick<
    DynamoDbStore.Options,
    "tableName" | "keyAttribute" | "ttlAttribute" | "retrySchedule" | "requestTimeout" | "callTimeout" | "maxItemBytes"
  >
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
 * An operation of the mode: the surface of `Idempotency.Operation`, on the `DynamoDbClient` of the
 * context instead of an `IdempotencyStore`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Operation<P, A, E, R> {
  readonly name: string
  /** Runs the operation: one transaction, or a replay of the recorded outcome. */
  readonly run: (
    request: Idempotency.Request<P>
  ) => Effect.Effect<A, E | IdempotencyError | WritesRejected, R | DynamoDbClient>
  /** Like `run`, with the `Result`. */
  readonly runDetailed: (
    request: Idempotency.Request<P>
  ) => Effect.Effect<Idempotency.Result<A>, E | IdempotencyError | WritesRejected, R | DynamoDbClient>
}

/**
 * Defines an operation of the mode.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <P, IP, A, IA, E, R, EF = never, IEF = never>(
  options: Options<P, IP, A, IA, E, R, EF, IEF>
): Operation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>> => {
  // the defaults and checks every engine shares (a timeout or TTL that is not a positive duration throws)
  const settings = Attempt.resolve(options.name, { ttl: options.ttl, timeout: options.timeout })
  const failureSchema = options.failure
  const isStorableFailure = failureSchema === undefined ? () => false : Schema.is(failureSchema)
  const onFailure = options.onFailure
  const table = options.table
  const { runDetailed } = internal.make<P, A, E, Exclude<R, IdempotencyContext.IdempotencyContext>>({
    name: options.name,
    tableName: table.tableName,
    names: { key: table.keyAttribute ?? defaultKeyAttribute, ttl: table.ttlAttribute ?? defaultTtlAttribute },
    fingerprint: fingerprintOf(options.name, options.payload),
    codec: OutcomeCodec.make<A, IA, unknown, unknown>({
      name: options.name,
      success: options.success,
      failure: failureSchema as Schema.Schema<unknown, unknown> | undefined
    }),
    failurePolicy: (error) =>
      onFailure !== undefined ? onFailure(error) : isStorableFailure(error) ? "store" : "release",
    ttl: settings.ttl,
    timeout: settings.timeout,
    margin: settings.leaseMargin,
    inProgress: options.inProgress,
    onTimeout: options.onTimeout ?? "keepLease",
    key: options.key,
    retry: table.retrySchedule ?? defaultRetrySchedule,
    requestTimeout: Duration.decode(table.requestTimeout ?? defaultRequestTimeout),
    callTimeout: Duration.decode(table.callTimeout ?? defaultCallTimeout),
    maxItemBytes: table.maxItemBytes ?? itemSizeLimit,
    rejected: (operation, key, rejection) =>
      new WritesRejected({
        operation,
        key,
        reason: rejection._tag,
        index: rejection._tag === "TooManyWrites" ? rejection.count : rejection.index
      }),
    // the context is provided by the attempt
    plan: options.plan as (payload: P) => Effect.Effect<Plan<A>, E, Exclude<R, IdempotencyContext.IdempotencyContext>>
  })
  const run = runDetailed as Operation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>>["runDetailed"]
  return {
    name: options.name,
    runDetailed: run,
    run: (request) => Effect.map(run(request), (result) => result.value)
  }
}
