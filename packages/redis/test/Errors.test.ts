/**
 * Every failure is typed, never a defect: a key that holds something else than a record (another
 * format, another type), replies the store does not expect, a client that throws, and the server's
 * error replies, classified as `StoreUnavailable` (it may serve again soon) or `StoreError`.
 */
import { IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { RedisClient, RedisStore } from "@effect-idempotency/redis"
import * as StoreCalls from "@effect-idempotency/test-support/StoreCalls"
import { assert, describe, it, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import type { Redis } from "ioredis"
import { ReplyError } from "ioredis"
import { EventEmitter } from "node:events"
import {
  expectFailure,
  expectReserved,
  freshId,
  rawCall,
  rawLayer,
  recordKey,
  reserveRequest,
  storeLayer,
  uniquePrefix
} from "./utils/fixtures.js"

const PREFIX = uniquePrefix("errors")
const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "1" })

/** Every method but the purge (which reads no record by its key) on `id`. */
const everyMethod = (store: IdempotencyStore.IdempotencyStore["Type"], id: IdempotencyRecord.RecordId) =>
  StoreCalls.everyMethod(store, { id, token: "t" }).filter(([method]) => method !== "purgeExpired")

layer(Layer.merge(storeLayer({ prefix: PREFIX, clock: "effect" }), rawLayer()), { timeout: "1 minute" })(
  "RedisStore on keys that hold something else",
  (it) => {
    it.effect("a string in another format: StoreError from every method, the key untouched", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        yield* rawCall((client) => client.set(recordKey(PREFIX, id), "{\"status\":\"COMPLETED\"}"))
        for (const [method, effect] of everyMethod(store, id)) {
          expectFailure(yield* Effect.exit(effect), "StoreError", method)
        }
        assert.strictEqual(yield* rawCall((client) => client.get(recordKey(PREFIX, id))), "{\"status\":\"COMPLETED\"}")
      }))

    it.effect("a hash at a record's key (WRONGTYPE): StoreError from every method", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        yield* rawCall((client) => client.hset(recordKey(PREFIX, id), "status", "COMPLETED"))
        for (const [method, effect] of everyMethod(store, id)) {
          const error = expectFailure(yield* Effect.exit(effect), "StoreError", method) as { readonly cause?: unknown }
          assert.match(String(error.cause), /WRONGTYPE/)
        }
      }))

    it.effect("a purge deletes expired records and leaves every other key under the prefix alone", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const expired = freshId()
        const owner = expectReserved(yield* store.reserve(reserveRequest(expired)))
        yield* store.complete({ id: expired, token: owner.token, outcome, ttl: Duration.seconds(10) })
        // expired on the store's clock (Effect's, here), still there natively
        const live = freshId()
        expectReserved(yield* store.reserve(reserveRequest(live)))
        const foreign = [`${PREFIX}{not-a-record}`, `${PREFIX}{a-hash}`, `${PREFIX}{v1-lookalike}`]
        yield* rawCall((client) => client.set(foreign[0]!, "hello"))
        yield* rawCall((client) => client.hset(foreign[1]!, "expires_at", "0"))
        yield* rawCall((client) => client.set(foreign[2]!, "v1 COMPLETED x 0 0 - 0 0\n"))
        yield* TestClock.adjust(Duration.seconds(11))
        let purged = 0
        for (let round = 0; round < 100; round++) {
          const n = yield* store.purgeExpired({ limit: 100 })
          purged += n
          if (n === 0) break
        }
        assert.strictEqual(purged, 1)
        assert.strictEqual(yield* rawCall((client) => client.exists(recordKey(PREFIX, expired))), 0)
        assert.strictEqual(yield* rawCall((client) => client.exists(recordKey(PREFIX, live), ...foreign)), 4)
      }))
  }
)

/** A client that answers every script with `reply` (a value, or a function that throws or rejects). */
const scriptedClient = (reply: () => Promise<unknown>): Redis =>
  Object.assign(new EventEmitter(), {
    status: "ready",
    isCluster: false,
    eval: reply,
    evalsha: reply
  }) as unknown as Redis

const scriptedStore = (reply: () => Promise<unknown>) =>
  RedisStore.layer.pipe(Layer.provide(RedisClient.layerFromClient(scriptedClient(reply))))

