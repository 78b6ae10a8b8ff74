/**
 * The Redis / Valkey `IdempotencyStore`, on ioredis: every method is one Lua script on one key,
 * one round trip. Guarantees, costs and the data layout are in the package's README.
 *
 * @example
 * ```ts
 * import { RedisClient, RedisStore } from "@effect-idempotency/redis"
 * import { Config, Layer } from "effect"
 *
 * const StoreLive = RedisStore.layer.pipe(
 *   Layer.provide(RedisClient.layerConfig({ url: Config.redacted("REDIS_URL") }))
 * )
 * ```
 *
 * @since 0.1.0
 */
import type { ClockSource } from "@effect-idempotency/core/IdempotencyStore"
import { IdempotencyStore, withPurge } from "@effect-idempotency/core/IdempotencyStore"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Connection from "./internal/connection.js"
import * as internal from "./internal/store.js"
import { RedisClient } from "./RedisClient.js"

/**
 * Options of the store (see the README's "Modules" section).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly prefix?: string | undefined
  /** Default `"server"`; see README.md#time. */
  readonly clock?: ClockSource | undefined
  /** Default 1 MiB, at most `maxValueBytes`; see README.md#outcome-size. */
  readonly maxOutcomeBytes?: number | undefined
  /** A background `purgeExpired` at this interval. Default: never. */
  readonly purgeInterval?: Duration.DurationInput | undefined
  readonly purgeLimit?: number | undefined
  readonly purgeMaxPages?: number | undefined
  /** One span per store call. Default `false`; see README.md#tracing. */
  readonly spans?: boolean | undefined
}

/**
 * The default key prefix.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultPrefix = "idempotency:"

/**
 * The default largest outcome kept: 1 MiB.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultMaxOutcomeBytes = 1024 * 1024

/**
 * The largest `maxOutcomeBytes` accepted: Redis's 512 MB value limit, less room for the record.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxValueBytes = 512 * 1024 * 1024 - 64 * 1024

/**
 * A store option that cannot be used.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidOptions extends Schema.TaggedError<InvalidOptions>("@effect-idempotency/redis/InvalidOptions")(
  "InvalidOptions",
  {
    option: Schema.String,
    reason: Schema.String
  }
) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Invalid Redis store option ${this.option}: ${this.reason}`
  }
}

const validate = (options: Options | undefined): Effect.Effect<internal.Config, InvalidOptions> => {
  const prefix = options?.prefix ?? defaultPrefix
  if (/[{}]/.test(prefix)) {
    return Effect.fail(new InvalidOptions({ option: "prefix", reason: "it may not contain { or }" }))
  }
  const maxOutcomeBytes = options?.maxOutcomeBytes ?? defaultMaxOutcomeBytes
  if (!Number.isSafeInteger(maxOutcomeBytes) || maxOutcomeBytes < 0 || maxOutcomeBytes > maxValueBytes) {
    return Effect.fail(
      new InvalidOptions({ option: "maxOutcomeBytes", reason: `a whole number from 0 to ${maxValueBytes}` })
    )
  }
  const purgeMaxPages = options?.purgeMaxPages ?? 100
  if (!Number.isSafeInteger(purgeMaxPages) || purgeMaxPages < 1) {
    return Effect.fail(new InvalidOptions({ option: "purgeMaxPages", reason: "a whole number from 1" }))
  }
  return Effect.succeed({
    prefix,
    clock: options?.clock ?? "server",
    maxOutcomeBytes,
    purgeMaxPages,
    spans: options?.spans ?? false
  })
}

const fromConfig = (
  config: internal.Config
): Effect.Effect<IdempotencyStore["Type"], never, RedisClient | Scope.Scope> =>
  Effect.flatMap(
    RedisClient,
    ({ client }) => Effect.map(Connection.make(client), (connection) => internal.make(connection, config))
  )

/**
 * Builds a store on the client of the context, for the life of the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options?: Omit<Options, "purgeInterval" | "purgeLimit">
): Effect.Effect<IdempotencyStore["Type"], InvalidOptions, RedisClient | Scope.Scope> =>
  Effect.flatMap(validate(options), fromConfig)

/**
 * The store as a layer, with options.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (options?: Options): Layer.Layer<IdempotencyStore, InvalidOptions, RedisClient> =>
  withPurge(Layer.scoped(IdempotencyStore, make(options)), options)

/**
 * The store as a layer: prefix `idempotency:`, the server's clock, outcomes up to 1 MiB.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<IdempotencyStore, never, RedisClient> = Layer.scoped(
  IdempotencyStore,
  fromConfig({
    prefix: defaultPrefix,
    clock: "server",
    maxOutcomeBytes: defaultMaxOutcomeBytes,
    purgeMaxPages: 100,
    spans: false
  })
)

/**
 * The store as a layer, with options read from `Config`.
 *
 * @example
 * ```ts
 * import { RedisStore } from "@effect-idempotency/redis"
 * import { Config } from "effect"
 *
 * const StoreLive = RedisStore.layerConfig({
 *   prefix: Config.string("IDEMPOTENCY_PREFIX").pipe(Config.withDefault("idempotency:"))
 * })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  config: Config.Config.Wrap<Options>
): Layer.Layer<IdempotencyStore, ConfigError.ConfigError | InvalidOptions, RedisClient> =>
  Layer.unwrapEffect(Effect.map(Config.unwrap(config), layerWith))
