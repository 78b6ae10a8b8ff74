import { DynamoDBClient, ListTablesCommand } from "@aws-sdk/client-dynamodb"
import { DynamoDbClient } from "@effect-idempotency/dynamodb"
import { assert, it } from "@effect/vitest"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { backends } from "./utils/backends.js"

const backend = backends[0]!

const fromEnv = DynamoDbClient.layerConfig({
  region: Config.string("REGION"),
  endpoint: Config.string("ENDPOINT"),
  accessKeyId: Config.redacted("ACCESS_KEY_ID").pipe(Config.withDefault(undefined)),
  secretAccessKey: Config.redacted("SECRET_ACCESS_KEY").pipe(Config.withDefault(undefined)),
  sessionToken: Config.redacted("SESSION_TOKEN").pipe(Config.withDefault(undefined))
})

const withEnv = (env: Record<string, string>) =>
  Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

it.scoped(`layerConfig: region, endpoint and redacted credentials reach the SDK (${backend.name})`, () =>
  Effect.gen(function*() {
    const { client } = yield* DynamoDbClient.DynamoDbClient
    const credentials = yield* Effect.promise(() => client.config.credentials())
    assert.strictEqual(credentials.accessKeyId, "local")
    assert.strictEqual(credentials.secretAccessKey, "local-secret")
    assert.strictEqual(credentials.sessionToken, "local-session")
    assert.strictEqual(yield* Effect.promise(() => client.config.region()), "us-east-1")
    assert.strictEqual(yield* Effect.promise(() => client.config.maxAttempts()), 1)
    const tables = yield* Effect.promise(() => client.send(new ListTablesCommand({})))
    assert.isArray(tables.TableNames)
  }).pipe(
    Effect.provide(fromEnv.pipe(
      Layer.provide(withEnv({
        REGION: "us-east-1",
        ENDPOINT: backend.endpoint,
        ACCESS_KEY_ID: "local",
        SECRET_ACCESS_KEY: "local-secret",
        SESSION_TOKEN: "local-session"
      }))
    ))
  ))

it.effect("layerConfig: an access key id without its secret is a ConfigError", () =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(
      Layer.build(fromEnv).pipe(
        Effect.scoped,
        Effect.provide(withEnv({ REGION: "us-east-1", ENDPOINT: backend.endpoint, ACCESS_KEY_ID: "local" }))
      )
    )
    assert.strictEqual(error._op, "MissingData")
    assert.include(String(error), "secretAccessKey")
  }))

it.effect("toSdkConfig: secrets are read from Redacted values only when the client is configured", () =>
  Effect.gen(function*() {
    const secret = Redacted.make("s3cr3t")
    assert.notInclude(String(secret), "s3cr3t")
    const config = yield* DynamoDbClient.toSdkConfig({
      region: "eu-west-1",
      accessKeyId: Redacted.make("AKID"),
      secretAccessKey: secret
    })
    assert.deepStrictEqual(config, {
      region: "eu-west-1",
      credentials: { accessKeyId: "AKID", secretAccessKey: "s3cr3t" }
    })
  }))

it.effect("make: the client is destroyed when its scope closes", () =>
  Effect.gen(function*() {
    const destroyed: Array<boolean> = []
    const service = yield* Effect.scoped(
      Effect.tap(DynamoDbClient.make({ region: "us-east-1" }), ({ client }) =>
        Effect.sync(() => {
          const destroy = client.destroy.bind(client)
          client.destroy = () => {
            destroyed.push(true)
            destroy()
          }
        }))
    )
    assert.isDefined(service.client)
    assert.deepStrictEqual(destroyed, [true])
  }))

/** The handler options the SDK client resolved, once it has sent a request. */
const handlerConfig = (layer: Layer.Layer<DynamoDbClient.DynamoDbClient, unknown>) =>
  Effect.gen(function*() {
    const { client } = yield* DynamoDbClient.DynamoDbClient
    yield* Effect.promise(() => client.send(new ListTablesCommand({})))
    const handler = client.config.requestHandler as unknown as { httpHandlerConfigs(): Record<string, unknown> }
    return handler.httpHandlerConfigs()
  }).pipe(Effect.provide(layer))

const local = { region: "us-east-1", credentials: { accessKeyId: "local", secretAccessKey: "local" } }

it.scoped("make: connections are abandoned after defaultConnectTimeout unless told otherwise", () =>
  Effect.gen(function*() {
    const defaults = yield* handlerConfig(DynamoDbClient.layer({ ...local, endpoint: backend.endpoint }))
    assert.strictEqual(defaults.connectionTimeout, Duration.toMillis(DynamoDbClient.defaultConnectTimeout))
    // handler options are kept, and completed
    const agent = { maxSockets: 7 }
    const merged = yield* handlerConfig(
      DynamoDbClient.layer({ ...local, endpoint: backend.endpoint, requestHandler: { httpAgent: agent } })
    )
    assert.strictEqual(merged.connectionTimeout, 1000)
    assert.strictEqual((merged.httpAgent as { readonly maxSockets: number }).maxSockets, 7)
    const own = yield* handlerConfig(
      DynamoDbClient.layer({ ...local, endpoint: backend.endpoint, requestHandler: { connectionTimeout: 3000 } })
    )
    assert.strictEqual(own.connectionTimeout, 3000)
  }))

it.scoped("make: a handler instance is left as it was built", () =>
  Effect.gen(function*() {
    // the handler the SDK builds by default, without a connection timeout
    const other = new DynamoDBClient({ ...local, endpoint: backend.endpoint })
    yield* Effect.addFinalizer(() => Effect.sync(() => other.destroy()))
    const requestHandler = other.config.requestHandler
    const layer = DynamoDbClient.layer({ ...local, endpoint: backend.endpoint, requestHandler })
    const config = yield* handlerConfig(layer)
    assert.isUndefined(config.connectionTimeout)
    const { client } = yield* Effect.provide(DynamoDbClient.DynamoDbClient, layer)
    assert.strictEqual(client.config.requestHandler, requestHandler)
  }))

it.scoped("layerConfig: connectTimeout reaches the SDK's handler", () =>
  Effect.gen(function*() {
    const config = yield* handlerConfig(
      DynamoDbClient.layerConfig({
        region: Config.string("REGION"),
        endpoint: Config.string("ENDPOINT"),
        accessKeyId: Config.redacted("ACCESS_KEY_ID"),
        secretAccessKey: Config.redacted("SECRET_ACCESS_KEY"),
        connectTimeout: Config.duration("CONNECT_TIMEOUT")
      }).pipe(
        Layer.provide(withEnv({
          REGION: "us-east-1",
          ENDPOINT: backend.endpoint,
          ACCESS_KEY_ID: "local",
          SECRET_ACCESS_KEY: "local",
          CONNECT_TIMEOUT: "250 millis"
        }))
      )
    )
    assert.strictEqual(config.connectionTimeout, 250)
  }))