describe("RedisStore with replies it does not expect", () => {
  it.effect("a malformed reply is a StoreError saying which script's reply is not what it returns, without the reply", () =>
    Effect.gen(function*() {
      for (const reply of [null, "OK", [1, "x"], [0, "DONE", "t", "f", 1, 2, 3, 4, "-", ""], 7]) {
        const store = yield* IdempotencyStore.IdempotencyStore.pipe(
          Effect.provide(scriptedStore(() => Promise.resolve(reply)))
        )
        for (const [method, effect] of everyMethod(store, freshId())) {
          const error = expectFailure(yield* Effect.exit(effect), "StoreError", method) as { readonly cause?: unknown }
          assert.isString(error.cause)
          assert.match(error.cause as string, /^(the|element \d+ of the) reply of (the \w+|a) script /)
          assert.notInclude(error.cause as string, "DONE")
        }
      }
    }))

  it.effect("a client that throws instead of rejecting: a StoreError, not a defect", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore.pipe(
        Effect.provide(scriptedStore(() => {
          throw new TypeError("boom")
        }))
      )
      for (const [method, effect] of everyMethod(store, freshId())) {
        expectFailure(yield* Effect.exit(effect), "StoreError", method)
      }
    }))

  it.effect("LOADING, BUSY, MASTERDOWN, READONLY, TRYAGAIN, CLUSTERDOWN: StoreUnavailable", () =>
    Effect.gen(function*() {
      for (const word of ["LOADING", "BUSY", "MASTERDOWN", "READONLY", "TRYAGAIN", "CLUSTERDOWN"]) {
        const store = yield* IdempotencyStore.IdempotencyStore.pipe(
          Effect.provide(scriptedStore(() => Promise.reject(new ReplyError(`${word} the server says so`))))
        )
        for (const [method, effect] of everyMethod(store, freshId())) {
          expectFailure(yield* Effect.exit(effect), "StoreUnavailable", method)
        }
      }
    }))

  it.effect("an unknown kind of outcome (a newer version's) reads as no outcome", () =>
    Effect.gen(function*() {
      const reply = [0, "COMPLETED", "t", "f", 1, 2, 3, 0, "Compressed", "…"]
      const store = yield* IdempotencyStore.IdempotencyStore.pipe(
        Effect.provide(scriptedStore(() => Promise.resolve(reply)))
      )
      const result = yield* store.reserve(reserveRequest(freshId()))
      assert.strictEqual(result._tag, "Existing")
      assert.isUndefined(result._tag === "Existing" ? result.record.outcome : null)
      const none = yield* IdempotencyStore.IdempotencyStore.pipe(
        Effect.provide(scriptedStore(() => Promise.resolve([]))),
        Effect.flatMap((store) => store.get(freshId()))
      )
      assert.isTrue(Option.isNone(none))
    }))
})

describe("RedisStore's failures of the client", () => {
  const error = (message: string, fields?: Record<string, unknown>) => Object.assign(new Error(message), fields)
  const failWith = (failure: unknown) =>
    IdempotencyStore.IdempotencyStore.pipe(
      Effect.provide(scriptedStore(() => Promise.reject(failure))),
      Effect.flatMap((store) => Effect.exit(store.reserve(reserveRequest(freshId()))))
    )

  it.effect("connection failures, timeouts and servers that cannot serve now are StoreUnavailable", () =>
    Effect.gen(function*() {
      const unavailable = [
        error("connect ECONNREFUSED 127.0.0.1:1", { code: "ECONNREFUSED" }),
        error("read ECONNRESET", { code: "ECONNRESET" }),
        error("connect ETIMEDOUT", { code: "ETIMEDOUT" }),
        error("Connection is closed."),
        error("Stream isn't writeable and enableOfflineQueue options is false"),
        error("Command timed out"),
        error("Socket timeout. Expecting data, but didn't receive any in 300ms."),
        error("Ready check failed: Command timed out"),
        error("Reached the max retries per request limit (which is 0).", { name: "MaxRetriesPerRequestError" }),
        error("Command aborted due to connection close", { name: "AbortError" }),
        error("Failed to refresh slots cache.", { name: "ClusterAllFailedError" }),
        new ReplyError("LOADING Redis is loading the dataset in memory"),
        error("wrapped", { cause: error("connect ECONNREFUSED", { code: "ECONNREFUSED" }) })
      ]
      for (const failure of unavailable) expectFailure(yield* failWith(failure), "StoreUnavailable", "reserve")
    }))

  it.effect("error replies about the command or the data, and anything else, are StoreError", () =>
    Effect.gen(function*() {
      const failures = [
        new ReplyError("WRONGTYPE Operation against a key holding the wrong kind of value"),
        new ReplyError("ERR user_script:12: not an idempotency record: idempotency:{x}"),
        new ReplyError("NOPERM this user has no permissions to run the 'evalsha' command"),
        new ReplyError("OOM command not allowed when used memory > 'maxmemory'."),
        // a reply that quotes a connection message is still the server's reply
        new ReplyError("ERR Connection is closed. said the script"),
        new TypeError("boom"),
        "a string",
        undefined
      ]
      for (const failure of failures) expectFailure(yield* failWith(failure), "StoreError", "reserve")
    }))
})
