import {
  CreateTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  GetItemCommand
} from "@aws-sdk/client-dynamodb"
import { IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbTable } from "@effect-idempotency/dynamodb"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import { randomUUID } from "node:crypto"
import { backends, clientLayer, storeLayer, uniqueTableName } from "./utils/backends.js"
import { startAtWallClock } from "./utils/requests.js"

const freshId = () =>
  IdempotencyRecord.makeRecordId({ operation: `table-${randomUUID()}`, key: IdempotencyKey.unsafeMake(randomUUID()) })

const reserveRequest = (id: IdempotencyRecord.RecordId, overrides?: Partial<IdempotencyStore.ReserveRequest>) => ({
  id,
  token: randomUUID(),
  fingerprint: "sha256:table",
  lease: Duration.seconds(30),
  ttl: Duration.hours(1),
  takeover: true,
  ...overrides
})

const send = <A>(f: (client: DynamoDbClient.DynamoDbClient["Type"]["client"]) => Promise<A>) =>
  Effect.flatMap(DynamoDbClient.DynamoDbClient, ({ client }) => Effect.promise(() => f(client)))

/** `DynamoDbTable.create` on the live clock (it may wait for the table to become active). */
const create = (options: Parameters<typeof DynamoDbTable.create>[0]) =>
  TestServices.provideLive(DynamoDbTable.create(options))

