/**
 * Statements per path, counted where the store sends them (`SqlClient.unsafe`, one round trip
 * each), on each engine. MariaDB: a first execution costs 2 (reserve, complete), a replay 1, a
 * conflict 1. SQLite and libSQL: a first execution 2, a replay or a conflict 2 (the upsert that
 * wrote nothing, then the read), and a replay writes nothing; while replays are most of the recent
 * reservations, a replay 1 (the read first) and a first execution 3, until first executions are
 * most of them again.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import { Counting } from "@effect-idempotency/test-support"
import * as RoundTrips from "@effect-idempotency/test-support/RoundTrips"
import { assert, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { randomUUID } from "node:crypto"
import type { Engine } from "./utils/databases.js"
import { engines, layerClient, uniqueTable } from "./utils/databases.js"

/** The statements each engine sends on a path. */
const expected: Record<Engine, RoundTrips.Expected> = {
  mariadb: { replay: 1, conflict: 1 },
  sqlite: { replay: 2, conflict: 2 },
  libsql: { replay: 2, conflict: 2 }
}

const { payload, startClock } = RoundTrips

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
        const operation = RoundTrips.operation("round-trips-storm", () => Effect.succeed(1))
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
        // a reservation's cost is the engine's (above)
        const { reserve: _reserve, takeover: _takeover, ...others } = yield* RoundTrips.perMethod(counted)
        assert.deepStrictEqual(new Set(Object.values(others)), new Set([1]), JSON.stringify(others))
      }))
  })
}
