import { Idempotency, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { assert, layer } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { randomUUID } from "node:crypto"
import { backends, storeLayer } from "./utils/backends.js"
import { recordRequests, startAtWallClock } from "./utils/requests.js"

const Payload = Schema.Struct({ amount: Schema.Number })

/** An operation whose downstream waits for `gate` when one is given. */
const operation = (gate?: { readonly started: Deferred.Deferred<void>; readonly release: Deferred.Deferred<void> }) =>
  Idempotency.make({
    name: `round-trips-${randomUUID()}`,
    payload: Payload,
    success: Schema.String,
    lease: Duration.seconds(30),
    execute: (payload) =>
      gate === undefined
        ? Effect.succeed(`charged ${payload.amount}`)
        : Deferred.succeed(gate.started, undefined).pipe(
          Effect.zipRight(Deferred.await(gate.release)),
          Effect.as(`charged ${payload.amount}`)
        )
  })

for (const backend of backends) {
  // DynamoDB returns the existing item with a failed condition; an emulator that does not costs
  // one consistent read more on the paths that meet an existing record
  const read: ReadonlyArray<string> = backend.returnsItemOnConditionFailure ? [] : ["GetItem"]

  layer(storeLayer(backend), { timeout: Duration.seconds(60) })(`round trips on ${backend.name}`, (it) => {
    it.scoped("first execution 2, replay 1, changed request 1 (KeyReused)", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const requests = yield* recordRequests
        const op = operation()
        const key = randomUUID()
        const first = yield* op.runDetailed({ key, payload: { amount: 5 } })
        assert.isFalse(first.replayed)
        assert.deepStrictEqual(yield* requests.take, ["PutItem", "UpdateItem"])
        const replay = yield* op.runDetailed({ key, payload: { amount: 5 } })
        assert.isTrue(replay.replayed)
        assert.strictEqual(replay.value, first.value)
        assert.deepStrictEqual(yield* requests.take, ["PutItem", ...read])
        const reused = yield* Effect.flip(op.run({ key, payload: { amount: 6 } }))
        assert.strictEqual(reused._tag, "KeyReused")
        assert.deepStrictEqual(yield* requests.take, ["PutItem", ...read])
      }))

    it.scoped("a conflict with a live lease costs 1", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const requests = yield* recordRequests
        const gate = { started: yield* Deferred.make<void>(), release: yield* Deferred.make<void>() }
        const op = operation(gate)
        const key = randomUUID()
        const running = yield* Effect.fork(op.run({ key, payload: { amount: 5 } }))
        yield* Deferred.await(gate.started)
        assert.deepStrictEqual(yield* requests.take, ["PutItem"])
        const conflict = yield* Effect.flip(op.run({ key, payload: { amount: 5 } }))
        assert.strictEqual(conflict._tag, "IdempotencyConflict")
        assert.deepStrictEqual(yield* requests.take, ["PutItem", ...read])
        yield* Deferred.succeed(gate.release, undefined)
        assert.strictEqual(yield* Fiber.join(running), "charged 5")
        assert.deepStrictEqual(yield* requests.take, ["UpdateItem"])
      }))

    it.scoped("a takeover of an ended lease costs one write more than a first execution: 3", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const requests = yield* recordRequests
        const op = operation()
        const key = IdempotencyKey.unsafeMake(randomUUID())
        const id = IdempotencyRecord.makeRecordId({ operation: op.name, key })
        const fingerprint = yield* Idempotency.fingerprint(Payload, { amount: 5 })
        // an attempt that crashed while it held the lease
        const crashed = yield* store.reserve({
          id,
          token: randomUUID(),
          fingerprint,
          lease: Duration.seconds(30),
          ttl: Duration.hours(1),
          takeover: true
        })
        assert.strictEqual(crashed._tag, "Reserved")
        yield* requests.take
        yield* TestClock.adjust(Duration.seconds(31))
        const result = yield* op.runDetailed({ key, payload: { amount: 5 } })
        assert.strictEqual(result.attempt, 2)
        assert.isFalse(result.replayed)
        // the reservation's put meets the ended lease, then the claim takes it over
        assert.deepStrictEqual(yield* requests.take, ["PutItem", ...read, "UpdateItem", "UpdateItem"])
      }))

    it.scoped("an expired record that DynamoDB has not deleted yet costs what a first execution costs: 2", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const requests = yield* recordRequests
        const op = Idempotency.make({
          name: `round-trips-${randomUUID()}`,
          payload: Payload,
          success: Schema.String,
          ttl: Duration.seconds(10),
          execute: (payload) => Effect.succeed(`charged ${payload.amount}`)
        })
        const key = randomUUID()
        yield* op.run({ key, payload: { amount: 5 } })
        yield* requests.take
        yield* TestClock.adjust(Duration.seconds(11))
        const again = yield* op.runDetailed({ key, payload: { amount: 7 } })
        assert.isFalse(again.replayed)
        assert.strictEqual(again.attempt, 1)
        // the reservation's put replaces the expired record
        assert.deepStrictEqual(yield* requests.take, ["PutItem", "UpdateItem"])
      }))

    it.scoped("release, markFailed, extend and get cost 1 each", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const requests = yield* recordRequests
        const id = IdempotencyRecord.makeRecordId({
          operation: `round-trips-${randomUUID()}`,
          key: IdempotencyKey.unsafeMake(randomUUID())
        })
        const reserve = () =>
          store.reserve({
            id,
            token: randomUUID(),
            fingerprint: "sha256:x",
            lease: Duration.seconds(30),
            ttl: Duration.hours(1),
            takeover: true
          }).pipe(Effect.map((result) => result._tag === "Reserved" ? result.token : assert.fail("expected Reserved")))
        const token = yield* reserve()
        yield* requests.take
        yield* store.extend({ id, token, lease: Duration.seconds(60) })
        assert.deepStrictEqual(yield* requests.take, ["UpdateItem"])
        yield* store.get(id)
        assert.deepStrictEqual(yield* requests.take, ["GetItem"])
        yield* store.release({ id, token })
        assert.deepStrictEqual(yield* requests.take, ["DeleteItem"])
        const again = yield* reserve()
        yield* requests.take
        yield* store.markFailed({ id, token: again, ttl: Duration.hours(1) })
        assert.deepStrictEqual(yield* requests.take, ["UpdateItem"])
        // a lost lease is found out in the same single request
        const lost = yield* Effect.flip(store.complete({
          id,
          token: again,
          outcome: IdempotencyRecord.StoredOutcome.Success({ value: "1" }),
          ttl: Duration.hours(1)
        }))
        assert.strictEqual(lost._tag, "LeaseLost")
        assert.deepStrictEqual(yield* requests.take, ["UpdateItem"])
      }))
  })
}
