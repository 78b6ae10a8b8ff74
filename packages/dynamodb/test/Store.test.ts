import { IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { StoreFixtures } from "@effect-idempotency/testing"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { backends, storeLayer } from "./utils/backends.js"
import { startAtWallClock } from "./utils/requests.js"

const { expectReserved, FP_A, freshId, reserveRequest } = StoreFixtures

const SHORT = { lease: Duration.seconds(5), ttl: Duration.seconds(5) }

for (const backend of backends) {
  layer(storeLayer(backend))(`DynamoDbStore on ${backend.name}`, (it) => {
    it.effect("the owner of a record that expired gets LeaseLost on every write", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const { token } = expectReserved(yield* store.reserve(reserveRequest(id, SHORT)))
        yield* TestClock.adjust(Duration.seconds(6))
        const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "1" })
        const writes = [
          store.complete({ id, token, outcome, ttl: Duration.hours(1) }),
          store.markFailed({ id, token, ttl: Duration.hours(1) }),
          store.extend({ id, token, lease: Duration.seconds(30) }),
          store.release({ id, token })
        ]
        for (const write of writes) {
          const error = yield* Effect.flip(write)
          assert.strictEqual(error._tag, "LeaseLost")
        }
      }))

    it.effect("an expired FAILED or lapsed record is created afresh (attempt 1), not taken over", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const failed = freshId()
        const lapsed = freshId()
        const first = expectReserved(yield* store.reserve(reserveRequest(failed, SHORT)))
        yield* store.markFailed({ id: failed, token: first.token, ttl: Duration.seconds(5) })
        expectReserved(yield* store.reserve(reserveRequest(lapsed, SHORT)))
        yield* TestClock.adjust(Duration.seconds(6))
        for (const id of [failed, lapsed]) {
          assert.isTrue(Option.isNone(yield* store.get(id)))
          const again = expectReserved(yield* store.reserve(reserveRequest(id)))
          assert.strictEqual(again.attempt, 1)
          assert.strictEqual(Option.getOrThrow(yield* store.get(id)).attempt, 1)
        }
      }))

    it.effect("repeated takeovers of a FAILED record count the attempts and carry no outcome", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        let token = expectReserved(yield* store.reserve(reserveRequest(id))).token
        for (let attempt = 2; attempt <= 4; attempt++) {
          yield* store.markFailed({ id, token, ttl: Duration.hours(1) })
          const next = expectReserved(yield* store.reserve(reserveRequest(id)))
          assert.strictEqual(next.attempt, attempt)
          token = next.token
        }
        const record = Option.getOrThrow(yield* store.get(id))
        assert.strictEqual(record.status, "IN_PROGRESS")
        assert.strictEqual(record.attempt, 4)
        assert.strictEqual(record.fingerprint, FP_A)
        assert.isUndefined(record.outcome)
      }))

    it.effect("a reservation sent again with its token (a retried request) is still Reserved", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const request = reserveRequest(id)
        const first = expectReserved(yield* store.reserve(request))
        const again = expectReserved(yield* store.reserve(request))
        assert.strictEqual(again.token, first.token)
        assert.strictEqual(again.attempt, 1)
        assert.strictEqual(again.leaseUntil, first.leaseUntil)
        // a different token still meets the live lease
        const other = yield* store.reserve(reserveRequest(id))
        assert.strictEqual(other._tag, "Existing")
      }))

    it.effect("extend within the record's life moves only the lease", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const first = expectReserved(yield* store.reserve(reserveRequest(id)))
        yield* TestClock.adjust(Duration.seconds(10))
        yield* store.extend({ id, token: first.token, lease: Duration.seconds(30) })
        const record = Option.getOrThrow(yield* store.get(id))
        assert.strictEqual(record.leaseUntil, first.leaseUntil + 10_000)
        assert.strictEqual(record.expiresAt, first.expiresAt)
      }))
  })
}
