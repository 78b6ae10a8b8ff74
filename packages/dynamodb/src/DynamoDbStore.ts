/**
 * An `IdempotencyStore` on DynamoDB.
 *
 * Every method is one conditional request in the common case, with the decision taken by
 * DynamoDB atomically:
 *
 * - `reserve` is one `UpdateItem` whose condition admits an absent record or one the takeover
 *   rule allows (a FAILED record, or an IN_PROGRESS record whose lease ended, created by the same
 *   request); the attempt number is computed in the same write. On a failed condition
 *   (`ReturnValuesOnConditionCheckFailure: ALL_OLD`) the existing record comes back with the
 *   failure: a replay or a conflict costs one round trip. A record that expired but was not yet
 *   deleted by native TTL is replaced by a second, conditional `PutItem`. Where the endpoint
 *   returns no item with the failure (some emulators), one consistent `GetItem` reads it.
 * - `complete`, `markFailed`, `extend` and `release` are conditional on the record being live,
 *   IN_PROGRESS and holding the caller's token; otherwise they fail with `LeaseLost`.
 * - Times are epoch milliseconds from Effect's `Clock` (DynamoDB has no server clock in
 *   conditions); every item also carries the native TTL attribute in epoch seconds, and an
 *   expired item reads as absent everywhere.
 * - Throttling and transient failures are retried with a bounded `Schedule`, then fail with
 *   `StoreUnavailable`; any other failure is a `StoreError`.
 * - Each attempt is aborted at `requestTimeout` (2 seconds by default) and each call fails with
 *   `StoreUnavailable` at `callTimeout` (5 seconds by default), retries and their waits included,
 *   even when DynamoDB or the network stopped answering without closing the connection.
 *   Interrupting the calling fiber aborts the request in flight at once. A failed condition is never an
 *   error of its own: it is a reservation's `Existing` result, or `LeaseLost`.
 * - The store keeps the admin primitives of `IdempotencyAdmin` (provide `IdempotencyAdmin.layer`
 *   over a store layer). `unblock` is one conditional `DeleteItem` (fenced on the attempt seen).
 *   `list` and `stats` `Scan` the table, strongly consistent, and filter what they read: they are
 *   billed for every item scanned, the whole table for `stats` and over all of `list`'s pages
 *   (`limit` items scanned per page, so a page may hold fewer records than `limit`). A sparse
 *   global secondary index could serve `list` without a scan; the table has none.
 *
 * @example
 * ```ts
 * import { DynamoDbClient, DynamoDbStore } from "@effect-idempotency/dynamodb"
 * import { Layer } from "effect"
 *
 * const StoreLive = DynamoDbStore.layerWith({ tableName: "idempotency" }).pipe(
 *   Layer.provide(DynamoDbClient.layer({ region: "eu-west-1" }))
 * )
 * ```
 *
 * @since 0.1.0
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import * as Deadlines from "@effect-idempotency/core/StoreDeadlines"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { DynamoDbClient } from "./DynamoDbClient.js"
import { defaultKeyAttribute, defaultTableName, defaultTtlAttribute } from "./DynamoDbTable.js"
import * as Send from "./internal/send.js"
import * as internal from "./internal/store.js"

/**
 * Options of the store.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly tableName: string
  /** The partition key attribute (type `S`). Default `id`. */
  readonly keyAttribute?: string | undefined
  /** The native TTL attribute (type `N`, epoch seconds). Default `ttl`. */
  readonly ttlAttribute?: string | undefined
  /**
   * Retries of throttled requests (`ProvisionedThroughputExceededException`, `ThrottlingException`,
   * `RequestLimitExceeded`) and of transient failures (network errors, timeouts, 5xx); past them
   * the call fails with `StoreUnavailable`. Every request the store sends is safe to repeat: a
   * retry whose earlier attempt went through (its response was lost) recognizes its own write.
   * Default `defaultRetrySchedule`.
   */
  readonly retrySchedule?: Schedule.Schedule<unknown, unknown> | undefined
  /**
   * The most one attempt of a request may take; past it the request is aborted (its connection
   * closed) and retried (see `retrySchedule`). Default `defaultRequestTimeout` (2 seconds);
   * `Duration.infinity` for no limit.
   */
  readonly requestTimeout?: Duration.DurationInput | undefined
  /**
   * The most a store call may take, its retries and their waits included: past it the request in
   * flight is aborted and the call fails with `StoreUnavailable`, even when DynamoDB or the
   * network stopped answering without closing the connection. Default `defaultCallTimeout`
   * (5 seconds); `Duration.infinity` for no limit. `purgeExpired` applies it to each of its
   * requests. Interrupting the calling fiber aborts the request in flight at once, whatever the
   * limits.
   */
  readonly callTimeout?: Duration.DurationInput | undefined
  /**
   * Outcomes whose item would be larger than this are recorded as `StoredOutcome.Omitted`: the
   * record is COMPLETED (never executed again before it expires) and a replay fails with
   * `OutcomeNotReplayable`. Default 400 KiB, DynamoDB's item size limit. An outcome DynamoDB
   * refuses as too large is recorded the same way.
   */
  readonly maxItemBytes?: number | undefined
  /**
   * Run `purgeExpired` in the background at this interval, for the life of the layer
   * (`IdempotencyStore.layerPurge`). Default: never.
   */
  readonly purgeInterval?: Duration.DurationInput | undefined
  /** How many expired records each background purge deletes at most. Default 1000. */
  readonly purgeLimit?: number | undefined
  /** How many scan pages (of up to 1 MB each) one `purgeExpired` call reads at most. Default 100. */
  readonly purgeMaxPages?: number | undefined
}

