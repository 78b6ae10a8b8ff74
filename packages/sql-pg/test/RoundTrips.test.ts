/**
 * Round trips per path, counted on the wire: every statement the `pg` clients of the pool send.
 * A first execution costs 2 (reserve, complete), a replay 1, a conflict 1. The transactional mode:
 * a first execution 4 (BEGIN, the reservation that sets lock_timeout, complete, COMMIT), a replay 3, or 1 (a read,
 * outside a transaction) while replays are most of its recent attempts.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { PgIdempotencyStore, PgIdempotencyTable, PgTransactional } from "@effect-idempotency/sql-pg"
import { Counting } from "@effect-idempotency/test-support"
import * as RoundTrips from "@effect-idempotency/test-support/RoundTrips"
import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import * as Pg from "pg"
import { Payload, payload } from "./utils/fixtures.js"
import { layerPrimary, resetTable, runTable, TestDatabase } from "./utils/TestDatabase.js"

const TABLE = runTable("idem_round_trips")

/** Statements sent by the pool's clients. */
const sent = { statements: 0 }

const CountingPgClient = Layer.unwrapEffect(
  Effect.map(TestDatabase, (database) =>
    PgClient.layerFromPool({
      acquire: Effect.acquireRelease(
        Effect.sync(() => new Pg.Pool({ connectionString: database.url, max: 10, Client: Counting.pgClient(sent) })),
        (pool) => Effect.promise(() => pool.end())
      )
    }))
)

const StoreLive = Layer.effect(
  IdempotencyStore.IdempotencyStore,
  Effect.zipRight(resetTable({ table: TABLE }), PgIdempotencyStore.make({ table: TABLE, clock: "effect" }))
).pipe(
  Layer.provideMerge(CountingPgClient),
  Layer.provide(layerPrimary)
)

/** Runs an effect and returns its result with the number of statements it sent. */
const counted = <A, E, R>(effect: Effect.Effect<A, E, R>) => Counting.counted(sent, effect)

const { startClock } = RoundTrips

layer(StoreLive, { timeout: "2 minutes" })("PgIdempotencyStore round trips", (it) => {
  RoundTrips.cases(it, counted, { replay: 1, conflict: 1 })
  RoundTrips.released(it, counted)

  it.effect("the transactional mode: a replay is a transaction of 3 statements, then 1 read while replays dominate", () =>
    Effect.gen(function*() {
      yield* startClock
      const op = PgTransactional.make({
        name: `round-trips-tx-${randomUUID()}`,
        table: Either.getOrThrow(PgIdempotencyTable.make({ table: TABLE })),
        payload: Payload,
        success: Schema.Number,
        execute: () => Effect.succeed(1)
      })
      const key = randomUUID()
      const [first, firstTrips] = yield* counted(op.runDetailed({ key, payload }))
      assert.isFalse(first.replayed)
      assert.strictEqual(firstTrips, 4)
      const replays: Array<number> = []
      for (let i = 0; i < 12; i++) {
        const [result, trips] = yield* counted(op.runDetailed({ key, payload }))
        assert.isTrue(result.replayed)
        replays.push(trips)
      }
      // a reused key is answered by the read as well
      const [reused, reusedTrips] = yield* counted(Effect.either(op.run({ key, payload: { ...payload, amount: 11 } })))
      assert.isTrue(Either.isLeft(reused) && reused.left._tag === "KeyReused")
      assert.strictEqual(reusedTrips, 1)
      const firsts: Array<number> = []
      for (let i = 0; i < 12; i++) {
        const [result, trips] = yield* counted(op.runDetailed({ key: randomUUID(), payload }))
        assert.isFalse(result.replayed)
        firsts.push(trips)
      }
      assert.strictEqual(replays[0], 3)
      assert.strictEqual(replays.at(-1), 1)
      assert.isTrue(replays.every((trips) => trips === 1 || trips === 3))
      assert.strictEqual(firsts[0], 5)
      assert.strictEqual(firsts.at(-1), 4)
      assert.isTrue(firsts.every((trips) => trips === 4 || trips === 5))
    }))

  it.effect("every store method sends exactly 1 statement", () =>
    Effect.gen(function*() {
      yield* startClock
      const trips = yield* RoundTrips.perMethod(counted)
      assert.deepStrictEqual(new Set(Object.values(trips)), new Set([1]), JSON.stringify(trips))
    }))
})
