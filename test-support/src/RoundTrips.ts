/**
 * The round trips of the normal mode that every SQL store counts alike, written once for the
 * PostgreSQL store and for the MariaDB, SQLite and libSQL ones: a first execution, a replay, a
 * reused key and a conflict, then the takeovers of an expired lease and of a FAILED record. Each
 * package counts its statements its own way (`counted`) and says what a replay and a conflict cost.
 */
import { Idempotency, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { StoreFixtures } from "@effect-idempotency/testing"
import type { Vitest } from "@effect/vitest"
import { assert } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { randomUUID } from "node:crypto"

const Payload = Schema.Struct({ amount: Schema.Number })
const payload = { amount: 10 }

/** Runs an effect and returns its result with the number of statements it sent. */
export type Counted = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<readonly [A, number], E, R>

/** The statements a replay (or a reused key, answered the same way) and a conflict send. */
export interface Expected {
  readonly replay: number
  readonly conflict: number
}

/** The store's clock starts at the wall clock's time, as the database's does. */
export const startClock = Effect.flatMap(Effect.sync(() => Date.now()), TestClock.setTime)

/** Registers the shared cases on `it`, a layer of the store (with `TestClock`). */
export const cases = <R>(
  it: Vitest.MethodsNonLive<R | IdempotencyStore.IdempotencyStore>,
  counted: Counted,
  expected: Expected
) => {
  it.effect(
    `a first execution sends 2 statements, a replay ${expected.replay}, a conflict ${expected.conflict}`,
    () =>
      Effect.gen(function*() {
        yield* startClock
        const executions = yield* Ref.make(0)
        const started = yield* Deferred.make<void>()
        const proceed = yield* Deferred.make<void>()
        const operation = Idempotency.make({
          name: `round-trips-${randomUUID()}`,
          payload: Payload,
          success: Schema.Number,
          execute: () => Ref.updateAndGet(executions, (n) => n + 1)
        })
        const slow = Idempotency.make({
          name: `round-trips-slow-${randomUUID()}`,
          payload: Payload,
          success: Schema.Number,
          execute: () => Deferred.succeed(started, void 0).pipe(Effect.zipRight(Deferred.await(proceed)), Effect.as(7))
        })
        const key = randomUUID()

        const [first, firstTrips] = yield* counted(operation.runDetailed({ key, payload }))
        assert.isFalse(first.replayed)
        assert.strictEqual(firstTrips, 2)

        const [replay, replayTrips] = yield* counted(operation.runDetailed({ key, payload }))
        assert.isTrue(replay.replayed)
        assert.strictEqual(replayTrips, expected.replay)

        const reused = yield* counted(Effect.either(operation.run({ key, payload: { amount: 11 } })))
        assert.isTrue(Either.isLeft(reused[0]) && reused[0].left._tag === "KeyReused")
        assert.strictEqual(reused[1], expected.replay)

        const slowKey = randomUUID()
        const holder = yield* Effect.fork(slow.run({ key: slowKey, payload }))
        yield* Deferred.await(started)
        const [conflict, conflictTrips] = yield* counted(Effect.either(slow.run({ key: slowKey, payload })))
        assert.isTrue(Either.isLeft(conflict) && conflict.left._tag === "IdempotencyConflict")
        assert.strictEqual(conflictTrips, expected.conflict)
        yield* Deferred.succeed(proceed, void 0)
        assert.strictEqual(yield* Fiber.join(holder), 7)
        assert.strictEqual(yield* Ref.get(executions), 1)
      })
  )

  it.effect("a takeover of an expired lease and of a FAILED record sends 2 statements (reserve, complete)", () =>
    Effect.gen(function*() {
      yield* startClock
      const store = yield* IdempotencyStore.IdempotencyStore
      const operation = Idempotency.make({
        name: `round-trips-takeover-${randomUUID()}`,
        payload: Payload,
        success: Schema.Number,
        execute: () => Effect.succeed(1)
      })
      const fingerprint = yield* Idempotency.fingerprint(Payload, payload)
      for (const crash of ["lease", "failed"] as const) {
        const key = randomUUID()
        const id = IdempotencyRecord.makeRecordId({ operation: operation.name, key: IdempotencyKey.unsafeMake(key) })
        const crashed = StoreFixtures.expectReserved(
          yield* store.reserve(StoreFixtures.reserveRequest(id, { fingerprint }))
        )
        if (crash === "failed") {
          yield* store.markFailed({ id, token: crashed.token, ttl: Duration.hours(1) })
        } else {
          yield* TestClock.adjust(Duration.minutes(1))
        }
        const [result, trips] = yield* counted(operation.runDetailed({ key, payload }))
        assert.strictEqual(result.attempt, 2)
        assert.strictEqual(trips, 2)
      }
    }))
}
