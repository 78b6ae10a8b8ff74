/**
 * The default clock: lease and TTL expiry follow the server's `TIME`, read inside each script,
 * whatever the fiber's `Clock` says. The testing kit's server-clock suite holds the checks every such
 * store passes; here, what is Redis's own: native expiry (`PXAT`) is the record's own `expires_at`,
 * so Redis deletes each record at the instant the store stops seeing it, and there is nothing left to
 * purge.
 */
import { IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { StoreConformance } from "@effect-idempotency/testing"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestServices from "effect/TestServices"
import {
  expectReserved,
  freshId,
  rawCall,
  rawLayer,
  recordKey,
  reserveRequest,
  storeLayer,
  uniquePrefix
} from "./utils/fixtures.js"

const PREFIX = uniquePrefix("server-clock")
const HOUR = Duration.hours(1)
const HOUR_MS = 3_600_000

const serverNow = rawCall((client) => client.time()).pipe(
  Effect.map(([seconds, micros]) => Number(seconds) * 1000 + Math.floor(Number(micros) / 1000))
)

/** The key's remaining native life, in milliseconds (-2: no key, -1: no expiry). */
const pttl = (id: IdempotencyRecord.RecordId) => rawCall((client) => client.pttl(recordKey(PREFIX, id)))

/** The key's native expiry, in epoch milliseconds (`PEXPIRETIME`, Redis 7). */
const expireTime = (id: IdempotencyRecord.RecordId) =>
  rawCall((client) => client.call("PEXPIRETIME", recordKey(PREFIX, id)) as Promise<number>)

const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "\"ok\"" })

StoreConformance.serverClockSuite(
  "RedisStore with the server's clock",
  Layer.merge(storeLayer({ prefix: uniquePrefix("server-clock-suite") }), rawLayer()),
  { now: serverNow, nativeExpiry: true, timeout: "1 minute" }
)

// `it.effect` runs on a TestClock that stays at 0 unless adjusted: the store must not read it
layer(Layer.merge(storeLayer({ prefix: PREFIX }), rawLayer()), { timeout: "1 minute" })(
  "RedisStore with the server's clock, natively",
  (it) => {
    it.effect("native expiry is the record's expires_at on the server's clock", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const reserved = expectReserved(
          yield* store.reserve(reserveRequest(id, { lease: Duration.seconds(30), ttl: HOUR }))
        )
        assert.strictEqual(yield* expireTime(id), reserved.expiresAt)
        yield* store.complete({ id, token: reserved.token, outcome, ttl: Duration.minutes(5) })
        const completed = Option.getOrThrow(yield* store.get(id))
        assert.strictEqual(yield* expireTime(id), completed.expiresAt)
        assert.isTrue(completed.expiresAt < reserved.expiresAt)
      }))

    it.effect("native expiry follows an infinite TTL, a TTL of 0, and a lease extended past the TTL", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const infinite = freshId()
        const forever = { lease: Duration.infinity, ttl: Duration.infinity }
        expectReserved(yield* store.reserve(reserveRequest(infinite, forever)))
        assert.isAbove(yield* pttl(infinite), 2 ** 51)

        const gone = freshId()
        const owner = expectReserved(yield* store.reserve(reserveRequest(gone)))
        yield* store.complete({ id: gone, token: owner.token, outcome, ttl: Duration.zero })
        // deleted (-2), or expiring within the millisecond the script ran in (0)
        assert.isAtMost(yield* pttl(gone), 0)

        const extended = freshId()
        const first = expectReserved(
          yield* store.reserve(reserveRequest(extended, { lease: Duration.zero, ttl: Duration.minutes(1) }))
        )
        yield* store.extend({ id: extended, token: first.token, lease: HOUR })
        // the record lives at least as long as its lease: past its one-minute TTL, natively too
        assert.isAbove(yield* pttl(extended), HOUR_MS - 60_000)
      }))

    it.effect("a record with a TTL of 300 ms is deleted by Redis 300 ms later, on the server's clock", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const owner = expectReserved(
          yield* store.reserve(reserveRequest(id, { lease: Duration.millis(100), ttl: Duration.millis(300) }))
        )
        assert.isTrue(Option.isSome(yield* store.get(id)))
        yield* TestServices.provideLive(Effect.sleep("150 millis"))
        // the lease ended on the server's clock, while the fiber's clock did not move
        const taken = expectReserved(
          yield* store.reserve(reserveRequest(id, { lease: Duration.millis(100), ttl: Duration.millis(300) }))
        )
        assert.strictEqual(taken.attempt, 2)
        assert.notStrictEqual(taken.token, owner.token)
        yield* TestServices.provideLive(Effect.sleep("400 millis"))
        assert.strictEqual(yield* pttl(id), -2)
        assert.isTrue(Option.isNone(yield* store.get(id)))
      }))
  }
)
