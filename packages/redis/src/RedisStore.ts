/**
 * The Redis / Valkey `IdempotencyStore`, on ioredis.
 *
 * Every method is one Lua script, run atomically by the server in one round trip (`EVALSHA`, or
 * `EVAL` the first time a client sends it and after `NOSCRIPT`): a first execution costs 2 (reserve,
 * complete), a replay 1, a conflict 1. The reservation creates the record, takes over an expired
 * lease or a FAILED record of the same request, or returns the existing record with its outcome;
 * `complete`, `release`, `markFailed` and `extend` act only while the caller's fencing token holds
 * the live record, and fail with `LeaseLost` otherwise.
 *
 * Each record is one string key, `<prefix>{<record id>}`: every script touches that key alone, so
 * the store works on a Redis Cluster (the id is the key's hash tag). Lease and expiry are decided
 * by the server's clock (`TIME`, read inside each script) by default: one clock for every function
 * instance. Records also carry a native expiry (`PXAT`) at their `expires_at`, so Redis deletes
 * them by itself.
 *
 * The store keeps the admin primitives of `IdempotencyAdmin` (`IdempotencyAdmin.layer` over it):
 * `get` and `unblock` are one script each on the record's key; `list` and `stats` walk the keys
 * with `SCAN` (see the README's "Admin" section for their costs).
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
 * Options of the store.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Prepended to every record's key. Default `idempotency:`. It may not contain `{` or `}`. */
  readonly prefix?: string | undefined
  /**
   * Which clock decides lease and TTL expiry. Default `"server"`: the Redis server's `TIME`, read
   * inside each script, one clock for every function instance. `"effect"`: the fiber's `Clock`,
   * sent as an argument of each script (for `TestClock`, or when expiry must follow the
   * application's clock); native expiry then gives each record the same remaining life on the
   * server's clock.
   */
  readonly clock?: ClockSource | undefined
  /**
   * Outcomes of more UTF-8 bytes than this are recorded as `StoredOutcome.Omitted`: the record is
   * COMPLETED (never executed again before it expires) and a replay fails with
   * `OutcomeNotReplayable`. Default `defaultMaxOutcomeBytes` (1 MiB); at most `maxValueBytes`.
   */
  readonly maxOutcomeBytes?: number | undefined
  /**
   * Run `purgeExpired` in the background at this interval, for the life of the layer
   * (`IdempotencyStore.layerPurge`). Default: never.
   */
  readonly purgeInterval?: Duration.DurationInput | undefined
  /** How many expired records each background purge deletes at most. Default 1000. */
  readonly purgeLimit?: number | undefined
  /** How many `SCAN` pages (of about 1000 keys) one `purgeExpired` reads per node at most. Default 100. */
  readonly purgeMaxPages?: number | undefined
  /**
   * Run each store call in a span of its own, `RedisStore.<method>` (attribute `db.system: redis`), a
   * child of the caller's (the `Idempotency` combinator's `Idempotency.run`). Default `false`: a span
   * costs about 15 µs of CPU, a tenth of what a store call costs the client here.
   */
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
 * The default largest outcome kept: 1 MiB. A replay sends the whole outcome back on every retry
 * and Redis copies it on its one thread; keep outcomes small.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultMaxOutcomeBytes = 1024 * 1024

/**
 * The largest `maxOutcomeBytes` accepted: Redis's 512 MB limit of a string value (and of a
 * command's argument by default), less room for the rest of the record.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxValueBytes = 512 * 1024 * 1024 - 64 * 1024

/**
 * A store option that cannot be used: a key prefix with `{` or `}` (it would change the hash tag of
 * every key, putting all records in one cluster slot), or a size that is not a positive integer up
 * to `maxValueBytes`.
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
 * Builds a store on the client of the context. It watches the client's connection for the life of
 * the scope; its methods have no requirements.
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
