/**
 * An `IdempotencyStore` on DynamoDB: one conditional request per method in the common case. What
 * each method sends, its costs, time limits and retries are in the package's README.
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
 * Options of the store (see the README's "Modules" section).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly tableName: string
  readonly keyAttribute?: string | undefined
  readonly ttlAttribute?: string | undefined
  /** Default `defaultRetrySchedule`; see README.md#failures-and-retries. */
  readonly retrySchedule?: Schedule.Schedule<unknown, unknown> | undefined
  /** Default `defaultRequestTimeout`; see README.md#time-limits. */
  readonly requestTimeout?: Duration.DurationInput | undefined
  /** Default `defaultCallTimeout`; see README.md#time-limits. */
  readonly callTimeout?: Duration.DurationInput | undefined
  /** Default 400 KiB; see README.md#the-400-kb-item-limit. */
  readonly maxItemBytes?: number | undefined
  /** A background `purgeExpired` at this interval. Default: never. */
  readonly purgeInterval?: Duration.DurationInput | undefined
  readonly purgeLimit?: number | undefined
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
 * The default retries: exponential from 50 ms, jittered, at most 4 retries.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultRetrySchedule: Schedule.Schedule<unknown, unknown> = Schedule.exponential("50 millis").pipe(
  Schedule.jittered,
  Schedule.intersect(Schedule.recurs(4))
)

/**
 * The default `requestTimeout`: 2 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultRequestTimeout: Duration.Duration = Duration.seconds(2)

/**
 * The default `callTimeout`: 5 seconds.
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
