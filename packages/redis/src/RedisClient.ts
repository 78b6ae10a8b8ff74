/**
 * The Redis client service: an ioredis `Redis` or `Cluster` that fails fast instead of queueing
 * (README.md#failures-timeouts-and-interruption).
 *
 * @example
 * ```ts
 * import { RedisClient } from "@effect-idempotency/redis"
 * import { Config } from "effect"
 *
 * const ClientLive = RedisClient.layerConfig({ url: Config.redacted("REDIS_URL") })
 * ```
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import type { Cluster, RedisOptions } from "ioredis"
import { Redis } from "ioredis"

/**
 * The Redis client service.
 *
 * @since 0.1.0
 * @category tags
 */
export class RedisClient extends Context.Tag("@effect-idempotency/redis/RedisClient")<
  RedisClient,
  {
    readonly client: Redis | Cluster
  }
>() {}

/**
 * The default reply deadline of a command: 2 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultCommandTimeout: Duration.Duration = Duration.seconds(2)

/**
 * The default deadline of a connection attempt: 2 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultConnectTimeout: Duration.Duration = Duration.seconds(2)

/**
 * The longest pause between two reconnection attempts: 1 second.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxReconnectDelay: Duration.Duration = Duration.seconds(1)

const millis = (duration: Duration.DurationInput): number =>
  Math.max(1, Math.ceil(Duration.toMillis(Duration.decode(duration))))

/**
 * The ioredis options of a client that fails fast, with the given timeouts; what each one is for
 * is in README.md#why-ioredis.
 *
 * @since 0.1.0
 * @category constructors
 */
export const recommendedOptions = (options?: {
  readonly commandTimeout?: Duration.DurationInput | undefined
  readonly connectTimeout?: Duration.DurationInput | undefined
}): RedisOptions => {
  const commandTimeout = millis(options?.commandTimeout ?? defaultCommandTimeout)
  const maxDelay = millis(maxReconnectDelay)
  return {
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    commandTimeout,
    socketTimeout: commandTimeout,
    connectTimeout: millis(options?.connectTimeout ?? defaultConnectTimeout),
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times - 1, 10), maxDelay)
  }
}

/**
 * ioredis's own options, over `recommendedOptions`, and an optional URL.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends RedisOptions {
  readonly url?: string | Redacted.Redacted | undefined
}

/**
 * A client in the current scope: it connects at once and is closed (`QUIT`) with the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options?: Options): Effect.Effect<RedisClient["Type"], never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const { url, ...rest } = options ?? {}
      const config: RedisOptions = { ...recommendedOptions(rest), ...rest }
      const client = url === undefined
        ? new Redis(config)
        : new Redis(Redacted.isRedacted(url) ? Redacted.value(url) : url, config)
      // failures reach the callers of each command; without a listener ioredis prints them
      client.on("error", () => {})
      return client
    }),
    (client) =>
      Effect.tryPromise(() => client.quit()).pipe(
        Effect.ignore,
        Effect.ensuring(Effect.sync(() => client.disconnect()))
      )
  ).pipe(Effect.map((client) => RedisClient.of({ client })))

/**
 * A client layer (see `make`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options?: Options): Layer.Layer<RedisClient> => Layer.scoped(RedisClient, make(options))

/**
 * Client options read from `Config`; the URL and the password are `Redacted`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClientOptions {
  readonly url?: Redacted.Redacted | undefined
  readonly host?: string | undefined
  readonly port?: number | undefined
  readonly username?: string | undefined
  readonly password?: Redacted.Redacted | undefined
  readonly db?: number | undefined
  readonly tls?: boolean | undefined
  readonly connectionName?: string | undefined
  readonly commandTimeout?: Duration.DurationInput | undefined
  readonly connectTimeout?: Duration.DurationInput | undefined
}

/**
 * Translates `ClientOptions` into `make`'s options.
 *
 * @since 0.1.0
 * @category constructors
 */
export const toOptions = (options: ClientOptions): Options => ({
  ...recommendedOptions(options),
  ...(options.url === undefined ? {} : { url: options.url }),
  ...(options.host === undefined ? {} : { host: options.host }),
  ...(options.port === undefined ? {} : { port: options.port }),
  ...(options.username === undefined ? {} : { username: options.username }),
  ...(options.password === undefined ? {} : { password: Redacted.value(options.password) }),
  ...(options.db === undefined ? {} : { db: options.db }),
  ...(options.tls === true ? { tls: {} } : {}),
  ...(options.connectionName === undefined ? {} : { connectionName: options.connectionName })
})

/**
 * A client layer from `Config`.
 *
 * @example
 * ```ts
 * import { RedisClient } from "@effect-idempotency/redis"
 * import { Config } from "effect"
 *
 * const ClientLive = RedisClient.layerConfig({
 *   url: Config.redacted("REDIS_URL"),
 *   commandTimeout: Config.duration("REDIS_COMMAND_TIMEOUT").pipe(Config.withDefault("2 seconds"))
 * })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  config: Config.Config.Wrap<ClientOptions>
): Layer.Layer<RedisClient, ConfigError.ConfigError> =>
  Layer.scoped(RedisClient, Effect.flatMap(Config.unwrap(config), (options) => make(toOptions(options))))

/**
 * A layer over a client of your own, which it neither connects nor closes; give it
 * `recommendedOptions()` (README.md#redisclient).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromClient = (client: Redis | Cluster): Layer.Layer<RedisClient> =>
  Layer.succeed(RedisClient, RedisClient.of({ client }))
