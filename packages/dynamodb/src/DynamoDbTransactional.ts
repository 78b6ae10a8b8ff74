/**
 * The transactional mode: the operation's `plan` computes its DynamoDB writes, and one
 * `TransactWriteItems` applies them with the record COMPLETED, all or nothing. Its guarantees and
 * limits are in README.md#transactional-mode-your-items-and-the-record-in-one-transactwriteitems.
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
 * The plan's writes were not applied, and nothing else was (`ConditionFailed`, `TooManyWrites`,
 * `RecordKey`; the write's `index`).
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
 * `Idempotency.Options` without `execute` and the policies a transaction makes moot, plus `plan`
 * and the store's table.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<P, IP, A, IA, E, R, EF, IEF> extends
  Omit<
    Idempotency.Options<P, IP, A, IA, E, R, EF, IEF>,
    "execute" | "lease" | "leaseMargin" | "heartbeat" | "maxHold" | "onDefect" | "completeRetry"
  >
{
  /** Computes the writes and the value, performing nothing: it may run again on a retry. */
  readonly plan: (payload: P) => Effect.Effect<Plan<A>, E, R>
  readonly table: Pick<
    DynamoDbStore.Options,
    "tableName" | "keyAttribute" | "ttlAttribute" | "retrySchedule" | "requestTimeout" | "callTimeout" | "maxItemBytes"
  >
  /** The normal-mode operation's `onTimeout` (README.md, "One record format"). */
  readonly onTimeout?: IdempotencyPolicy.TimeoutPolicy | undefined
}

/**
 * An operation of the mode, on the `DynamoDbClient` of the context.
 *
 * @since 0.1.0
 * @category models
 */
export interface Operation<P, A, E, R> {
  readonly name: string
  readonly run: (
    request: Idempotency.Request<P>
  ) => Effect.Effect<A, E | IdempotencyError | WritesRejected, R | DynamoDbClient>
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
  // the defaults and checks every mode shares (a timeout or TTL that is not a positive duration throws)
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
