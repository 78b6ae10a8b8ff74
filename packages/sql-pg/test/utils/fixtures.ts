import { IdempotencyKey, IdempotencyRecord } from "@effect-idempotency/core"
import type { IdempotencyStore } from "@effect-idempotency/core"
import { assert } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import { randomUUID } from "node:crypto"
import * as Pg from "pg"

export const FP_A = "sha256:aaaa"
export const FP_B = "sha256:bbbb"

export const freshId = (operation = "sql-pg-test") =>
  IdempotencyRecord.makeRecordId({ operation, key: IdempotencyKey.unsafeMake(randomUUID()) })

export const reserveRequest = (
  id: IdempotencyRecord.RecordId,
  overrides?: Partial<IdempotencyStore.ReserveRequest>
): IdempotencyStore.ReserveRequest => ({
  id,
  token: randomUUID(),
  fingerprint: FP_A,
  lease: Duration.seconds(30),
  ttl: Duration.hours(1),
  takeover: true,
  ...overrides
})

export const expectReserved = (result: IdempotencyRecord.ReserveResult) => {
  if (result._tag !== "Reserved") assert.fail(`expected Reserved, got Existing(${result.record.status})`)
  return result
}

export const expectExisting = (result: IdempotencyRecord.ReserveResult) => {
  if (result._tag !== "Existing") assert.fail("expected Existing, got Reserved")
  return result
}

export const Payload = Schema.Struct({ amount: Schema.Number, currency: Schema.String })

export const payload = { amount: 10, currency: "EUR" } as const

/** A plain `pg` connection outside the store's pool (to hold locks, or to terminate backends). */
export const rawClient = (url: string, applicationName: string): Effect.Effect<Pg.Client, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.suspend(() => {
      const client = new Pg.Client({ connectionString: url, application_name: applicationName })
      client.on("error", () => {})
      return Effect.as(Effect.promise(() => client.connect()), client)
    }),
    (client) => Effect.promise(() => client.end().catch(() => undefined))
  )

export const rawQuery = (client: Pg.Client, text: string, params?: ReadonlyArray<unknown>) =>
  Effect.promise(() => client.query(text, params as Array<unknown> | undefined))

/** The database's clock, in epoch milliseconds (as the store computes it). */
export const DB_NOW = "floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint"

/**
 * Waits, in real time (30 s at most), until a fiber sleeps on the TestClock for at least `ahead`, as a
 * background purge does between rounds (a store call's own short waits do not count). Move the clock
 * only after: a round still in flight would otherwise schedule its next one an interval after the
 * moved time, and it would never come.
 */
export const awaitSleeper = (ahead: Duration.DurationInput) =>
  Effect.gen(function*() {
    const until = (yield* Clock.currentTimeMillis) + Duration.toMillis(ahead)
    const sleeping = Effect.map(TestClock.sleeps(), Chunk.some((end) => end >= until))
    for (let i = 0; i < 3000 && !(yield* sleeping); i++) {
      yield* TestServices.provideLive(Effect.sleep("10 millis"))
    }
  })
