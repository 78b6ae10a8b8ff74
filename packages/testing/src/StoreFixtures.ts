/**
 * What a store's own tests, and the conformance suites, are written with.
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { StoreFixtures } from "@effect-idempotency/testing"
 * import { it } from "@effect/vitest"
 * import { Effect } from "effect"
 *
 * it.effect("a request with another fingerprint finds the first one in progress", () =>
 *   Effect.gen(function*() {
 *     const store = yield* IdempotencyStore.IdempotencyStore
 *     const id = StoreFixtures.freshId()
 *     StoreFixtures.expectReserved(yield* store.reserve(StoreFixtures.reserveRequest(id)))
 *     const other = yield* store.reserve(StoreFixtures.reserveRequest(id, { fingerprint: StoreFixtures.FP_B }))
 *     StoreFixtures.expectExisting(other)
 *   }).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))))
 * ```
 *
 * @since 0.1.0
 */
import { IdempotencyKey, IdempotencyRecord } from "@effect-idempotency/core"
import type { IdempotencyStore } from "@effect-idempotency/core"
import { assert } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"

/**
 * The fingerprint of `reserveRequest`'s requests.
 *
 * @since 0.1.0
 * @category constants
 */
export const FP_A = "sha256:aaaa"

/**
 * The fingerprint of another request under the same key.
 *
 * @since 0.1.0
 * @category constants
 */
export const FP_B = "sha256:bbbb"

/**
 * A record id with a random key: tests never share a record, even on a shared store.
 *
 * @since 0.1.0
 * @category constructors
 */
export const freshId = (options?: {
  readonly operation?: string | undefined
  readonly scope?: string | undefined
}): IdempotencyRecord.RecordId =>
  IdempotencyRecord.makeRecordId({
    operation: options?.operation ?? "store-test",
    key: IdempotencyKey.unsafeMake(crypto.randomUUID()),
    scope: options?.scope
  })

/**
 * A reservation of `id`: a fresh token, `FP_A`, a 30 s lease, a TTL of an hour, takeover on.
 *
 * @since 0.1.0
 * @category constructors
 */
export const reserveRequest = (
  id: IdempotencyRecord.RecordId,
  overrides?: Partial<IdempotencyStore.ReserveRequest>
): IdempotencyStore.ReserveRequest => ({
  id,
  token: crypto.randomUUID(),
  fingerprint: FP_A,
  lease: Duration.seconds(30),
  ttl: Duration.hours(1),
  takeover: true,
  ...overrides
})

/**
 * The result of a reservation that won the record; fails the test otherwise.
 *
 * @since 0.1.0
 * @category assertions
 */
export const expectReserved = (
  result: IdempotencyRecord.ReserveResult
): Extract<IdempotencyRecord.ReserveResult, { readonly _tag: "Reserved" }> => {
  if (result._tag !== "Reserved") assert.fail(`expected Reserved, got Existing(${result.record.status})`)
  return result
}

/**
 * The result of a reservation that found the record held or done; fails the test otherwise.
 *
 * @since 0.1.0
 * @category assertions
 */
export const expectExisting = (
  result: IdempotencyRecord.ReserveResult
): Extract<IdempotencyRecord.ReserveResult, { readonly _tag: "Existing" }> => {
  if (result._tag !== "Existing") assert.fail("expected Existing, got Reserved")
  return result
}

/**
 * Runs a write that must be refused with `LeaseLost`.
 *
 * @since 0.1.0
 * @category assertions
 */
export const expectLeaseLost = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<void, A, R> =>
  Effect.flip(effect).pipe(
    Effect.map((error) => {
      assert.strictEqual((error as { readonly _tag?: string })._tag, "LeaseLost")
    })
  )

/**
 * The typed failure of an exit; fails the test on a success, a defect or an interruption.
 *
 * @since 0.1.0
 * @category assertions
 */
export const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  assert.isTrue(Exit.isFailure(exit), "expected a failure")
  const failure = Cause.failureOption((exit as Exit.Failure<A, E>).cause)
  assert.isTrue(Option.isSome(failure), `not a typed failure: ${Cause.pretty((exit as Exit.Failure<A, E>).cause)}`)
  return (failure as Option.Some<E>).value
}