/**
 * DynamoDB's item size limit, in bytes.
 *
 * @since 0.1.0
 * @category constants
 */
export const itemSizeLimit = 400 * 1024

/**
 * The default retries of throttled requests and transient failures: exponential from 50 ms,
 * jittered, at most 4 retries (about 0.75 s of waiting in all).
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultRetrySchedule: Schedule.Schedule<unknown, unknown> = Schedule.exponential("50 millis").pipe(
  Schedule.jittered,
  Schedule.intersect(Schedule.recurs(4))
)

/**
 * The most one attempt of a request may take unless told otherwise (`requestTimeout`): 2 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultRequestTimeout: Duration.Duration = Duration.seconds(2)

/**
 * The most a store call may take, retries included, unless told otherwise (`callTimeout`):
 * 5 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultCallTimeout: Duration.Duration = Duration.seconds(5)

/**
 * Builds a store on the table, with the client of the context.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Options
): Effect.Effect<IdempotencyStore.IdempotencyStore["Type"], never, DynamoDbClient> =>
  Effect.map(DynamoDbClient, ({ client }) => {
    const requestTimeout = Duration.decode(options.requestTimeout ?? defaultRequestTimeout)
    const callTimeout = Duration.decode(options.callTimeout ?? defaultCallTimeout)
    return internal.make({
      tableName: options.tableName,
      names: {
        key: options.keyAttribute ?? defaultKeyAttribute,
        ttl: options.ttlAttribute ?? defaultTtlAttribute
      },
      sender: {
        client,
        retry: options.retrySchedule ?? defaultRetrySchedule,
        requestTimeout,
        plainSignals: Send.acceptsPlainSignals(client),
        deadlines: Deadlines.make(Deadlines.tickFor(Duration.min(requestTimeout, callTimeout)))
      },
      callTimeout,
      maxItemBytes: options.maxItemBytes ?? itemSizeLimit,
      purgeMaxPages: options.purgeMaxPages ?? 100
    })
  })

/**
 * A store layer with options.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (options: Options): Layer.Layer<IdempotencyStore.IdempotencyStore, never, DynamoDbClient> =>
  IdempotencyStore.withPurge(Layer.effect(IdempotencyStore.IdempotencyStore, make(options)), options)

/**
 * A store layer, with options read from `Config`.
 *
 * ```ts
 * import { DynamoDbStore } from "@effect-idempotency/dynamodb"
 * import { Config } from "effect"
 *
 * const StoreLive = DynamoDbStore.layerConfig({
 *   tableName: Config.string("IDEMPOTENCY_TABLE"),
 *   callTimeout: Config.duration("IDEMPOTENCY_CALL_TIMEOUT").pipe(Config.withDefault("5 seconds"))
 * })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  config: Config.Config.Wrap<Options>
): Layer.Layer<IdempotencyStore.IdempotencyStore, ConfigError.ConfigError, DynamoDbClient> =>
  Layer.unwrapEffect(Effect.map(Config.unwrap(config), layerWith))

/**
 * A store layer on the table `idempotency`, with the default options.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<IdempotencyStore.IdempotencyStore, never, DynamoDbClient> = layerWith({
  tableName: defaultTableName
})
