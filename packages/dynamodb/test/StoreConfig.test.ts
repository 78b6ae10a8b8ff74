/**
 * `DynamoDbStore.layerConfig`: the table, its attribute names and the purge read from the
 * `ConfigProvider`, and a missing table name reported as a `ConfigError`.
 */
import { GetItemCommand } from "@aws-sdk/client-dynamodb"
import { type IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore } from "@effect-idempotency/dynamodb"
import { StoreFixtures, Timing } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { backends, clientLayer, immediateRetries, tableLayer, uniqueTableName } from "./utils/backends.js"
import { startAtWallClock } from "./utils/requests.js"

const fromEnv = DynamoDbStore.layerConfig({
  tableName: Config.string("IDEMPOTENCY_TABLE"),
  keyAttribute: Config.string("IDEMPOTENCY_KEY_ATTRIBUTE").pipe(Config.withDefault(undefined)),
  ttlAttribute: Config.string("IDEMPOTENCY_TTL_ATTRIBUTE").pipe(Config.withDefault(undefined)),
  callTimeout: Config.duration("IDEMPOTENCY_CALL_TIMEOUT").pipe(Config.withDefault(undefined)),
  purgeInterval: Config.duration("IDEMPOTENCY_PURGE_INTERVAL").pipe(Config.withDefault(undefined)),
  retrySchedule: Config.succeed(immediateRetries)
})

const withEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

for (const backend of backends) {
  describe(`DynamoDbStore.layerConfig on ${backend.name}`, () => {
    it.scoped("the table and its attribute names come from the ConfigProvider, and so does the purge", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const tableName = uniqueTableName("config")
        const context = yield* Layer.build(
          fromEnv.pipe(
            Layer.provide(tableLayer({ tableName, keyAttribute: "pk", ttlAttribute: "expires" })),
            Layer.provideMerge(clientLayer(backend))
          )
        ).pipe(withEnv({
          IDEMPOTENCY_TABLE: tableName,
          IDEMPOTENCY_KEY_ATTRIBUTE: "pk",
          IDEMPOTENCY_TTL_ATTRIBUTE: "expires",
          IDEMPOTENCY_PURGE_INTERVAL: "1 minute"
        }))
        const store = Context.get(context, IdempotencyStore.IdempotencyStore)
        const { client } = Context.get(context, DynamoDbClient.DynamoDbClient)
        const raw = (id: IdempotencyRecord.RecordId) =>
          Effect.promise(() =>
            client.send(
              new GetItemCommand({ TableName: tableName, Key: { pk: { S: id.value } }, ConsistentRead: true })
            )
          ).pipe(Effect.map((output) => output.Item))

        const id = StoreFixtures.freshId({ operation: "config" })
        const reserved = yield* store.reserve(
          StoreFixtures.reserveRequest(id, { lease: Duration.seconds(5), ttl: Duration.seconds(5) })
        )
        assert.strictEqual(reserved._tag, "Reserved")
        const item = yield* raw(id)
        assert.isDefined(item)
        assert.isDefined(item?.expires?.N, "the TTL attribute is the configured one")
        // the record expires; the purge of the configuration deletes it a minute later. The first round
        // runs at once and is a real request: the clock moves only once the purge fiber sleeps
        yield* Timing.awaitSleeper("1 minute")
        yield* TestClock.adjust(Duration.minutes(1))
        // the purge runs on its own fiber: read until it has deleted (a loaded machine gets 30 s)
        yield* Timing.eventually(Effect.map(raw(id), (left) => left === undefined), "the purge did not delete", {
          within: "30 seconds"
        })
      }))

    it.effect("a missing table name is a ConfigError naming it", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(
          Layer.build(fromEnv.pipe(Layer.provide(clientLayer(backend)))).pipe(Effect.scoped, withEnv({}))
        )
        assert.include(String(error), "IDEMPOTENCY_TABLE")
      }))
  })
}
