/**
 * The round trips of the normal mode that every store counts alike, written once for the PostgreSQL
 * store, the MariaDB, SQLite and libSQL ones and the Redis one: a first execution, a replay, a reused
 * key and a conflict, then the takeovers of an expired lease and of a FAILED record, and what each
 * store method sends. Each package counts its round trips its own way (`counted`: a number of
 * statements, or the names of the commands) and says what a replay and a conflict cost.
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

export const Payload = Schema.Struct({ amount: Schema.Number })
export const payload = { amount: 10 }

/** An operation of `Payload` and a number, under `name` and a random suffix. */
export const operation = <E, R>(name: string, execute: () => Effect.Effect<number, E, R>) =>
  Idempotency.make({ name: `${name}-${randomUUID()}`, payload: Payload, success: Schema.Number, execute })

/** What an effect sent: a number of statements, or the names of its commands. */
export type Sent = number | ReadonlyArray<string>

/** Runs an effect and returns its result with what it sent (reading its count from `Services`). */
export type Counted<Services = never> = <A, E, R>(
  effect: Effect.Effect<A, E, R>
) => Effect.Effect<readonly [A, Sent], E, R | Services>

/** The round trips a replay (or a reused key, answered the same way) and a conflict send. */
export interface Expected {
  readonly replay: number
  readonly conflict: number
}

/** How the cases run on a store. */
export interface Options<R> {
  /** What a round trip is called in the cases' names (default `statements`). */
  readonly unit?: string
  /** Run first by every case (default `startClock`). */
  readonly setUp?: Effect.Effect<void, unknown, R>
  /** When `counted` gives names: the one every round trip of the cases must have. */
  readonly command?: string
  /**
   * How the crashed attempt's lease ends: the fiber's clock moves past it (the default), or it is
   * reserved already ended (a store that reads the server's clock).
   */
  readonly leaseEnds?: "clock" | "atOnce"
}

/** The number of round trips `sent` counts. */
export const size = (sent: Sent): number => typeof sent === "number" ? sent : sent.length

/** Asserts that `sent` is `count` round trips (each named `command`, when it gives names). */
export const assertSent = (sent: Sent, count: number, command?: string): void => {
  if (typeof sent === "number" || command === undefined) assert.strictEqual(size(sent), count)
  else assert.deepStrictEqual(sent, Array.from({ length: count }, () => command))
}

/** The store's clock starts at the wall clock's time, as the database's does. */
export const startClock = Effect.flatMap(Effect.sync(() => Date.now()), TestClock.setTime)

