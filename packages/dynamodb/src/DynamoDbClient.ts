/**
 * The DynamoDB client service: an AWS SDK v3 `DynamoDBClient` destroyed with its scope, making one
 * attempt per request (the store retries) and abandoning a connection after `connectTimeout`.
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
    readonly client: DynamoDBClient
  }
>() {}

/**
 * The default `connectTimeout`: 1 second, instead of the system's TCP timeout of minutes.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultConnectTimeout: Duration.Duration = Duration.seconds(1)

// a handler instance is left as it is: it was configured by whoever built it
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
 * Builds a client in the current scope and destroys it when the scope closes.
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
 * A client layer from the SDK's own configuration.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (config?: DynamoDBClientConfig): Layer.Layer<DynamoDbClient> =>
  Layer.scoped(DynamoDbClient, make(config))

/**
 * Client options read from `Config`; credentials are `Redacted`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClientOptions {
  readonly region?: string | undefined
  readonly endpoint?: string | undefined
  readonly accessKeyId?: Redacted.Redacted | undefined
  readonly secretAccessKey?: Redacted.Redacted | undefined
  readonly sessionToken?: Redacted.Redacted | undefined
  /** Default 1: the store retries. */
  readonly maxAttempts?: number | undefined
  readonly connectTimeout?: Duration.DurationInput | undefined
}

/**
 * Translates `ClientOptions` into the SDK's configuration.
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
