/**
 * Statements per path, counted where the store sends them (`SqlClient.unsafe`, one round trip
 * each), on each engine. MariaDB: a first execution costs 2 (reserve, complete), a replay 1, a
 * conflict 1. SQLite and libSQL: a first execution 2, a replay or a conflict 2 (the upsert that
 * wrote nothing, then the read), and a replay writes nothing; while replays are most of the recent
 * reservations, a replay 1 (the read first) and a first execution 3, until first executions are
 * most of them again.
 */
import { Idempotency, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import { Counting } from "@effect-idempotency/test-support"
import * as RoundTrips from "@effect-idempotency/test-support/RoundTrips"
import { StoreFixtures } from "@effect-idempotency/testing"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import type { Engine } from "./utils/databases.js"
import { engines, layerClient, uniqueTable } from "./utils/databases.js"

const { expectReserved, freshId, reserveRequest } = StoreFixtures

const Payload = Schema.Struct({ amount: Schema.Number })
const payload = { amount: 10 }

/** The statements each engine sends on a path. */
const expected: Record<Engine, RoundTrips.Expected> = {
  mariadb: { replay: 1, conflict: 1 },
  sqlite: { replay: 2, conflict: 2 },
  libsql: { replay: 2, conflict: 2 }
}

const { startClock } = RoundTrips

for (const engine of engines) {
  const sent = { statements: 0 }
  const StoreLive = Layer.effect(
    IdempotencyStore.IdempotencyStore,
    SqlIdempotencyStore.make({ table: uniqueTable("idem_round_trips"), clock: "effect", migrate: true })
  ).pipe(Layer.provide(Counting.layerSql(sent)), Layer.provide(layerClient(engine)), Layer.orDie)

  /** Runs an effect and returns its result with the number of statements it sent. */
  const counted = <A, E, R>(effect: Effect.Effect<A, E, R>) => Counting.counted(sent, effect)

  layer(StoreLive, { timeout: "2 minutes" })(`SqlIdempotencyStore round trips (${engine})`, (it) => {
    RoundTrips.cases(it, counted, expected[engine])

    it.effect("a run of replays is answered by one statement each, until first executions come back", () =>
      Effect.gen(function*() {
        yield* startClock
        const operation = Idempotency.make({
          name: `round-trips-storm-${randomUUID()}`,
          payload: Payload,
          success: Schema.Number,
          execute: () => Effect.succeed(1)
        })
        const key = randomUUID()
        yield* operation.run({ key, payload })
        const replays: Array<number> = []
        for (let i = 0; i < 12; i++) {
          const [result, trips] = yield* counted(operation.runDetailed({ key, payload }))
          assert.isTrue(result.replayed)
          replays.push(trips)
        }
        const firsts: Array<number> = []
        for (let i = 0; i < 12; i++) {
          const [result, trips] = yield* counted(operation.runDetailed({ key: randomUUID(), payload }))
          assert.isFalse(result.replayed)
          firsts.push(trips)
        }
        if (engine === "mariadb") {
          // one statement answers every reservation
          assert.deepStrictEqual([...new Set(replays)], [1])
          assert.deepStrictEqual([...new Set(firsts)], [2])
        } else {
          // the replays switch to reading first; the first executions switch back to inserting first
          assert.strictEqual(replays[0], 2)
          assert.strictEqual(replays.at(-1), 1)
          assert.strictEqual(firsts[0], 3)
          assert.strictEqual(firsts.at(-1), 2)
          assert.isTrue(replays.every((trips) => trips === 1 || trips === 2))
          assert.isTrue(firsts.every((trips) => trips === 2 || trips === 3))
        }
      }))

    it.effect("every other store method sends exactly 1 statement", () =>
      Effect.gen(function*() {
        yield* startClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const token = expectReserved(yield* store.reserve(reserveRequest(id))).token
        const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "1" })
        const trips = [
          (yield* counted(store.extend({ id, token, lease: Duration.seconds(30) })))[1],
          (yield* counted(store.get(id)))[1],
          (yield* counted(store.markFailed({ id, token, ttl: Duration.hours(1) })))[1],
          (yield* counted(Effect.either(store.complete({ id, token, outcome, ttl: Duration.hours(1) }))))[1],
          (yield* counted(Effect.either(store.release({ id, token }))))[1],
          (yield* counted(store.purgeExpired({ limit: 10 })))[1]
        ]
        assert.deepStrictEqual(trips, [1, 1, 1, 1, 1, 1])
      }))
  })
}