/** Registers the shared cases on `it`, a layer of the store (with `TestClock`). */
export const cases = <R>(
  it: Vitest.MethodsNonLive<R | IdempotencyStore.IdempotencyStore>,
  counted: Counted<NoInfer<R>>,
  expected: Expected,
  options: Options<R | IdempotencyStore.IdempotencyStore> = {}
) => {
  const { command, leaseEnds = "clock", setUp = startClock, unit = "statements" } = options
  it.effect(
    `a first execution sends 2 ${unit}, a replay ${expected.replay}, a conflict ${expected.conflict}`,
    () =>
      Effect.gen(function*() {
        yield* setUp
        const executions = yield* Ref.make(0)
        const started = yield* Deferred.make<void>()
        const proceed = yield* Deferred.make<void>()
        const counting = operation("round-trips", () => Ref.updateAndGet(executions, (n) => n + 1))
        const slow = operation(
          "round-trips-slow",
          () => Deferred.succeed(started, void 0).pipe(Effect.zipRight(Deferred.await(proceed)), Effect.as(7))
        )
        const key = randomUUID()

        const [first, firstTrips] = yield* counted(counting.runDetailed({ key, payload }))
        assert.isFalse(first.replayed)
        assertSent(firstTrips, 2, command)

        const [replay, replayTrips] = yield* counted(counting.runDetailed({ key, payload }))
        assert.isTrue(replay.replayed)
        assertSent(replayTrips, expected.replay, command)

        const reused = yield* counted(Effect.either(counting.run({ key, payload: { amount: 11 } })))
        assert.isTrue(Either.isLeft(reused[0]) && reused[0].left._tag === "KeyReused")
        assertSent(reused[1], expected.replay, command)

        const slowKey = randomUUID()
        const holder = yield* Effect.fork(slow.run({ key: slowKey, payload }))
        yield* Deferred.await(started)
        const [conflict, conflictTrips] = yield* counted(Effect.either(slow.run({ key: slowKey, payload })))
        assert.isTrue(Either.isLeft(conflict) && conflict.left._tag === "IdempotencyConflict")
        assertSent(conflictTrips, expected.conflict, command)
        yield* Deferred.succeed(proceed, void 0)
        assert.strictEqual(yield* Fiber.join(holder), 7)
        assert.strictEqual(yield* Ref.get(executions), 1)
      })
  )

  it.effect(`a takeover of an expired lease and of a FAILED record sends 2 ${unit} (reserve, complete)`, () =>
    Effect.gen(function*() {
      yield* setUp
      const store = yield* IdempotencyStore.IdempotencyStore
      const taken = operation("round-trips-takeover", () => Effect.succeed(1))
      const fingerprint = yield* Idempotency.fingerprint(Payload, payload)
      for (const crash of ["lease", "failed"] as const) {
        const key = randomUUID()
        const id = IdempotencyRecord.makeRecordId({ operation: taken.name, key: IdempotencyKey.unsafeMake(key) })
        const endedAtOnce = crash === "lease" && leaseEnds === "atOnce"
        const crashed = StoreFixtures.expectReserved(
          yield* store.reserve(
            StoreFixtures.reserveRequest(id, endedAtOnce ? { fingerprint, lease: Duration.zero } : { fingerprint })
          )
        )
        if (crash === "failed") {
          yield* store.markFailed({ id, token: crashed.token, ttl: Duration.hours(1) })
        } else if (!endedAtOnce) {
          yield* TestClock.adjust(Duration.minutes(1))
        }
        const [result, trips] = yield* counted(taken.runDetailed({ key, payload }))
        assert.strictEqual(result.attempt, 2)
        assertSent(trips, 2, command)
      }
    }))
}

/** Registers the case of a failure released for a retry (reserve, release), as `cases` runs. */
export const released = <R>(
  it: Vitest.MethodsNonLive<R | IdempotencyStore.IdempotencyStore>,
  counted: Counted<NoInfer<R>>,
  options: Options<R | IdempotencyStore.IdempotencyStore> = {}
) => {
  const { command, setUp = startClock, unit = "statements" } = options
  it.effect(`a failure released for a retry sends 2 ${unit} (reserve, release)`, () =>
    Effect.gen(function*() {
      yield* setUp
      const failing = operation("round-trips-release", () => Effect.fail("transient" as const))
      const [result, trips] = yield* counted(Effect.either(failing.run({ key: randomUUID(), payload })))
      assert.deepStrictEqual(result, Either.left("transient" as const))
      assertSent(trips, 2, command)
    }))
}

/**
 * What each store method sends, one call after another on one record: a reservation, an extension,
 * a read, a FAILED mark, a second reservation (a takeover), a completion and a release (both with
 * the first token, refused), and a purge of at most 10.
 */
export const perMethod = <R = never>(counted: Counted<NoInfer<R>>) =>
  Effect.gen(function*() {
    const store = yield* IdempotencyStore.IdempotencyStore
    const id = StoreFixtures.freshId()
    const trips = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.map(counted(effect), ([, sent]) => size(sent))
    const [reserved, reserveSent] = yield* counted(store.reserve(StoreFixtures.reserveRequest(id)))
    const token = StoreFixtures.expectReserved(reserved).token
    const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "1" })
    return {
      reserve: size(reserveSent),
      extend: yield* trips(store.extend({ id, token, lease: Duration.seconds(30) })),
      get: yield* trips(store.get(id)),
      markFailed: yield* trips(store.markFailed({ id, token, ttl: Duration.hours(1) })),
      takeover: yield* trips(store.reserve(StoreFixtures.reserveRequest(id))),
      complete: yield* trips(Effect.either(store.complete({ id, token, outcome, ttl: Duration.hours(1) }))),
      release: yield* trips(Effect.either(store.release({ id, token }))),
      purgeExpired: yield* trips(store.purgeExpired({ limit: 10 }))
    }
  })