for (const backend of backends) {
  layer(clientLayer(backend))(`DynamoDbTable on ${backend.name}`, (it) => {
    it.effect("creates an on-demand table with one string partition key and native TTL, once", () =>
      Effect.gen(function*() {
        const tableName = uniqueTableName("table")
        const created = yield* create({ tableName })
        assert.deepStrictEqual(created, {
          created: true,
          timeToLive: backend.timeToLiveApi ? "enabled" : "unsupported"
        })
        const { Table } = yield* send((client) => client.send(new DescribeTableCommand({ TableName: tableName })))
        assert.deepStrictEqual(Table?.KeySchema, [{ AttributeName: "id", KeyType: "HASH" }])
        assert.deepStrictEqual(Table?.AttributeDefinitions, [{ AttributeName: "id", AttributeType: "S" }])
        assert.strictEqual(Table?.BillingModeSummary?.BillingMode, "PAY_PER_REQUEST")
        if (backend.timeToLiveApi) {
          const ttl = yield* send((client) => client.send(new DescribeTimeToLiveCommand({ TableName: tableName })))
          assert.strictEqual(ttl.TimeToLiveDescription?.TimeToLiveStatus, "ENABLED")
          assert.strictEqual(ttl.TimeToLiveDescription?.AttributeName, "ttl")
        }
        // running it again changes nothing and does not fail
        const again = yield* create({ tableName })
        assert.deepStrictEqual(again, { created: false, timeToLive: created.timeToLive })
      }))

    it.effect("refuses an existing table with another key schema", () =>
      Effect.gen(function*() {
        const tableName = uniqueTableName("table")
        yield* send((client) =>
          client.send(
            new CreateTableCommand({
              TableName: tableName,
              BillingMode: "PAY_PER_REQUEST",
              AttributeDefinitions: [
                { AttributeName: "pk", AttributeType: "S" },
                { AttributeName: "sk", AttributeType: "S" }
              ],
              KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }, { AttributeName: "sk", KeyType: "RANGE" }]
            })
          )
        )
        const error = yield* Effect.flip(create({ tableName, keyAttribute: "pk" }))
        assert.strictEqual(error._tag, "StoreError")
        assert.include(String(error.cause), "exactly one key")
      }))

    it.effect("refuses native TTL enabled on another attribute, where the endpoint has TTL", () =>
      Effect.gen(function*() {
        const tableName = uniqueTableName("table")
        yield* create({ tableName, ttlAttribute: "other" })
        const result = yield* Effect.either(create({ tableName }))
        if (backend.timeToLiveApi) {
          assert.isTrue(result._tag === "Left" && result.left._tag === "StoreError")
        } else {
          // without a TTL API there is no TTL attribute to conflict with
          assert.deepStrictEqual(Either.getOrThrow(result), { created: false, timeToLive: "unsupported" })
        }
      }))
  })

  const keyAttribute = "pk"
  const ttlAttribute = "expires_at_s"
  const tableName = uniqueTableName("names")
  layer(storeLayer(backend, { tableName, keyAttribute, ttlAttribute }))(
    `custom attribute names on ${backend.name}`,
    (it) => {
      it.effect("the key and the native TTL attribute (epoch seconds, never before the record expires) follow every write", () =>
        Effect.gen(function*() {
          yield* startAtWallClock
          const store = yield* IdempotencyStore.IdempotencyStore
          const raw = (id: IdempotencyRecord.RecordId) =>
            send((client) =>
              client.send(
                new GetItemCommand({
                  TableName: tableName,
                  Key: { [keyAttribute]: { S: id.value } },
                  ConsistentRead: true
                })
              )
            ).pipe(Effect.map((output) => output.Item ?? {}))
          const ttlOf = (item: Record<string, { readonly N?: string | undefined }>) => Number(item[ttlAttribute]?.N)

          const id = freshId()
          const reserved = yield* store.reserve(
            reserveRequest(id, { lease: Duration.seconds(30), ttl: Duration.seconds(90) })
          )
          if (reserved._tag !== "Reserved") return assert.fail("expected Reserved")
          let item = yield* raw(id)
          assert.strictEqual(item[keyAttribute]?.S, id.value)
          assert.strictEqual(ttlOf(item), Math.ceil(reserved.expiresAt / 1000))
          assert.isAtLeast(ttlOf(item) * 1000, reserved.expiresAt)

          // extend past the record's expiry moves the expiry and the TTL with the lease
          yield* TestClock.adjust(Duration.seconds(20))
          yield* store.extend({ id, token: reserved.token, lease: Duration.minutes(5) })
          const extended = Option.getOrThrow(yield* store.get(id))
          assert.strictEqual(extended.expiresAt, extended.leaseUntil)
          item = yield* raw(id)
          assert.strictEqual(ttlOf(item), Math.ceil(extended.expiresAt / 1000))

          const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "42" })
          yield* store.complete({ id, token: reserved.token, outcome, ttl: Duration.hours(2) })
          const completed = Option.getOrThrow(yield* store.get(id))
          item = yield* raw(id)
          assert.strictEqual(ttlOf(item), Math.ceil(completed.expiresAt / 1000))
          assert.isUndefined(item["id"])
        }))

      it.effect("purgeExpired deletes expired records only, up to the limit per call", () =>
        Effect.gen(function*() {
          yield* startAtWallClock
          const store = yield* IdempotencyStore.IdempotencyStore
          // records of the other test live an hour and more: they stay
          const short = Array.from({ length: 5 }, freshId)
          const long = Array.from({ length: 2 }, freshId)
          for (const id of short) {
            yield* store.reserve(reserveRequest(id, { lease: Duration.seconds(5), ttl: Duration.seconds(5) }))
          }
          for (const id of long) yield* store.reserve(reserveRequest(id))
          assert.strictEqual(yield* store.purgeExpired(), 0)
          yield* TestClock.adjust(Duration.seconds(6))
          assert.strictEqual(yield* store.purgeExpired({ limit: 3 }), 3)
          assert.strictEqual(yield* store.purgeExpired({ limit: 3 }), 2)
          assert.strictEqual(yield* store.purgeExpired({ limit: 3 }), 0)
          for (const id of long) assert.isTrue(Option.isSome(yield* store.get(id)))
          for (const id of short) {
            const item = yield* send((client) =>
              client.send(new GetItemCommand({ TableName: tableName, Key: { [keyAttribute]: { S: id.value } } }))
            )
            assert.isUndefined(item.Item)
          }
        }))
    }
  )
}
