/**
 * The default clock: lease and TTL expiry follow the server's `TIME`, read inside each script,
 * whatever the fiber's `Clock` says (here a `TestClock` at 1970 unless adjusted). Native expiry
 * (`PXAT`) is the record's own `expires_at`, so Redis deletes each record at the instant the store
 * stops seeing it, and there is nothing left to purge.
 */
import { IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import {
  expectExisting,
  expectReserved,
  FP_B,
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

// `it.effect` runs on a TestClock that stays at 0 unless adjusted: the store must not read it
layer(Layer.merge(storeLayer({ prefix: PREFIX }), rawLayer()), { timeout: "1 minute" })(
  "RedisStore with the server's clock",
  (it) => {
    it.effect("leases and expiry are read from the server's clock, not the fiber's", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const before = yield* serverNow
        const reserved = expectReserved(
          yield* store.reserve(reserveRequest(id, { lease: Duration.seconds(30), ttl: HOUR }))
        )
        const after = yield* serverNow
        assert.isTrue(reserved.leaseUntil >= before + 30_000 && reserved.leaseUntil <= after + 30_000)
        assert.strictEqual(reserved.expiresAt, reserved.leaseUntil - 30_000 + HOUR_MS)
        // the fiber's clock jumps two hours (and was at 1970 before): nothing changes in the store
        yield* TestClock.adjust(Duration.hours(2))
        const blocked = expectExisting(yield* store.reserve(reserveRequest(id)))
        assert.strictEqual(blocked.record.token, reserved.token)
        assert.isTrue(blocked.now >= before && blocked.now <= (yield* serverNow))
        assert.isTrue(Option.isSome(yield* store.get(id)))
      }))

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

    it.effect("a lease of 0 is over at once: the next reservation takes the record over", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const first = expectReserved(yield* store.reserve(reserveRequest(id, { lease: Duration.zero })))
        assert.isTrue(first.expiresAt > first.leaseUntil)
        const second = expectReserved(yield* store.reserve(reserveRequest(id)))
        assert.strictEqual(second.attempt, 2)
        assert.notStrictEqual(second.token, first.token)
        // the first owner is fenced out
        const lost = yield* Effect.flip(store.complete({ id, token: first.token, outcome, ttl: HOUR }))
        assert.strictEqual(lost._tag, "LeaseLost")
      }))

    it.effect("a lease of an hour blocks other attempts; an ended lease is kept when takeover is off", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const live = freshId()
        const holder = expectReserved(yield* store.reserve(reserveRequest(live, { lease: HOUR })))
        const blocked = expectExisting(yield* store.reserve(reserveRequest(live)))
        assert.strictEqual(blocked.record.token, holder.token)
        assert.strictEqual(blocked.record.status, "IN_PROGRESS")
        assert.isTrue(blocked.record.leaseUntil - blocked.now > HOUR_MS - 60_000)

        const ended = freshId()
        const crashed = expectReserved(yield* store.reserve(reserveRequest(ended, { lease: Duration.zero })))
        const kept = expectExisting(yield* store.reserve(reserveRequest(ended, { takeover: false })))
        assert.strictEqual(kept.record.token, crashed.token)
        assert.isTrue(kept.record.leaseUntil <= kept.now)
        const other = expectExisting(yield* store.reserve(reserveRequest(ended, { fingerprint: FP_B })))
        assert.strictEqual(other.record.token, crashed.token)
      }))

    it.effect("a record lives now + max(lease, ttl) from its reservation", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const longLease = expectReserved(
          yield* store.reserve(reserveRequest(freshId(), { lease: Duration.hours(2), ttl: HOUR }))
        )
        assert.strictEqual(longLease.expiresAt, longLease.leaseUntil)
        const longTtl = expectReserved(
          yield* store.reserve(reserveRequest(freshId(), { lease: Duration.seconds(5), ttl: Duration.hours(3) }))
        )
        assert.strictEqual(longTtl.expiresAt - longTtl.leaseUntil, 3 * HOUR_MS - 5_000)
      }))

    it.effect("an infinite lease and TTL are kept as the far future, natively too", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const reserved = expectReserved(
          yield* store.reserve(reserveRequest(id, { lease: Duration.infinity, ttl: Duration.infinity }))
        )
        assert.isTrue(Number.isSafeInteger(reserved.expiresAt) && reserved.expiresAt > 2 ** 52)
        assert.isAbove(yield* pttl(id), 2 ** 51)
        yield* store.complete({ id, token: reserved.token, outcome, ttl: Duration.infinity })
        const replay = expectExisting(yield* store.reserve(reserveRequest(id)))
        assert.strictEqual(replay.record.status, "COMPLETED")
        assert.deepStrictEqual(replay.record.outcome, outcome)
      }))

    it.effect("a completion with a TTL of 0 is gone at once: Redis deleted it, nothing is left to purge", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const owner = expectReserved(yield* store.reserve(reserveRequest(id)))
        yield* store.complete({ id, token: owner.token, outcome, ttl: Duration.zero })
        assert.isTrue(Option.isNone(yield* store.get(id)))
        // deleted (-2), or expiring within the millisecond the script ran in (0)
        assert.isAtMost(yield* pttl(id), 0)
        const lost = yield* Effect.flip(store.extend({ id, token: owner.token, lease: HOUR }))
        assert.strictEqual(lost._tag, "LeaseLost")
        assert.strictEqual(yield* store.purgeExpired({ limit: 50 }), 0)
        const fresh = expectReserved(yield* store.reserve(reserveRequest(id, { fingerprint: FP_B })))
        assert.strictEqual(fresh.attempt, 1)
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

    it.effect("extend moves an ended lease an hour ahead: the record is blocked again", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const first = expectReserved(
          yield* store.reserve(reserveRequest(id, { lease: Duration.zero, ttl: Duration.minutes(1) }))
        )
        yield* store.extend({ id, token: first.token, lease: HOUR })
        const blocked = expectExisting(yield* store.reserve(reserveRequest(id)))
        assert.strictEqual(blocked.record.token, first.token)
        assert.isTrue(blocked.record.leaseUntil - blocked.now > HOUR_MS - 60_000)
        // the record lives at least as long as its lease: past its one-minute TTL, natively too
        assert.strictEqual(blocked.record.expiresAt, blocked.record.leaseUntil)
        assert.isAbove(yield* pttl(id), HOUR_MS - 60_000)
      }))

    it.effect("a FAILED record is taken over at once by the same request, never by another", () =>
      Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const first = expectReserved(yield* store.reserve(reserveRequest(id, { lease: HOUR })))
        yield* store.markFailed({ id, token: first.token, ttl: HOUR })
        const other = expectExisting(yield* store.reserve(reserveRequest(id, { fingerprint: FP_B })))
        assert.strictEqual(other.record.status, "FAILED")
        const retry = expectReserved(yield* store.reserve(reserveRequest(id, { takeover: false })))
        assert.strictEqual(retry.attempt, 2)
      }))
  }
)
