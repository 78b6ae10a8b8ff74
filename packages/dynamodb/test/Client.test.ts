import { ListTablesCommand } from "@aws-sdk/client-dynamodb"
import { DynamoDbClient } from "@effect-idempotency/dynamodb"
import { assert, it } from "@effect/vitest"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
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
