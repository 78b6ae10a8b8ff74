/**
 * The store's options and data layout: key names and the record's encoding, outcomes over
 * `maxOutcomeBytes`, native expiry with Effect's clock, the layers (`layer`, `layerWith`,
 * `layerConfig`), and the clients (built here and closed with their scope, or handed over and left
 * open).
 */
import { Idempotency, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { RedisClient, RedisStore } from "@effect-idempotency/redis"
import { assert, describe, it, layer } from "@effect/vitest"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import { Redis } from "ioredis"
import { randomUUID } from "node:crypto"
import {
  clientLayer,
  completeRecord,
  expectExisting,
  expectFailure,
  expectReserved,
  freshId,
  Payload,
  payload,
  rawCall,
  rawLayer,
  RawRedis,
  recordKey,
  redisUrl,
  reserveRequest,
  storeLayer,
  uniquePrefix
} from "./utils/fixtures.js"

const PREFIX = uniquePrefix("store")

describe("RedisStore options", () => {
  it.effect("a prefix with { or } and sizes out of range are InvalidOptions", () =>
    Effect.gen(function*() {
      const invalid: ReadonlyArray<readonly [RedisStore.Options, string]> = [
        [{ prefix: "{app}:" }, "prefix"],
        [{ prefix: "app}:" }, "prefix"],
        [{ maxOutcomeBytes: -1 }, "maxOutcomeBytes"],
        [{ maxOutcomeBytes: 1.5 }, "maxOutcomeBytes"],
        [{ maxOutcomeBytes: RedisStore.maxValueBytes + 1 }, "maxOutcomeBytes"],
        [{ purgeMaxPages: 0 }, "purgeMaxPages"]
      ]
      for (const [options, option] of invalid) {
        const error = yield* Effect.flip(
          Layer.build(RedisStore.layerWith(options)).pipe(
            Effect.provide(RedisClient.layerFromClient(new Redis({ lazyConnect: true }))),
            Effect.scoped
          )
        )
        assert.strictEqual(error._tag, "InvalidOptions")
        assert.strictEqual(error.option, option)
      }
    }))
})

layer(Layer.merge(storeLayer({ prefix: PREFIX }), rawLayer()), { timeout: "1 minute" })("RedisStore data", (it) => {
  it.effect("one string key per record, <prefix>{<record id>}, holding a readable header and the outcome", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const id = freshId()
      const reserved = expectReserved(yield* store.reserve(reserveRequest(id, { fingerprint: "sha256:ab" })))
      const key = recordKey(PREFIX, id)
      assert.strictEqual(key, `${PREFIX}{redis-test#${id.key}}`)
      assert.strictEqual(yield* rawCall((client) => client.type(key)), "string")
      assert.strictEqual(
        yield* rawCall((client) => client.get(key)),
        `v1 IN_PROGRESS 1 ${reserved.leaseUntil} ${reserved.expiresAt} - 36 9\n${reserved.token}sha256:ab`
      )
      const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "{\"orderId\":42}" })
      yield* store.complete({ id, token: reserved.token, outcome, ttl: Duration.hours(1) })
      const completed = Option.getOrThrow(yield* store.get(id))
      assert.strictEqual(
        yield* rawCall((client) => client.get(key)),
        `v1 COMPLETED 1 ${reserved.leaseUntil} ${completed.expiresAt} Success 36 9\n${reserved.token}sha256:ab` +
          "{\"orderId\":42}"
      )
    }))

  it.effect("tokens and fingerprints of any bytes (spaces, line feeds, unicode) round-trip", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const id = freshId()
      const token = "tok en\nv1 COMPLETED 1 2 3 Success 1 1\n ünï 🧾"
      const fingerprint = "fp \n\n 日本"
      expectReserved(yield* store.reserve(reserveRequest(id, { token, fingerprint })))
      const outcome = IdempotencyRecord.StoredOutcome.Failure({ error: "\n v1 \n" })
      yield* store.complete({ id, token, outcome, ttl: Duration.hours(1) })
      const replay = expectExisting(yield* store.reserve(reserveRequest(id, { fingerprint })))
      assert.deepStrictEqual(
        [replay.record.token, replay.record.fingerprint, replay.record.outcome],
        [token, fingerprint, outcome]
      )
    }))

  it.effect("an outcome over maxOutcomeBytes is recorded as omitted: one execution, a replay fails", () =>
    Effect.gen(function*() {
      const { client } = yield* RedisClient.RedisClient
      const context = yield* Layer.build(
        RedisStore.layerWith({ prefix: PREFIX, maxOutcomeBytes: 1000 }).pipe(
          Layer.provide(RedisClient.layerFromClient(client))
        )
      )
      const executions = yield* Ref.make(0)
      const logs = yield* Ref.make<ReadonlyArray<string>>([])
      const operation = Idempotency.make({
        name: `store-large-${randomUUID()}`,
        payload: Payload,
        success: Schema.String,
        execute: () => Effect.as(Ref.update(executions, (n) => n + 1), "é".repeat(600))
      })
      const key = randomUUID()
      const logger = Logger.make(({ message }) => Effect.runSync(Ref.update(logs, (all) => [...all, String(message)])))
      const first = yield* operation.runDetailed({ key, payload }).pipe(
        Effect.provide(Layer.merge(Layer.succeedContext(context), Logger.replace(Logger.defaultLogger, logger)))
      )
      assert.strictEqual(first.value.length, 600)
      assert.isTrue((yield* Ref.get(logs)).some((line) => line.includes("the outcome was not recorded")))
      const replay = yield* Effect.either(operation.run({ key, payload }).pipe(Effect.provide(context)))
      assert.isTrue(Either.isLeft(replay) && replay.left._tag === "OutcomeNotReplayable")
      assert.strictEqual(yield* Ref.get(executions), 1)
      const id = IdempotencyRecord.makeRecordId({ operation: operation.name, key: key as never })
      const record = Option.getOrThrow(yield* Effect.flatMap(IdempotencyStore.IdempotencyStore, (s) => s.get(id)))
      assert.strictEqual(record.outcome?._tag, "Omitted")
      assert.match(record.outcome?._tag === "Omitted" ? record.outcome.reason : "", /1202 bytes exceed .* 1000 bytes/)
    }).pipe(Effect.scoped))

  it.scoped("with Effect's clock, native expiry gives each record its remaining life on the server's clock", () =>
    Effect.gen(function*() {
      const { client } = yield* RedisClient.RedisClient
      const context = yield* Layer.build(
        RedisStore.layerWith({ prefix: PREFIX, clock: "effect" }).pipe(
          Layer.provide(RedisClient.layerFromClient(client))
        )
      )
      const store = Context.get(context, IdempotencyStore.IdempotencyStore)
      // the fiber's clock reads 1970 plus a day
      yield* TestClock.adjust(Duration.days(1))
      const id = freshId()
      const reserved = expectReserved(yield* store.reserve(reserveRequest(id, { ttl: Duration.minutes(10) })))
      assert.strictEqual(reserved.expiresAt, Duration.toMillis(Duration.days(1)) + 600_000)
      const remaining = yield* rawCall((raw) => raw.pttl(recordKey(PREFIX, id)))
      assert.isTrue(remaining > 595_000 && remaining <= 600_000, `${remaining}`)
      // the record expires on the fiber's clock, before Redis deletes it; a purge takes it
      yield* TestClock.adjust(Duration.minutes(11))
      assert.isTrue(Option.isNone(yield* store.get(id)))
      assert.strictEqual(yield* rawCall((raw) => raw.exists(recordKey(PREFIX, id))), 1)
      assert.isAtLeast(yield* store.purgeExpired({ limit: 1000 }), 1)
      assert.strictEqual(yield* rawCall((raw) => raw.exists(recordKey(PREFIX, id))), 0)
    }))
})

