/**
 * Races on one key across two connections: two stores, each on a client of its own, take turns
 * sending 500 concurrent calls to the run's server, with its clock. Redis runs each script whole
 * before the next, so of every race exactly one call reserves (or takes over) the record, and every
 * other call sees that winner.
 */
import { Idempotency, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import * as Counting from "@effect-idempotency/test-support/Counting"
import * as StoreRaces from "@effect-idempotency/test-support/StoreRaces"
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import { randomUUID } from "node:crypto"
import {
  clientLayer,
  expectExisting,
  expectReserved,
  freshId,
  rawCall,
  rawLayer,
  reserveRequest,
  storeLayer,
  uniquePrefix
} from "./utils/fixtures.js"

const CONCURRENCY = 500
const ROUNDS = 3
const PREFIX = uniquePrefix("race")
const CONNECTIONS = ["idem-race-a", "idem-race-b"] as const
const { payload } = Counting

/** Two stores on the same records, each with a connection of its own. */
class Stores extends Context.Tag("test/Stores")<Stores, ReadonlyArray<IdempotencyStore.IdempotencyStore["Type"]>>() {}

const StoresLive = Layer.scoped(
  Stores,
  Effect.forEach(CONNECTIONS, (connectionName) =>
    Effect.map(
      Layer.build(storeLayer({ prefix: PREFIX }, clientLayer({ connectionName }))),
      (context) => Context.get(context, IdempotencyStore.IdempotencyStore)
    ))
)

/** `CONCURRENCY` calls at once, alternating between the two stores. */
const race = <A, E>(call: (store: IdempotencyStore.IdempotencyStore["Type"]) => Effect.Effect<A, E>) =>
  Effect.flatMap(Stores, (stores) =>
    Effect.all(
      Array.from({ length: CONCURRENCY }, (_, i) => call(stores[i % stores.length]!)),
      { concurrency: "unbounded" }
    ))

const Live = Layer.merge(StoresLive, rawLayer())

layer(Live, { excludeTestServices: true, timeout: "2 minutes" })("RedisStore races across two connections", (it) => {
  it.effect("both stores hold a connection of their own", () =>
    Effect.gen(function*() {
      const stores = yield* Stores
      yield* Effect.forEach(stores, (store) => store.get(freshId()))
      const clients = yield* rawCall((client) => client.client("LIST"))
      for (const name of CONNECTIONS) assert.include(String(clients), `name=${name} `)
    }))

  it.effect(`${CONCURRENCY} concurrent runs of one key execute the downstream once`, () =>
    Effect.gen(function*() {
      const stores = yield* Stores
      for (let round = 0; round < ROUNDS; round++) {
        const { executions, operation } = yield* StoreRaces.operation
        const key = randomUUID()
        const exits = yield* race((store) =>
          Effect.exit(
            operation.run({ key, payload }).pipe(Effect.provideService(IdempotencyStore.IdempotencyStore, store))
          )
        )
        assert.strictEqual(yield* Ref.get(executions), 1)
        StoreRaces.assertOneOutcome(exits, 1)
        for (const store of stores) {
          const replay = yield* operation.runDetailed({ key, payload }).pipe(
            Effect.provideService(IdempotencyStore.IdempotencyStore, store)
          )
          assert.isTrue(replay.replayed)
          assert.strictEqual(replay.value, 1)
        }
      }
    }))

  it.effect(`${CONCURRENCY} concurrent reservations of one key: one owner, every other sees it`, () =>
    Effect.gen(function*() {
      for (let round = 0; round < ROUNDS; round++) {
        const id = freshId()
        const results = yield* race((store) => store.reserve(reserveRequest(id)))
        StoreRaces.assertOneOwner(results, 1)
      }
    }))

  it.effect(`${CONCURRENCY} concurrent takeovers of one ended lease: one new owner, every other sees it`, () =>
    Effect.gen(function*() {
      const stores = yield* Stores
      for (let round = 0; round < ROUNDS; round++) {
        const id = freshId()
        // a crashed attempt whose lease ended at once, on the server's clock
        const crashed = expectReserved(yield* stores[0]!.reserve(reserveRequest(id, { lease: Duration.zero })))
        const results = yield* race((store) => store.reserve(reserveRequest(id)))
        const owner = StoreRaces.assertOneOwner(results, 2)
        assert.notStrictEqual(owner.token, crashed.token)
        // the crashed owner is fenced out, on either connection; the new one completes
        const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "2" })
        for (const store of stores) {
          const lost = yield* Effect.flip(store.complete({ id, token: crashed.token, outcome, ttl: Duration.hours(1) }))
          assert.strictEqual(lost._tag, "LeaseLost")
        }
        yield* stores[1]!.complete({ id, token: owner.token, outcome, ttl: Duration.hours(1) })
        const record = Option.getOrThrow(yield* stores[0]!.get(id))
        assert.deepStrictEqual([record.status, record.token, record.outcome], ["COMPLETED", owner.token, outcome])
      }
    }))

  it.effect(`${CONCURRENCY} concurrent retries of a crashed attempt: one takeover, one execution`, () =>
    Effect.gen(function*() {
      const stores = yield* Stores
      const { executions, operation } = yield* StoreRaces.operation
      const key = randomUUID()
      const id = IdempotencyRecord.makeRecordId({ operation: operation.name, key: IdempotencyKey.unsafeMake(key) })
      const fingerprint = yield* Idempotency.fingerprint(Counting.Payload, payload)
      expectReserved(yield* stores[1]!.reserve(reserveRequest(id, { fingerprint, lease: Duration.zero })))
      const exits = yield* race((store) =>
        Effect.exit(
          operation.runDetailed({ key, payload }).pipe(Effect.provideService(IdempotencyStore.IdempotencyStore, store))
        )
      )
      assert.strictEqual(yield* Ref.get(executions), 1)
      const fresh = exits.filter((exit) => Exit.isSuccess(exit) && !exit.value.replayed)
      assert.strictEqual(fresh.length, 1)
      assert.strictEqual((fresh[0] as Exit.Success<{ readonly attempt: number }, unknown>).value.attempt, 2)
      const replay = expectExisting(yield* stores[0]!.reserve(reserveRequest(id, { fingerprint })))
      assert.strictEqual(replay.record.status, "COMPLETED")
      assert.strictEqual(replay.record.attempt, 2)
    }))
})
