/**
 * What the stores' race tests check alike: of concurrent runs of one key, one outcome; of concurrent
 * reservations of one record, one owner that every other call sees.
 */
import type { IdempotencyRecord } from "@effect-idempotency/core"
import { StoreFixtures } from "@effect-idempotency/testing"
import { assert } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Counting from "./Counting.js"

/** An operation that counts its executions after a short downstream call: early attempts meet it in progress, late ones replay it. */
export const operation = Counting.operation("race", (count) => Effect.zipRight(Effect.sleep("5 millis"), count))

/** Every exit is the value of the one execution (fresh or replayed) or an `IdempotencyConflict`; returns the conflicts. */
export const assertOneOutcome = <A>(exits: ReadonlyArray<Exit.Exit<A, unknown>>, expected: A): number => {
  let conflicts = 0
  for (const exit of exits) {
    if (Exit.isSuccess(exit)) {
      assert.deepStrictEqual(exit.value, expected)
    } else {
      const failure = Cause.failureOption(exit.cause)
      assert.isTrue(Option.isSome(failure), `not a typed failure: ${Cause.pretty(exit.cause)}`)
      assert.strictEqual((failure as Option.Some<{ readonly _tag: string }>).value._tag, "IdempotencyConflict")
      conflicts++
    }
  }
  return conflicts
}

/**
 * Of concurrent reservations of one record: exactly one reserved it, as attempt `attempt`, and every
 * other saw that owner's record (its token and attempt, IN_PROGRESS, its lease running), never a
 * stale one. Returns the owner.
 */
export const assertOneOwner = (results: ReadonlyArray<IdempotencyRecord.ReserveResult>, attempt: number) => {
  const owners = results.filter((result) => result._tag === "Reserved")
  assert.strictEqual(owners.length, 1)
  const owner = StoreFixtures.expectReserved(owners[0]!)
  assert.strictEqual(owner.attempt, attempt)
  for (const result of results) {
    if (result._tag === "Existing") {
      const { leaseUntil, status, token } = result.record
      assert.deepStrictEqual({ token, attempt: result.record.attempt, status }, {
        token: owner.token,
        attempt,
        status: "IN_PROGRESS"
      })
      assert.isTrue(leaseUntil > result.now)
    }
  }
  return owner
}
