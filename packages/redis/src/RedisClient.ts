/**
 * The Redis client service: an ioredis connection (`Redis`) or cluster client (`Cluster`) that the
 * store sends its scripts through.
 *
 * A client built here fails fast instead of queueing: no offline queue, no command resent after a
 * reconnection, every command answered within `commandTimeout` (default 2 seconds) and every
 * connection attempt settled within `connectTimeout` (default 2 seconds). So a store call on a
 * server that is down or stops answering fails with `StoreUnavailable` in bounded time, and an
 * interrupted call never leaves a command queued to run later. It reconnects in the background.
 *
 * A client of your own (`layerFromClient`) keeps the options you gave it; see
 * `recommendedOptions`.
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
    /** The ioredis client: one connection (`Redis`) or a cluster client (`Cluster`). */
    readonly client: Redis | Cluster
  }
>() {}

/**
 * The most a command may wait for its reply, unless told otherwise: 2 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultCommandTimeout: Duration.Duration = Duration.seconds(2)

/**
 * The most a connection attempt may take, unless told otherwise: 2 seconds.
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

/** Milliseconds for ioredis: whole, at least 1. */
const millis = (duration: Duration.DurationInput): number =>
  Math.max(1, Math.ceil(Duration.toMillis(Duration.decode(duration))))

/**
 * The ioredis options of a client that fails fast, with the given timeouts:
 *
 * - `enableOfflineQueue: false`: a command is never queued while the client is disconnected (the
 *   store waits for the connection itself, interruptibly, and sends nothing until then);
 * - `autoResendUnfulfilledCommands: false` and `maxRetriesPerRequest: 0`: the commands in flight
 *   when a connection drops fail at once, and are never sent again on the next connection;
 * - `commandTimeout` and `socketTimeout`: a command without a reply fails after `commandTimeout`,
 *   and a connection that stops answering is closed (and reconnected) after as long;
 * - `connectTimeout`: a connection attempt fails after it;
 * - reconnection: after 50 ms, doubling up to `maxReconnectDelay`, forever.
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
 * The options of `make` and `layer`: ioredis's own options, over `recommendedOptions`, and an
 * optional URL (`redis://[[user]:password@]host[:port][/db]`, `rediss://` for TLS).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends RedisOptions {
  readonly url?: string | Redacted.Redacted | undefined
}

/**
 * Builds a client in the current scope: it starts connecting at once, and is closed (`QUIT`, then
 * disconnected) when the scope closes. The options override `recommendedOptions()`.
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
 * Client options that can be read from `Config`. Either `url`, or `host` and `port`; the password
 * and the URL (which may hold one) are `Redacted`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClientOptions {
  /** `redis://[[user]:password@]host[:port][/db]`, or `rediss://` for TLS. */
  readonly url?: Redacted.Redacted | undefined
  readonly host?: string | undefined
  readonly port?: number | undefined
  readonly username?: string | undefined
  readonly password?: Redacted.Redacted | undefined
  readonly db?: number | undefined
  /** Connect with TLS (as `rediss://` does). */
  readonly tls?: boolean | undefined
  /** Shown by `CLIENT LIST`. */
  readonly connectionName?: string | undefined
  /** Default `defaultCommandTimeout` (2 seconds). */
  readonly commandTimeout?: Duration.DurationInput | undefined
  /** Default `defaultConnectTimeout` (2 seconds). */
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
 * A client layer over a client of your own (a `Redis` or a `Cluster`), for example one your
 * application already uses. The layer neither connects nor closes it (a client made with
 * `lazyConnect` is connected by the store's first call). Give it `recommendedOptions()`: the store
 * itself sends nothing while the client is not connected, but with ioredis's defaults a command
 * waits for its reply without a deadline, and the commands in flight when a connection drops are
 * sent again on the next one, after their callers may have given up.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromClient = (client: Redis | Cluster): Layer.Layer<RedisClient> =>
  Layer.succeed(RedisClient, RedisClient.of({ client }))