describe("RedisStore on a client with a keyPrefix of its own", () => {
  it.scoped("records live under the client's keyPrefix, and a purge finds them there", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("key-prefix")
      const context = yield* Layer.build(
        Layer.merge(
          storeLayer({ prefix: "records:", clock: "effect" }, clientLayer({ keyPrefix: prefix })),
          rawLayer()
        )
      )
      const store = Context.get(context, IdempotencyStore.IdempotencyStore)
      const raw = Context.get(context, RawRedis)
      const id = freshId()
      yield* completeRecord(store, id, Duration.seconds(10))
      const key = `${prefix}records:{${id.value}}`
      assert.strictEqual(yield* Effect.promise(() => raw.exists(key)), 1)
      yield* TestClock.adjust(Duration.seconds(11))
      assert.strictEqual(yield* store.purgeExpired(), 1)
      assert.strictEqual(yield* Effect.promise(() => raw.exists(key)), 0)
    }))
})

describe("RedisStore layers and clients", () => {
  it.scoped("RedisStore.layer: prefix idempotency:, the server's clock", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(Layer.merge(RedisStore.layer.pipe(Layer.provide(clientLayer())), rawLayer()))
      const store = Context.get(context, IdempotencyStore.IdempotencyStore)
      const raw = Context.get(context, RawRedis)
      const id = freshId(`store-${randomUUID()}`)
      // the TestClock reads 1970: these times are the server's
      const reserved = expectReserved(yield* store.reserve(reserveRequest(id, { ttl: Duration.seconds(30) })))
      assert.isAbove(reserved.expiresAt, 1_700_000_000_000)
      assert.strictEqual(yield* Effect.promise(() => raw.exists(`idempotency:{${id.value}}`)), 1)
      yield* store.release({ id, token: reserved.token })
      assert.strictEqual(yield* Effect.promise(() => raw.exists(`idempotency:{${id.value}}`)), 0)
    }))

  it.scoped("RedisClient.layerConfig and RedisStore.layerConfig read their options from Config", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("config")
      const provider = ConfigProvider.fromMap(
        new Map([
          ["REDIS_URL", redisUrl],
          ["PREFIX", prefix],
          ["CLOCK", "effect"],
          ["MAX_OUTCOME_BYTES", "2048"],
          ["COMMAND_TIMEOUT", "1 second"]
        ])
      )
      const live = RedisStore.layerConfig({
        prefix: Config.string("PREFIX"),
        clock: Config.literal("server", "effect")("CLOCK"),
        maxOutcomeBytes: Config.integer("MAX_OUTCOME_BYTES")
      }).pipe(
        Layer.provideMerge(RedisClient.layerConfig({
          url: Config.redacted("REDIS_URL"),
          commandTimeout: Config.duration("COMMAND_TIMEOUT")
        })),
        Layer.provide(Layer.setConfigProvider(provider))
      )
      const context = yield* Layer.build(live)
      const store = Context.get(context, IdempotencyStore.IdempotencyStore)
      const { client } = Context.get(context, RedisClient.RedisClient)
      assert.strictEqual((client as Redis).options.commandTimeout, 1000)
      assert.strictEqual((client as Redis).options.enableOfflineQueue, false)
      const id = freshId()
      expectReserved(yield* store.reserve(reserveRequest(id)))
      // Effect's clock: the TestClock's 1970
      const record = Option.getOrThrow(yield* store.get(id))
      assert.isBelow(record.expiresAt, 1_000_000_000)
      assert.strictEqual(yield* Effect.promise(() => client.exists(`${prefix}{${id.value}}`)), 1)

      const invalid = yield* Effect.flip(Layer.build(
        RedisStore.layerConfig({ prefix: Config.succeed("{x}") }).pipe(
          Layer.provide(RedisClient.layerFromClient(client))
        )
      ))
      assert.strictEqual(invalid._tag, "InvalidOptions")
    }))

  it.effect("a client built by RedisClient.layer is closed with its scope; a handed-over client is left open", () =>
    Effect.gen(function*() {
      const own = yield* Effect.scoped(
        Effect.gen(function*() {
          const context = yield* Layer.build(storeLayer({ prefix: PREFIX }))
          yield* Context.get(context, IdempotencyStore.IdempotencyStore).get(freshId())
          return Context.get(context, RedisClient.RedisClient).client
        })
      )
      // QUIT was answered; the connection ends as the server closes it
      for (let i = 0; i < 200 && own.status !== "end"; i++) yield* TestServices.provideLive(Effect.sleep("5 millis"))
      assert.strictEqual(own.status, "end")

      const mine = new Redis(redisUrl, RedisClient.recommendedOptions())
      yield* Effect.scoped(
        Effect.gen(function*() {
          const context = yield* Layer.build(storeLayer({ prefix: PREFIX }, RedisClient.layerFromClient(mine)))
          yield* Context.get(context, IdempotencyStore.IdempotencyStore).get(freshId())
        })
      )
      assert.strictEqual(mine.status, "ready")
      assert.strictEqual(mine.listenerCount("ready"), 0)
      // a client closed by its owner: every call fails at once with StoreUnavailable
      yield* Effect.promise(() => mine.quit())
      const store = yield* IdempotencyStore.IdempotencyStore.pipe(
        Effect.provide(RedisStore.layer.pipe(Layer.provide(RedisClient.layerFromClient(mine))))
      )
      expectFailure(yield* Effect.exit(store.get(freshId())), "StoreUnavailable", "get")
    }))

  it.scoped("a handed-over client made with lazyConnect is connected by the first call", () =>
    Effect.gen(function*() {
      const lazy = yield* Effect.acquireRelease(
        Effect.sync(() => new Redis(redisUrl, { ...RedisClient.recommendedOptions(), lazyConnect: true })),
        (client) => Effect.sync(() => client.disconnect())
      )
      assert.strictEqual(lazy.status, "wait")
      const context = yield* Layer.build(
        RedisStore.layerWith({ prefix: PREFIX }).pipe(Layer.provide(RedisClient.layerFromClient(lazy)))
      )
      const store = Context.get(context, IdempotencyStore.IdempotencyStore)
      assert.isTrue(Option.isNone(yield* store.get(freshId())))
      assert.strictEqual(lazy.status, "ready")
    }))

  it.effect("a store used after its scope closed fails with StoreError while its client is not connected", () =>
    Effect.gen(function*() {
      const lazy = new Redis(redisUrl, { ...RedisClient.recommendedOptions(), lazyConnect: true })
      const store = yield* IdempotencyStore.IdempotencyStore.pipe(
        Effect.provide(RedisStore.layerWith({ prefix: PREFIX }).pipe(Layer.provide(RedisClient.layerFromClient(lazy))))
      )
      expectFailure(yield* Effect.exit(store.get(freshId())), "StoreError", "get")
      assert.strictEqual(lazy.status, "wait")
    }))
})
