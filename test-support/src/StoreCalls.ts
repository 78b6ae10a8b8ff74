/**
 * Every method of a store called once, by name: for the tests of what each method answers when the
 * store cannot serve it (a table not migrated, a database that refuses or is gone).
 *
 * @example
 * for (const [method, call] of StoreCalls.everyMethod(store)) {
 *   assert.strictEqual((yield* Effect.flip(call))._tag, "StoreError", method)
 * }
 */
import type { IdempotencyError, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyRecord as Record } from "@effect-idempotency/core"
import { StoreFixtures } from "@effect-idempotency/testing"
import * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"

/** A store method's name. */
export type Method = "reserve" | "complete" | "release" | "markFailed" | "extend" | "get" | "purgeExpired"

/**
 * Each method of `store`, by name, on `id` (a fresh one by default) with `token` (one the store never
 * issued, by default): a reservation, a completion, a release, a FAILED mark, an extension, a read and
 * a purge.
 */
export const everyMethod = (
  store: IdempotencyStore.IdempotencyStore["Type"],
  options: { readonly id?: IdempotencyRecord.RecordId; readonly token?: string } = {}
): ReadonlyArray<
  readonly [Method, Effect.Effect<unknown, IdempotencyError.LeaseLost | IdempotencyError.StoreFailure>]
> => {
  const { id = StoreFixtures.freshId(), token = "token" } = options
  const outcome = Record.StoredOutcome.Success({ value: "1" })
  return [
    ["reserve", store.reserve(StoreFixtures.reserveRequest(id))],
    ["complete", store.complete({ id, token, outcome, ttl: Duration.hours(1) })],
    ["release", store.release({ id, token })],
    ["markFailed", store.markFailed({ id, token, ttl: Duration.hours(1) })],
    ["extend", store.extend({ id, token, lease: Duration.hours(1) })],
    ["get", store.get(id)],
    ["purgeExpired", store.purgeExpired()]
  ]
}
