/**
 * The DynamoDB client service: an AWS SDK v3 `DynamoDBClient` that lives as long as the scope
 * that built it, and is destroyed (its sockets closed) when that scope closes.
 *
 * The client makes one attempt per request unless told otherwise (`maxAttempts`): the store
 * retries throttled requests itself, with an Effect `Schedule`, so that retries are bounded,
 * visible and interruptible. A connection that is not established within `defaultConnectTimeout`
 * (1 second) is abandoned, unless told otherwise (`connectTimeout`, or the SDK's
 * `requestHandler.connectionTimeout`).
 *
 * @example
 * ```ts
 * import { DynamoDbClient } from "@effect-idempotency/dynamodb"
 * import { Config } from "effect"
 *
 * const ClientLive = DynamoDbClient.layerConfig({
 *   region: Config.string("AWS_REGION"),
 *   endpoint: Config.string("DYNAMODB_ENDPOINT").pipe(Config.withDefault(undefined))
 * })
 * ```
 *
 * @since 0.1.0
 */
import type { DynamoDBClientConfig } from "@aws-sdk/client-dynamodb"
import { DynamoDBClient } from "@aws-sdk/client-dynamodb"
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"

/**
 * The DynamoDB client service.
 *
 * @since 0.1.0
 * @category tags
 */
export class DynamoDbClient extends Context.Tag("@effect-idempotency/dynamodb/DynamoDbClient")<
  DynamoDbClient,
  {
    /** The SDK client. Add middleware to its `middlewareStack` to observe or shape requests. */
    readonly client: DynamoDBClient
  }
>() {}

/**
 * How long establishing a connection may take unless told otherwise: 1 second. Past it the
 * attempt fails (`TimeoutError`, retried by the store) instead of waiting for the operating
 * system's TCP timeout, which is minutes.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultConnectTimeout: Duration.Duration = Duration.seconds(1)

/**
 * The SDK's handler options (or the handler itself) with `connectionTimeout` set to
 * `defaultConnectTimeout` when the configuration leaves it out. A handler instance is left as it
 * is: it was configured by whoever built it.
 */
const withConnectTimeout = (
  requestHandler: DynamoDBClientConfig["requestHandler"]
): NonNullable<DynamoDBClientConfig["requestHandler"]> => {
  const connectionTimeout = Duration.toMillis(defaultConnectTimeout)
  if (requestHandler === undefined) return { connectionTimeout }
  const configured = Predicate.hasProperty(requestHandler, "handle") ||
    (Predicate.hasProperty(requestHandler, "connectionTimeout") && requestHandler.connectionTimeout !== undefined)
  return configured ? requestHandler : { ...requestHandler, connectionTimeout }
}

/**
 * Builds a client in the current scope and destroys it when the scope closes. `maxAttempts`
 * defaults to 1 (the store owns retries), and the connection timeout of the SDK's handler
 * (`requestHandler.connectionTimeout`, in milliseconds) to `defaultConnectTimeout`, unless
 * `requestHandler` is a handler instance.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (config?: DynamoDBClientConfig): Effect.Effect<DynamoDbClient["Type"], never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() =>
      new DynamoDBClient({ maxAttempts: 1, ...config, requestHandler: withConnectTimeout(config?.requestHandler) })
    ),
    (client) => Effect.sync(() => client.destroy())
  ).pipe(Effect.map((client) => DynamoDbClient.of({ client })))

/**
 * A client layer from the SDK's own configuration (for credential providers, custom request
 * handlers and anything else the SDK accepts).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (config?: DynamoDBClientConfig): Layer.Layer<DynamoDbClient> =>
  Layer.scoped(DynamoDbClient, make(config))

/**
 * Client options that can be read from `Config`. Credentials are `Redacted`; without them the
 * SDK's default provider chain applies (environment, shared files, the Lambda role).
 *
 * @since 0.1.0
 * @category models
 */
export interface ClientOptions {
  readonly region?: string | undefined
  /** An endpoint URL, for DynamoDB Local, an emulator or a VPC endpoint. */
  readonly endpoint?: string | undefined
  readonly accessKeyId?: Redacted.Redacted | undefined
  readonly secretAccessKey?: Redacted.Redacted | undefined
  readonly sessionToken?: Redacted.Redacted | undefined
  /** Attempts per request made by the SDK itself (default 1). */
  readonly maxAttempts?: number | undefined
  /** How long establishing a connection may take (default `defaultConnectTimeout`, 1 second). */
  readonly connectTimeout?: Duration.DurationInput | undefined
}

/**
 * Translates `ClientOptions` into the SDK's configuration. Fails when only one of the access key
 * id and the secret is given.
 *
 * @since 0.1.0
 * @category constructors
 */
export const toSdkConfig = (options: ClientOptions): Effect.Effect<DynamoDBClientConfig, ConfigError.ConfigError> => {
  const { accessKeyId, secretAccessKey, sessionToken } = options
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    return Effect.fail(
      ConfigError.MissingData(
        [accessKeyId === undefined ? "accessKeyId" : "secretAccessKey"],
        "DynamoDB credentials need both an access key id and a secret access key"
      )
    )
  }
  return Effect.succeed({
    ...(options.region === undefined ? {} : { region: options.region }),
    ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
    ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }),
    ...(options.connectTimeout === undefined
      ? {}
      : { requestHandler: { connectionTimeout: Duration.toMillis(options.connectTimeout) } }),
    ...(accessKeyId === undefined || secretAccessKey === undefined ? {} : {
      credentials: {
        accessKeyId: Redacted.value(accessKeyId),
        secretAccessKey: Redacted.value(secretAccessKey),
        ...(sessionToken === undefined ? {} : { sessionToken: Redacted.value(sessionToken) })
      }
    })
  })
}

/**
 * A client layer from `Config`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  config: Config.Config.Wrap<ClientOptions>
): Layer.Layer<DynamoDbClient, ConfigError.ConfigError> =>
  Layer.scoped(
    DynamoDbClient,
    Config.unwrap(config).pipe(Effect.flatMap(toSdkConfig), Effect.flatMap(make))
  )
