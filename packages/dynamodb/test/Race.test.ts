import { Idempotency, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { StoreFixtures } from "@effect-idempotency/testing"
import { assert, layer } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { randomUUID } from "node:crypto"
import { backends, storeLayer } from "./utils/backends.js"
import { startAtWallClock } from "./utils/requests.js"

const ATTEMPTS = 200
const LEASE = Duration.seconds(30)
const TTL = Duration.hours(1)

const { freshId, reserveRequest } = StoreFixtures

/** Races `ATTEMPTS` reservations of `id` and returns the one winner and the losers. */
const raceReservations = (store: IdempotencyStore.IdempotencyStore["Type"], id: IdempotencyRecord.RecordId) =>
  Effect.gen(function*() {
    const results = yield* Effect.all(
      Array.from({ length: ATTEMPTS }, () => store.reserve(reserveRequest(id))),
      { concurrency: "unbounded" }
    )
    const winners = results.filter((result) => result._tag === "Reserved")
    assert.strictEqual(winners.length, 1, `${winners.length} of ${ATTEMPTS} reservations won`)
    const winner = winners[0]!
    if (winner._tag !== "Reserved") return assert.fail("unreachable")
    for (const result of results) {
      if (result._tag === "Existing") {
        assert.strictEqual(result.record.status, "IN_PROGRESS")
        assert.strictEqual(result.record.token, winner.token)
      }
    }
    return winner
  })

for (const backend of backends) {
  layer(storeLayer(backend), { timeout: Duration.seconds(60) })(`races on ${backend.name}`, (it) => {
    it.effect(`${ATTEMPTS} concurrent attempts on one key run the downstream exactly once`, () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const executions = yield* Ref.make(0)
        const finished = yield* Ref.make(0)
        // the first execution holds its reservation until every other attempt has finished, so
        // all of them race against a live IN_PROGRESS record
        const gate = yield* Deferred.make<void>()
        const op = Idempotency.make({
          name: `race-${randomUUID()}`,
          payload: Schema.Struct({ amount: Schema.Number }),
          success: Schema.Number,
          execute: () =>
            Ref.updateAndGet(executions, (n) => n + 1).pipe(
              Effect.tap((n) => n === 1 ? Deferred.await(gate) : Effect.void)
            )
        })
        const key = randomUUID()
        const attempt = op.runDetailed({ key, payload: { amount: 1 } }).pipe(
          Effect.either,
          Effect.tap(() =>
            Ref.updateAndGet(finished, (n) => n + 1).pipe(
              Effect.tap((n) => n === ATTEMPTS - 1 ? Deferred.succeed(gate, undefined) : Effect.void)
            )
          )
        )
        const results = yield* Effect.all(Array.from({ length: ATTEMPTS }, () => attempt), {
          concurrency: "unbounded"
        })
        assert.strictEqual(yield* Ref.get(executions), 1)
        const fresh = results.filter(Either.isRight)
        assert.strictEqual(fresh.length, 1)
        assert.isFalse(fresh[0]!.right.replayed)
        for (const result of results) {
          if (Either.isLeft(result)) assert.strictEqual(result.left._tag, "IdempotencyConflict")
        }
        const replay = yield* op.runDetailed({ key, payload: { amount: 1 } })
        assert.isTrue(replay.replayed)
        assert.strictEqual(replay.value, 1)
        assert.strictEqual(yield* Ref.get(executions), 1)
      }))

    it.effect(`a takeover race of ${ATTEMPTS} attempts on one ended lease has exactly one new owner`, () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const first = yield* store.reserve(reserveRequest(id))
        assert.strictEqual(first._tag, "Reserved")
        yield* TestClock.adjust(Duration.sum(LEASE, Duration.seconds(1)))
        const owner = yield* raceReservations(store, id)
        assert.strictEqual(owner.attempt, 2)
        // the old owner is fenced out; the new one completes
        if (first._tag !== "Reserved") return
        const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "1" })
        const stale = yield* Effect.flip(store.complete({ id, token: first.token, outcome, ttl: TTL }))
        assert.strictEqual(stale._tag, "LeaseLost")
        yield* store.complete({ id, token: owner.token, outcome, ttl: TTL })
        const record = Option.getOrThrow(yield* store.get(id))
        assert.strictEqual(record.status, "COMPLETED")
        assert.strictEqual(record.token, owner.token)
        assert.strictEqual(record.attempt, 2)
      }))

    it.effect(`a race of ${ATTEMPTS} retries on one FAILED record has exactly one new owner`, () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const first = yield* store.reserve(reserveRequest(id))
        if (first._tag !== "Reserved") return assert.fail("expected Reserved")
        yield* store.markFailed({ id, token: first.token, ttl: TTL })
        const owner = yield* raceReservations(store, id)
        assert.strictEqual(owner.attempt, 2)
      }))

    it.effect(`a race of ${ATTEMPTS} attempts on an expired record not yet deleted creates it once`, () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const first = yield* store.reserve(reserveRequest(id, { lease: Duration.seconds(5), ttl: Duration.seconds(5) }))
        if (first._tag !== "Reserved") return assert.fail("expected Reserved")
        const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "1" })
        yield* store.complete({ id, token: first.token, outcome, ttl: Duration.seconds(5) })
        yield* TestClock.adjust(Duration.seconds(6))
        const owner = yield* raceReservations(store, id)
        assert.strictEqual(owner.attempt, 1)
        const record = Option.getOrThrow(yield* store.get(id))
        assert.strictEqual(record.token, owner.token)
        assert.isUndefined(record.outcome)
      }))
  })
}
