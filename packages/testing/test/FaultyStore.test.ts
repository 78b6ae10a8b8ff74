import { IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { FaultyStore, SimulatedDownstream, StoreConformance } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as TestClock from "effect/TestClock"
import type { Config } from "./utils/orders.js"
import { createOrder, order, OrdersApiSimulated } from "./utils/orders.js"

const memory = IdempotencyStore.layerMemoryWith({ warn: false })

// a wrapper without faults is still a conformant store
StoreConformance.suite("FaultyStore without faults, over the memory store", FaultyStore.layer(memory))

const id = IdempotencyRecord.makeRecordId({ operation: "faulty", key: IdempotencyKey.unsafeMake("k-1") })
const reserveRequest: IdempotencyStore.ReserveRequest = {
  id,
  token: "token-1",
  fingerprint: "sha256:aaaa",
  lease: Duration.seconds(30),
  ttl: Duration.hours(1),
  takeover: true
}

const KEY = "3f0c5c9e-faulty-store"

/** The order operation on a fault-injecting memory store and a simulated orders API. */
const world = (options: { readonly faults: ReadonlyArray<FaultyStore.Fault>; readonly deduplicate: boolean }) =>
  Layer.mergeAll(
    FaultyStore.layer(memory, { script: options.faults }),
    OrdersApiSimulated.pipe(Layer.provideMerge(SimulatedDownstream.layer({ deduplicate: options.deduplicate })))
  )

const keepLease: Config = { timeout: "2 seconds", onTimeout: "keepLease" } // lease: 3 seconds

const attempt = (config: Config) => Effect.exit(createOrder(config).runDetailed({ key: KEY, payload: order }))

const record = Effect.flatMap(IdempotencyStore.IdempotencyStore, (store) =>
  store.get(
    IdempotencyRecord.makeRecordId({ operation: "create-order", key: IdempotencyKey.unsafeMake(KEY) })
  ))

const failureTag = <A, E>(exit: Exit.Exit<A, E>): string | undefined =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" ? (exit.cause.error as { readonly _tag: string })._tag : undefined

describe("FaultyStore", () => {
  it.effect("unavailable before the request: the call fails and the store is untouched", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const error = yield* Effect.flip(store.reserve(reserveRequest))
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.isTrue(Option.isNone(yield* store.get(id)))
      const injected = yield* FaultyStore.injected
      assert.deepStrictEqual(injected.map((injection) => injection.method), ["reserve"])
      // the script is used up: the next call goes through
      const result = yield* store.reserve(reserveRequest)
      assert.strictEqual(result._tag, "Reserved")
    }).pipe(Effect.provide(FaultyStore.layer(memory, { script: [FaultyStore.unavailable("reserve")] }))))

  it.effect("unavailable after the request: the store applied it, the answer was lost", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const error = yield* Effect.flip(store.reserve(reserveRequest))
      assert.strictEqual(error._tag, "StoreUnavailable")
      const stored = yield* store.get(id)
      assert.isTrue(Option.isSome(stored) && stored.value.status === "IN_PROGRESS")
    }).pipe(
      Effect.provide(FaultyStore.layer(memory, { script: [FaultyStore.unavailable("reserve", { applied: true })] }))
    ))

  it.effect("latency delays the call by TestClock time, before or after the store applies it", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      yield* FaultyStore.inject([FaultyStore.latency("reserve", "5 seconds")])
      const slow = yield* Effect.fork(store.reserve(reserveRequest))
      yield* TestClock.adjust("4 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.poll(slow)))
      assert.isTrue(Option.isNone(yield* store.get(id)), "not applied before the latency")
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* Fiber.join(slow))._tag, "Reserved")

      // a pause after the store applied the request: the lease runs while the caller waits
      yield* FaultyStore.inject([FaultyStore.pauseAfterReserve("40 seconds")])
      const paused = yield* Effect.fork(store.reserve({ ...reserveRequest, id: { ...id, value: `${id.value}-2` } }))
      yield* TestClock.adjust("1 second")
      const applied = yield* store.get({ ...id, value: `${id.value}-2` })
      assert.isTrue(Option.isSome(applied), "applied before the pause")
      yield* TestClock.adjust("39 seconds")
      const result = yield* Fiber.join(paused)
      const now = yield* Clock.currentTimeMillis
      assert.isTrue(result._tag === "Reserved" && result.leaseUntil <= now, "the lease ended during the pause")
    }).pipe(Effect.provide(FaultyStore.layer(memory))))

  it.effect("crash before reserve: the downstream is never called and the key stays free", () =>
    Effect.gen(function*() {
      const first = yield* attempt(keepLease)
      assert.isTrue(Exit.isInterrupted(first))
      assert.strictEqual((yield* SimulatedDownstream.calls).length, 0)
      assert.isTrue(Option.isNone(yield* record))
      const retry = yield* attempt(keepLease)
      assert.isTrue(Exit.isSuccess(retry) && !retry.value.replayed)
      assert.strictEqual((yield* SimulatedDownstream.writes).length, 1)
    }).pipe(Effect.provide(world({ faults: [FaultyStore.crash("beforeReserve")], deduplicate: false }))))

  it.effect("crash after reserve: the key stays blocked until the lease ends, then a retry executes", () =>
    Effect.gen(function*() {
      const first = yield* attempt(keepLease)
      assert.isTrue(Exit.isInterrupted(first))
      assert.strictEqual((yield* SimulatedDownstream.calls).length, 0)
      assert.strictEqual(failureTag(yield* attempt(keepLease)), "IdempotencyConflict")
      yield* TestClock.adjust("3 seconds")
      const retry = yield* attempt(keepLease)
      assert.isTrue(Exit.isSuccess(retry) && retry.value.attempt === 2, "taken over")
      assert.strictEqual((yield* SimulatedDownstream.writes).length, 1)
    }).pipe(Effect.provide(world({ faults: [FaultyStore.crash("afterReserve")], deduplicate: false }))))

  it.effect("crash after the downstream call: the completion is lost and a retry writes again", () =>
    Effect.gen(function*() {
      const first = yield* attempt(keepLease)
      assert.isTrue(Exit.isInterrupted(first))
      assert.strictEqual((yield* SimulatedDownstream.writes).length, 1)
      const stored = yield* record
      assert.isTrue(Option.isSome(stored) && stored.value.status === "IN_PROGRESS", "nothing recorded")
      yield* TestClock.adjust("3 seconds")
      const retry = yield* attempt(keepLease)
      assert.isTrue(Exit.isSuccess(retry))
      assert.strictEqual((yield* SimulatedDownstream.duplicates).length, 1, "the lost completion, reproduced")
    }).pipe(Effect.provide(world({ faults: [FaultyStore.crash("afterDownstream")], deduplicate: false }))))

  it.effect("crash after the downstream call, with a deduplicating downstream: the retry gets the first write", () =>
    Effect.gen(function*() {
      yield* attempt(keepLease)
      yield* TestClock.adjust("3 seconds")
      const retry = yield* attempt(keepLease)
      assert.isTrue(Exit.isSuccess(retry) && retry.value.value.orderId === 1)
      assert.strictEqual((yield* SimulatedDownstream.writes).length, 1)
      const calls = yield* SimulatedDownstream.calls
      assert.deepStrictEqual(calls.map((call) => call.effect), ["applied", "deduplicated"])
    }).pipe(Effect.provide(world({ faults: [FaultyStore.crash("afterDownstream")], deduplicate: true }))))

  it.effect("crash before complete hits a completion only; a release passes", () =>
    Effect.gen(function*() {
      yield* SimulatedDownstream.enqueue([SimulatedDownstream.fail("Unavailable")])
      const failed = yield* attempt(keepLease)
      assert.strictEqual(failureTag(failed), "OrdersUnavailable", "released: the crash waits for a completion")
      assert.isTrue(Option.isNone(yield* record))
      const crashed = yield* attempt(keepLease)
      assert.isTrue(Exit.isInterrupted(crashed))
      const injected = yield* FaultyStore.injected
      assert.deepStrictEqual(injected.map((injection) => injection.method), ["complete"])
    }).pipe(Effect.provide(world({ faults: [FaultyStore.crash("beforeComplete")], deduplicate: false }))))

  it.effect("crash after complete: the outcome is recorded, and the retry replays it", () =>
    Effect.gen(function*() {
      const first = yield* attempt(keepLease)
      assert.isTrue(Exit.isInterrupted(first))
      const retry = yield* attempt(keepLease)
      assert.isTrue(Exit.isSuccess(retry) && retry.value.replayed && retry.value.value.orderId === 1)
      assert.strictEqual((yield* SimulatedDownstream.writes).length, 1)
    }).pipe(Effect.provide(world({ faults: [FaultyStore.crash("afterComplete")], deduplicate: false }))))

  it.effect("a fiber's own faults come first, and stay with that fiber", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const mine = yield* store.reserve(reserveRequest).pipe(
        Effect.flip,
        FaultyStore.withFaults([FaultyStore.unavailable("reserve")])
      )
      assert.strictEqual(mine._tag, "StoreUnavailable")
      const other = yield* store.reserve(reserveRequest)
      assert.strictEqual(other._tag, "Reserved")
    }).pipe(Effect.provide(FaultyStore.layer(memory))))

  it.effect("random faults: with probability 1 every call fails; a seeded Random repeats the same faults", () =>
    Effect.gen(function*() {
      const play = Effect.gen(function*() {
        const { store } = yield* FaultyStore.make(yield* IdempotencyStore.makeMemory({ warn: false }), {
          random: { unavailable: 1 }
        })
        const errors: Array<string> = []
        for (let i = 0; i < 40; i++) {
          const error = yield* Effect.flip(store.reserve({ ...reserveRequest, token: `t-${i}` }))
          errors.push(error._tag)
        }
        const stored = yield* Effect.either(store.get(id))
        return { errors, stored }
      })
      const first = yield* Effect.withRandom(play, Random.make("seed-1"))
      const second = yield* Effect.withRandom(play, Random.make("seed-1"))
      assert.isTrue(first.errors.every((tag) => tag === "StoreUnavailable"))
      assert.deepStrictEqual(first.errors, second.errors)

      const { control, store } = yield* FaultyStore.make(yield* IdempotencyStore.makeMemory({ warn: false }), {
        random: { unavailable: 1 }
      })
      for (let i = 0; i < 200; i++) {
        yield* Effect.ignore(store.reserve({ ...reserveRequest, token: `t-${i}` }))
      }
      const applied = (yield* control.injected).filter((injection) =>
        injection.fault._tag === "Unavailable" && injection.fault.applied
      ).length
      assert.isTrue(applied > 50 && applied < 150, `about half applied: ${applied}`)
    }))

  it.effect("random crashes hit only the crash points of the call", () =>
    Effect.gen(function*() {
      const { control, store } = yield* FaultyStore.make(yield* IdempotencyStore.makeMemory({ warn: false }), {
        random: { crash: 1 }
      })
      const reserve = yield* Effect.exit(store.reserve(reserveRequest))
      assert.isTrue(Exit.isInterrupted(reserve))
      const get = yield* store.get(id)
      assert.isTrue(Option.isNone(get), "crashed before reserve: nothing applied")
      const injected = yield* control.injected
      assert.deepStrictEqual(injected.map((injection) => injection.fault), [FaultyStore.crash("beforeReserve")])
    }))
})
